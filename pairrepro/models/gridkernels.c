/* Fused elementwise kernels of the 2-D recurrence engine (pairrepro/models/grid.py).
 *
 * Each function does, in one pass over a diagonal's cells, what the eager path does in
 * five to fifteen torch operations: the LSTM update of a diagonal (lstm_fwd / lstm_bwd) and
 * DF-LSTM's attention read over its K memory slots (attn_fwd / attn_bwd). Built on first
 * use by pairrepro/models/gridkernels.py with the machine's own compiler and ISA
 * (-O3 -march=native) and called through ctypes; where no compiler is found the eager path
 * runs instead.
 *
 * Two element types: the LSTM functions exist as _f32 (everything float) and _bf16 (the
 * tensors that are matrix-product operands or outputs are bfloat16, the memory cells,
 * their gradients and every accumulator float); the attention ones as _bf16 only (in
 * float32 torch's own kernels, a GEMM for the scores among them, were as fast or faster on
 * one core). The arithmetic is float throughout.
 *
 * Addressing: a diagonal's cells are l = 0..L-1, each with B batch rows b; the row (l, b)
 * of an array starts at p + l*outer + b*inner (elements). A contiguous [L, B, X] tensor has
 * outer = B*X, inner = X; the same two numbers describe column slices and DF-LSTM's memory
 * stores. A row's d values are contiguous.
 *
 * Vectors: a row of d values is processed W at a time with GCC/clang vector extensions
 * (one AVX-512 register, two AVX2 ones, ...), its last W or fewer values through a
 * zero-padded copy. Loops written over single floats leave the d % W remainder to scalar
 * code, which took 40% of the time at DF-LSTM's d = 100 and TC-LSTM's d = 50.
 *
 * Results depend on nothing but the inputs and the machine (each output element is
 * computed in a fixed order), so a resumed run repeats an uninterrupted one bit for bit.
 */
#include <stdint.h>
#include <string.h>

#define W 16
typedef float vf __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));
typedef uint32_t vu __attribute__((vector_size(4 * W)));
typedef uint16_t vh __attribute__((vector_size(2 * W)));
typedef uint16_t bf16;

#define INLINE static inline __attribute__((always_inline))

INLINE int chunk(int64_t d, int64_t j) { return d - j < W ? (int)(d - j) : W; }

INLINE vf splat(float x) { return (vf){0} + x; }

/* Loads and stores of the first n (1..W) values of a row: the unused lanes read zero. With
 * AVX-512 masked moves (one instruction for a full chunk and for the last one); elsewhere
 * a full chunk is one copy and the last one an element loop. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

INLINE __mmask16 lanes(int n) { return (__mmask16)((1u << n) - 1u); }
INLINE vf ld_f32(const float *p, int n) { return (vf)_mm512_maskz_loadu_ps(lanes(n), p); }
INLINE void st_f32(float *p, vf v, int n) { _mm512_mask_storeu_ps(p, lanes(n), (__m512)v); }
INLINE vh ld_u16(const bf16 *p, int n) { return (vh)_mm256_maskz_loadu_epi16(lanes(n), p); }
INLINE void st_u16(bf16 *p, vh h, int n) { _mm256_mask_storeu_epi16(p, lanes(n), (__m256i)h); }
#else
INLINE vf ld_f32(const float *p, int n) {
    vf v = {0};
    if (n == W) memcpy(&v, p, sizeof v);
    else for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}
INLINE void st_f32(float *p, vf v, int n) {
    if (n == W) memcpy(p, &v, sizeof v);
    else for (int i = 0; i < n; i++) p[i] = v[i];
}
INLINE vh ld_u16(const bf16 *p, int n) {
    vh h = {0};
    if (n == W) memcpy(&h, p, sizeof h);
    else for (int i = 0; i < n; i++) h[i] = p[i];
    return h;
}
INLINE void st_u16(bf16 *p, vh h, int n) {
    if (n == W) memcpy(p, &h, sizeof h);
    else for (int i = 0; i < n; i++) p[i] = h[i];
}
#endif

INLINE vf ld_bf16(const bf16 *p, int n) {
    return (vf)(__builtin_convertvector(ld_u16(p, n), vu) << 16);
}

/* round to nearest even, as torch does; NaN stays NaN (one instruction with AVX512-BF16) */
INLINE void st_bf16(bf16 *p, vf v, int n) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    st_u16(p, (vh)(__m256i)_mm512_cvtneps_pbh((__m512)v), n);
#else
    vu u = (vu)v;
    vu rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    vu nan = (vu)((u & 0x7FFFFFFFu) > 0x7F800000u);
    vu bits = (rounded & ~nan) | (((u >> 16) | 0x40u) & nan);
    st_u16(p, __builtin_convertvector(bits, vh), n);
#endif
}

/* exp(x) as Cephes' expf (about 1 ulp): x = n ln 2 + r, |r| <= ln 2 / 2 (ln 2 in two parts),
 * e^r by a degree-6 polynomial, times 2^n; x is first clamped to where float exp is finite
 * and normal (a NaN stays NaN). AVX-512 rounds and scales in one instruction each
 * (vrndscaleps, vscalefps), 13 operations against 20 for the integer bit tricks. */
INLINE vf exp_poly(vf r) {
    vf p = splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return p * r * r + r + 1.0f;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
INLINE vf vexp(vf x) {
    /* max/min return their second operand when one is NaN: the NaN x goes on */
    __m512 c = _mm512_min_ps(_mm512_set1_ps(88.0f),
                             _mm512_max_ps(_mm512_set1_ps(-87.0f), (__m512)x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = (vf)c - (vf)n * 0.693359375f;
    r = r - (vf)n * -2.12194440e-4f;
    return (vf)_mm512_scalef_ps((__m512)exp_poly(r), n);
}
#else
INLINE vf vmax(vf a, vf b) { vi m = a < b; return (vf)((m & (vi)b) | (~m & (vi)a)); }
INLINE vf vmin(vf a, vf b) { vi m = a > b; return (vf)((m & (vi)b) | (~m & (vi)a)); }

INLINE vf vexp(vf x) {
    x = vmin(vmax(x, splat(-87.0f)), splat(88.0f));
    /* x / ln 2 rounded to the nearest integer by the 1.5 * 2^23 trick */
    vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    vf r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vi e = (__builtin_convertvector(n, vi) + 127) << 23;
    return exp_poly(r) * (vf)e;
}
#endif

INLINE vf vsigmoid(vf x) { return 1.0f / (1.0f + vexp(-x)); }

/* tanh(x) = 1 - 2 / (1 + e^{2x}): exact up to rounding, and one exp like the sigmoid */
INLINE vf vtanh(vf x) { return 1.0f - 2.0f / (1.0f + vexp(2.0f * x)); }

/* the lanes of v summed in a fixed order (the same on every call) */
INLINE float hsum(vf v) {
    float s = 0.0f;
    for (int i = 0; i < W; i++) s += v[i];
    return s;
}

INLINE float sexp(float x) { return vexp(splat(x))[0]; }

#define ROW(p, l, b, outer, inner) ((p) + (l) * (outer) + (b) * (inner))

/* ---------------------------------------------------------------------------------------
 * lstm_fwd: gates [c~, o, i, f_1 .. f_nk] (pre-activations, each d wide, nk = 0..2) are
 * overwritten by their activations (tanh for c~, sigmoid for the rest); c = c~ i +
 * sum_k f_k c_k, tanh_c = tanh(c), h = o tanh(c), and h again into h2 (DF-LSTM's memory
 * store; pass h itself when there is none). c_k covers the cells first_k .. first_k +
 * len_k - 1; the others read `zeros` (d zeros), as does a c_k the caller has not got.
 * ------------------------------------------------------------------------------------- */
#define LSTM_FWD(NAME, T, LD, ST)                                                            \
INLINE void NAME##_row(int64_t d, int nk, T *g, const float *p0, const float *p1,     \
                              float *cr, float *tr, T *hr, T *h2r) {                         \
    for (int64_t j = 0; j < d; j += W) {                                                     \
        int n = chunk(d, j);                                                                 \
        vf cand = vtanh(LD(g + j, n)), o = vsigmoid(LD(g + d + j, n));                       \
        vf i = vsigmoid(LD(g + 2 * d + j, n)), cv = cand * i;                                \
        ST(g + j, cand, n);                                                                  \
        ST(g + d + j, o, n);                                                                 \
        ST(g + 2 * d + j, i, n);                                                             \
        if (nk > 0) {                                                                        \
            vf f = vsigmoid(LD(g + 3 * d + j, n));                                           \
            ST(g + 3 * d + j, f, n);                                                         \
            cv += f * ld_f32(p0 + j, n);                                                     \
        }                                                                                    \
        if (nk > 1) {                                                                        \
            vf f = vsigmoid(LD(g + 4 * d + j, n));                                           \
            ST(g + 4 * d + j, f, n);                                                         \
            cv += f * ld_f32(p1 + j, n);                                                     \
        }                                                                                    \
        vf t = vtanh(cv);                                                                    \
        st_f32(cr + j, cv, n);                                                               \
        st_f32(tr + j, t, n);                                                                \
        ST(hr + j, o * t, n);                                                                \
        ST(h2r + j, o * t, n);                                                               \
    }                                                                                        \
}                                                                                            \
void NAME(int64_t L, int64_t B, int64_t d, int64_t nk,                                       \
          T *gates, int64_t g_o, int64_t g_i,                                                \
          const float *c0, int64_t c0_o, int64_t c0_i, int64_t c0_first, int64_t c0_len,     \
          const float *c1, int64_t c1_o, int64_t c1_i, int64_t c1_first, int64_t c1_len,     \
          float *c, int64_t c_o, int64_t c_i, float *tc, int64_t tc_o, int64_t tc_i,         \
          T *h, int64_t h_o, int64_t h_i, T *h2, int64_t h2_o, int64_t h2_i,                 \
          const float *zeros) {                                                              \
    for (int64_t l = 0; l < L; l++) {                                                        \
        int has0 = l >= c0_first && l < c0_first + c0_len;                                   \
        int has1 = l >= c1_first && l < c1_first + c1_len;                                   \
        for (int64_t b = 0; b < B; b++) {                                                    \
            T *g = ROW(gates, l, b, g_o, g_i);                                               \
            const float *p0 = has0 ? ROW(c0, l - c0_first, b, c0_o, c0_i) : zeros;           \
            const float *p1 = has1 ? ROW(c1, l - c1_first, b, c1_o, c1_i) : zeros;           \
            float *cr = ROW(c, l, b, c_o, c_i), *tr = ROW(tc, l, b, tc_o, tc_i);             \
            T *hr = ROW(h, l, b, h_o, h_i), *h2r = ROW(h2, l, b, h2_o, h2_i);                \
            /* nk as a constant in each call, so the unused gates cost nothing */            \
            if (nk == 2) NAME##_row(d, 2, g, p0, p1, cr, tr, hr, h2r);                       \
            else if (nk == 1) NAME##_row(d, 1, g, p0, p1, cr, tr, hr, h2r);                  \
            else NAME##_row(d, 0, g, p0, p1, cr, tr, hr, h2r);                               \
        }                                                                                    \
    }                                                                                        \
}

LSTM_FWD(lstm_fwd_f32, float, ld_f32, st_f32)
LSTM_FWD(lstm_fwd_bf16, bf16, ld_bf16, st_bf16)

/* ---------------------------------------------------------------------------------------
 * lstm_bwd: the backward pass of lstm_fwd. dh = dh_a + dh_b + dh_c (float, T, T) reaches
 * h (pass `zeros` with strides 0 for a term that is absent); dc (float, in/out) reaches c
 * and becomes c's full gradient. Writes d_gates (T) in the gates' layout (0 for f_k where
 * a cell has no c_k) and adds f_k dc to dp_k (float, rows as c_k). `scratch` (2 d floats)
 * takes the writes of cells without a c_k.
 * ------------------------------------------------------------------------------------- */
#define LSTM_BWD(NAME, T, LD, ST)                                                            \
INLINE void NAME##_row(int64_t d, int nk, const T *a, const float *p0,                \
                              const float *p1, const float *tr, const float *ha,             \
                              const T *hb, const T *hc, float *dcr, T *g, float *q0,         \
                              float *q1) {                                                   \
    for (int64_t j = 0; j < d; j += W) {                                                     \
        int n = chunk(d, j);                                                                 \
        vf dh = ld_f32(ha + j, n) + LD(hb + j, n) + LD(hc + j, n);                           \
        vf cand = LD(a + j, n), o = LD(a + d + j, n), i = LD(a + 2 * d + j, n);              \
        vf t = ld_f32(tr + j, n);                                                            \
        vf dcv = ld_f32(dcr + j, n) + dh * o * (1.0f - t * t);                               \
        st_f32(dcr + j, dcv, n);                                                             \
        ST(g + j, dcv * i * (1.0f - cand * cand), n);                                        \
        ST(g + d + j, dh * t * o * (1.0f - o), n);                                           \
        ST(g + 2 * d + j, dcv * cand * i * (1.0f - i), n);                                   \
        if (nk > 0) {                                                                        \
            vf f = LD(a + 3 * d + j, n);                                                     \
            ST(g + 3 * d + j, dcv * ld_f32(p0 + j, n) * f * (1.0f - f), n);                  \
            st_f32(q0 + j, ld_f32(q0 + j, n) + dcv * f, n);                                  \
        }                                                                                    \
        if (nk > 1) {                                                                        \
            vf f = LD(a + 4 * d + j, n);                                                     \
            ST(g + 4 * d + j, dcv * ld_f32(p1 + j, n) * f * (1.0f - f), n);                  \
            st_f32(q1 + j, ld_f32(q1 + j, n) + dcv * f, n);                                  \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
void NAME(int64_t L, int64_t B, int64_t d, int64_t nk,                                       \
          const T *act, int64_t a_o, int64_t a_i,                                            \
          const float *c0, int64_t c0_o, int64_t c0_i, int64_t c0_first, int64_t c0_len,     \
          const float *c1, int64_t c1_o, int64_t c1_i, int64_t c1_first, int64_t c1_len,     \
          const float *tc, int64_t tc_o, int64_t tc_i,                                       \
          const float *dha, int64_t dha_o, int64_t dha_i,                                    \
          const T *dhb, int64_t dhb_o, int64_t dhb_i,                                        \
          const T *dhc, int64_t dhc_o, int64_t dhc_i,                                        \
          float *dc, int64_t dc_o, int64_t dc_i,                                             \
          T *dg, int64_t dg_o, int64_t dg_i,                                                 \
          float *dp0, int64_t dp0_o, int64_t dp0_i,                                          \
          float *dp1, int64_t dp1_o, int64_t dp1_i,                                          \
          const float *zeros, float *scratch) {                                              \
    for (int64_t l = 0; l < L; l++) {                                                        \
        int has0 = l >= c0_first && l < c0_first + c0_len;                                   \
        int has1 = l >= c1_first && l < c1_first + c1_len;                                   \
        for (int64_t b = 0; b < B; b++) {                                                    \
            const T *a = ROW(act, l, b, a_o, a_i);                                           \
            const float *p0 = has0 ? ROW(c0, l - c0_first, b, c0_o, c0_i) : zeros;           \
            const float *p1 = has1 ? ROW(c1, l - c1_first, b, c1_o, c1_i) : zeros;           \
            float *q0 = has0 ? ROW(dp0, l - c0_first, b, dp0_o, dp0_i) : scratch;            \
            float *q1 = has1 ? ROW(dp1, l - c1_first, b, dp1_o, dp1_i) : scratch + d;        \
            const float *tr = ROW(tc, l, b, tc_o, tc_i), *ha = ROW(dha, l, b, dha_o, dha_i); \
            const T *hb = ROW(dhb, l, b, dhb_o, dhb_i), *hc = ROW(dhc, l, b, dhc_o, dhc_i);  \
            float *dcr = ROW(dc, l, b, dc_o, dc_i);                                          \
            T *g = ROW(dg, l, b, dg_o, dg_i);                                                \
            if (nk == 2) NAME##_row(d, 2, a, p0, p1, tr, ha, hb, hc, dcr, g, q0, q1);        \
            else if (nk == 1) NAME##_row(d, 1, a, p0, p1, tr, ha, hb, hc, dcr, g, q0, q1);   \
            else NAME##_row(d, 0, a, p0, p1, tr, ha, hb, hc, dcr, g, q0, q1);                \
        }                                                                                    \
    }                                                                                        \
}

LSTM_BWD(lstm_bwd_f32, float, ld_f32, st_f32)
LSTM_BWD(lstm_bwd_bf16, bf16, ld_bf16, st_bf16)

/* ---------------------------------------------------------------------------------------
 * attn_fwd: DF-LSTM's attention read of one side over a diagonal. Slot k of cell l, row b:
 * keys / values at p + l*cell + k*slot + b*d (keys stored doubled, 2 W_mem h). With
 * e_k = sigmoid(key_k + 2 q) the scores are s_k = 2 v.e_k + mask[l, k] (v.tanh(..) up to
 * a constant the softmax ignores), attn = softmax_k(s) (float, [L, K, B]) and
 * r = sum_k attn_k value_k. `work`: (3 B + 1) dp + K B floats, dp = d rounded up to W.
 *
 * A cell's K slots of all B rows are one contiguous block (slot = B*d), read in order: slot
 * by slot, row by row, with the per-row sums in `work`. Row-major order (all K slots of a
 * row, then the next row) jumps B*d floats at each slot, and ran at half the speed. The
 * running sums are plain (unmasked) vectors: a masked store read back soon after stalls
 * the load on AMD cores.
 * ------------------------------------------------------------------------------------- */
#define MAX_SLOTS 64

INLINE vf ld_full(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
INLINE void st_full(float *p, vf v) { memcpy(p, &v, sizeof v); }

#define ATTN_FWD(NAME, T, LD, ST)                                                            \
int NAME(int64_t L, int64_t B, int64_t d, int64_t K,                                         \
         const T *keys, const T *vals, int64_t cell, int64_t slot,                           \
         const T *q, int64_t q_o, int64_t q_i, const float *v, const float *mask,            \
         float *attn, T *r, int64_t r_o, int64_t r_i, float *work) {                         \
    if (K > MAX_SLOTS) return 1;                                                             \
    int64_t dp = (d + W - 1) / W * W;                                                        \
    float *q2s = work, *out = work + B * dp; /* [B, dp] each */                              \
    for (int64_t l = 0; l < L; l++) {                                                        \
        float *al = attn + l * K * B; /* [K, B]: the scores, then the weights */             \
        for (int64_t b = 0; b < B; b++) {                                                    \
            const T *qr = ROW(q, l, b, q_o, q_i);                                            \
            for (int64_t j = 0; j < d; j += W) {                                             \
                st_full(q2s + b * dp + j, 2.0f * LD(qr + j, chunk(d, j)));                   \
                st_full(out + b * dp + j, splat(0.0f));                                      \
            }                                                                                \
        }                                                                                    \
        for (int64_t k = 0; k < K; k++) {                                                    \
            for (int64_t b = 0; b < B; b++) {                                                \
                const T *kr = keys + l * cell + k * slot + b * d;                            \
                vf acc = {0};                                                                \
                for (int64_t j = 0; j < d; j += W) {                                         \
                    int n = chunk(d, j); /* padded lanes: v = 0 */                           \
                    acc += ld_f32(v + j, n) * vsigmoid(LD(kr + j, n) + ld_full(q2s + b * dp + j)); \
                }                                                                            \
                al[k * B + b] = 2.0f * hsum(acc) + mask[l * K + k];                          \
            }                                                                                \
        }                                                                                    \
        for (int64_t b = 0; b < B; b++) {                                                    \
            float top = -3.0e38f, total = 0.0f;                                              \
            for (int64_t k = 0; k < K; k++) top = al[k * B + b] > top ? al[k * B + b] : top; \
            for (int64_t k = 0; k < K; k++) {                                                \
                al[k * B + b] = sexp(al[k * B + b] - top);                                   \
                total += al[k * B + b];                                                      \
            }                                                                                \
            for (int64_t k = 0; k < K; k++) al[k * B + b] /= total;                          \
        }                                                                                    \
        for (int64_t k = 0; k < K; k++) {                                                    \
            for (int64_t b = 0; b < B; b++) {                                                \
                const T *vr = vals + l * cell + k * slot + b * d;                            \
                float w = al[k * B + b], *o = out + b * dp;                                  \
                for (int64_t j = 0; j < d; j += W)                                           \
                    st_full(o + j, ld_full(o + j) + w * LD(vr + j, chunk(d, j)));            \
            }                                                                                \
        }                                                                                    \
        for (int64_t b = 0; b < B; b++) {                                                    \
            T *rr = ROW(r, l, b, r_o, r_i);                                                  \
            for (int64_t j = 0; j < d; j += W) ST(rr + j, ld_full(out + b * dp + j), chunk(d, j)); \
        }                                                                                    \
    }                                                                                        \
    return 0;                                                                                \
}

ATTN_FWD(attn_fwd_bf16, bf16, ld_bf16, st_bf16)

/* ---------------------------------------------------------------------------------------
 * attn_bwd: the backward pass of attn_fwd over one diagonal's cells (the readers), the
 * slots they read included. dr = dra + drb (T, float; pass `zeros` with strides 0 for an
 * absent term) reaches r. The scores' gradient ds_k = attn_k (value_k . dr - sum_j attn_j
 * value_j . dr) is kept per cell in `work` (its [K, B] tail); dq = sum_k 4 v e_k (1 - e_k)
 * ds_k (T) is written; 2 sum_k ds_k e_k is added to gv (float [d]), attn_k dr to the value's and
 * 4 v e_k (1 - e_k) ds_k to the key's gradient of each slot read: dvals / dkeys, float
 * stores with the keys' and values' layout, which the K diagonals reading a slot add into
 * in turn (pushed while e_k is at hand; pulling them later from the readers computed every
 * e_k a third time). Slot-by-slot order as attn_fwd.
 * ------------------------------------------------------------------------------------- */
#define ATTN_BWD(NAME, T, LD, ST)                                                            \
int NAME(int64_t L, int64_t B, int64_t d, int64_t K,                                         \
         const T *keys, const T *vals, int64_t cell, int64_t slot,                           \
         const T *q, int64_t q_o, int64_t q_i, const float *v, const float *attn,            \
         const T *dra, int64_t dra_o, int64_t dra_i,                                         \
         const float *drb, int64_t drb_o, int64_t drb_i,                                     \
         float *dvals, float *dkeys, T *dq, int64_t dq_o, int64_t dq_i,                      \
         float *gv, float *work) {                                                           \
    if (K > MAX_SLOTS) return 1;                                                             \
    int64_t dp = (d + W - 1) / W * W;                                                        \
    float *q2s = work, *grs = work + B * dp, *dqs = work + 2 * B * dp, *gvs = work + 3 * B * dp; \
    for (int64_t j = 0; j < dp; j += W) st_full(gvs + j, splat(0.0f));                       \
    for (int64_t l = 0; l < L; l++) {                                                        \
        const float *al = attn + l * K * B;                                                  \
        float *dl = gvs + dp; /* [K, B]: the scores' gradient */                             \
        for (int64_t b = 0; b < B; b++) {                                                    \
            const T *qr = ROW(q, l, b, q_o, q_i), *ra = ROW(dra, l, b, dra_o, dra_i);        \
            const float *rb = ROW(drb, l, b, drb_o, drb_i);                                  \
            for (int64_t j = 0; j < d; j += W) {                                             \
                int n = chunk(d, j);                                                         \
                vf g = LD(ra + j, n) + ld_f32(rb + j, n);                                    \
                st_full(q2s + b * dp + j, 2.0f * LD(qr + j, n));                             \
                st_full(grs + b * dp + j, g);                                                \
                st_full(dqs + b * dp + j, splat(0.0f));                                      \
            }                                                                                \
        }                                                                                    \
        for (int64_t k = 0; k < K; k++) { /* d attn_k = value_k . dr */                      \
            for (int64_t b = 0; b < B; b++) {                                                \
                const T *vr = vals + l * cell + k * slot + b * d;                            \
                float *dvr = dvals + l * cell + k * slot + b * d, a = al[k * B + b];         \
                const float *g = grs + b * dp;                                               \
                vf acc = {0};                                                                \
                for (int64_t j = 0; j < d; j += W) {                                         \
                    int n = chunk(d, j);                                                     \
                    vf gj = ld_full(g + j);                                                  \
                    acc += LD(vr + j, n) * gj;                                               \
                    st_f32(dvr + j, ld_f32(dvr + j, n) + a * gj, n);                         \
                }                                                                            \
                dl[k * B + b] = hsum(acc);                                                   \
            }                                                                                \
        }                                                                                    \
        for (int64_t b = 0; b < B; b++) { /* through the softmax */                          \
            float mean = 0.0f;                                                               \
            for (int64_t k = 0; k < K; k++) mean += al[k * B + b] * dl[k * B + b];           \
            for (int64_t k = 0; k < K; k++) dl[k * B + b] = al[k * B + b] * (dl[k * B + b] - mean); \
        }                                                                                    \
        for (int64_t k = 0; k < K; k++) { /* through the scores to q and v */                \
            for (int64_t b = 0; b < B; b++) {                                                \
                const T *kr = keys + l * cell + k * slot + b * d;                            \
                float *dkr = dkeys + l * cell + k * slot + b * d;                            \
                float g = dl[k * B + b], *dqr = dqs + b * dp;                                \
                const float *q2 = q2s + b * dp;                                              \
                for (int64_t j = 0; j < d; j += W) {                                         \
                    int n = chunk(d, j);                                                     \
                    vf e = vsigmoid(LD(kr + j, n) + ld_full(q2 + j));                        \
                    st_full(gvs + j, ld_full(gvs + j) + 2.0f * g * e);                       \
                    vf dk = 4.0f * ld_f32(v + j, n) * e * (1.0f - e) * g;                    \
                    st_full(dqr + j, ld_full(dqr + j) + dk);                                 \
                    st_f32(dkr + j, ld_f32(dkr + j, n) + dk, n);                             \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        for (int64_t b = 0; b < B; b++) {                                                    \
            T *dqr = ROW(dq, l, b, dq_o, dq_i);                                              \
            for (int64_t j = 0; j < d; j += W) ST(dqr + j, ld_full(dqs + b * dp + j), chunk(d, j)); \
        }                                                                                    \
    }                                                                                        \
    for (int64_t j = 0; j < d; j += W) {                                                     \
        int n = chunk(d, j);                                                                 \
        st_f32(gv + j, ld_f32(gv + j, n) + ld_full(gvs + j), n);                             \
    }                                                                                        \
    return 0;                                                                                \
}

ATTN_BWD(attn_bwd_bf16, bf16, ld_bf16, st_bf16)
