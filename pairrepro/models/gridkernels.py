"""The grid engine's fused elementwise kernels (``gridkernels.c``): each LSTM update or
DF-LSTM attention read of a diagonal in one pass, built on first use per source, compiler and
CPU and loaded with :mod:`ctypes` (why: docs/grid-engine.md). Where they cannot run, callers
take their eager path, the same function; :func:`status` says which and why.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("gridkernels.c")
ENV = "PAIRREPRO_GRID_KERNELS"  # "0": always the eager path
FLAGS = ("-O3", "-std=gnu11", "-shared", "-fPIC")
# tried in order: the machine's own ISA first, then the compiler's default target
ISA_FLAGS: tuple[tuple[str, ...], ...] = (("-march=native",), ())
TYPES = {torch.float32: "f32", torch.bfloat16: "bf16"}

_I, _P = ctypes.c_int64, ctypes.c_void_p
# argument kinds of each function: "i" an int64, "p" a pointer; an array is "p" plus its
# (outer, inner) strides, see the C file's header
SIGNATURES = {
    "lstm_fwd": "iiii" + "pii" + "piiii" * 2 + "pii" * 4 + "p",
    "lstm_bwd": "iiii" + "pii" + "piiii" * 2 + "pii" * 8 + "pp",
    "attn_fwd": "iiii" + "ppii" + "pii" + "pp" + "p" + "pii" + "p",
    "attn_bwd": "iiii" + "ppii" + "pii" + "pp" + "pii" * 2 + "pp" + "pii" + "pp",
}
MAX_SLOTS = 64  # gridkernels.c's MAX_SLOTS: DF-LSTM's K above it runs the eager path
VECTOR = 16  # gridkernels.c's W: floats per vector


def cache_dir() -> Path:
    """Where built kernels are kept: ``$XDG_CACHE_HOME/pairrepro/kernels`` (``~/.cache``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pairrepro" / "kernels"


def _build(compiler: str, folder: Path) -> tuple[Path | None, str]:
    """The library for this source, compiler and CPU (built if absent), or None and why."""
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"compiler {compiler} does not run: {exc}"
    from pairrepro.device import cpu_flags, cpu_model

    errors = []
    for isa in ISA_FLAGS:
        key = hashlib.sha256("\n".join([
            SOURCE.read_text(encoding="utf-8"), compiler, version, *FLAGS, *isa, cpu_model(),
            " ".join(sorted(cpu_flags()))]).encode()).hexdigest()[:16]
        target = folder / f"gridkernels-{key}.so"
        if target.exists():
            return target, f"built with {compiler} {' '.join(isa)}".rstrip()
        folder.mkdir(parents=True, exist_ok=True)
        # renamed when built: processes starting together never load a half-written library
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
        try:
            done = subprocess.run([compiler, *FLAGS, *isa, "-o", tmp, str(SOURCE)],
                                  capture_output=True, text=True, timeout=300)
            if done.returncode == 0:
                os.replace(tmp, target)
                return target, f"built with {compiler} {' '.join(isa)}".rstrip()
            errors.append(done.stderr.strip().splitlines()[-1:] or ["failed"])
        except (OSError, subprocess.SubprocessError) as exc:
            errors.append([str(exc)])
        finally:
            Path(tmp).unlink(missing_ok=True)
    return None, f"{compiler} could not build {SOURCE.name}: {errors[-1][0]}"


@functools.cache
def _load() -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get(ENV, "1") == "0":
        return None, f"off (${ENV}=0)"
    compiler = os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if compiler is None:
        return None, "no C compiler (cc, gcc, clang or $CC) found"
    try:
        path, why = _build(compiler, cache_dir())
        if path is None:  # an unwritable cache: a private folder for this process
            path, why = _build(compiler, Path(tempfile.mkdtemp(prefix="pairrepro-kernels-")))
        if path is None:
            return None, why
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        return None, f"could not load the kernels: {exc}"
    for name, kinds in SIGNATURES.items():
        for suffix in TYPES.values() if name.startswith("lstm") else ["bf16"]:
            fn = getattr(lib, f"{name}_{suffix}")
            fn.argtypes = [_I if k == "i" else _P for k in kinds]
            fn.restype = ctypes.c_int if name in ("attn_fwd", "attn_bwd") else None
    return lib, why


def status() -> str:
    """Which path the grid engine's elementwise work takes on CPU, and why."""
    lib, why = _load()
    return f"fused C kernels ({why})" if lib is not None else f"eager torch ({why})"


def usable(*tensors: torch.Tensor) -> bool:
    """Whether the kernels can take these tensors: on the CPU, float32 or bfloat16, each
    ``[L, B, width]`` with unit stride along ``width``."""
    first = tensors[0]
    return (first.device.type == "cpu" and first.dtype in TYPES
            and all(t.dim() == 3 and t.stride(-1) == 1 for t in tensors)
            and _load()[0] is not None)


def fits_lstm(gates: torch.Tensor, prev: Sequence[tuple[int, torch.Tensor]],
              states: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]) -> bool:
    """Whether the LSTM kernels take these: float32 ``states``, ``outputs`` in the gates'
    dtype, at most two forget gates, :func:`usable` layouts."""
    c_ks = [c_k for _, c_k in prev]
    return (len(prev) <= 2 and gates.size(-1) <= 5 * states[0].size(-1)
            and all(t.dtype == torch.float32 for t in (*states, *c_ks))
            and all(t.dtype == gates.dtype for t in outputs)
            and usable(gates, *states, *c_ks, *outputs))


def _fn(name: str, dtype: torch.dtype) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    lib = _load()[0]
    assert lib is not None
    return getattr(lib, f"{name}_{TYPES[dtype]}")


@functools.lru_cache(maxsize=8)
def _zeros(width: int) -> torch.Tensor:
    """Float32 zeros (also bf16 zeros) standing in for an absent neighbour or term."""
    return torch.zeros(width)


def _array(t: torch.Tensor | None, width: int) -> tuple[int, int, int]:
    """``(pointer, outer, inner)`` of a ``[L, B, ·]`` tensor; zeros, zero strides for None."""
    if t is None:
        return _zeros(width).data_ptr(), 0, 0
    return t.data_ptr(), t.stride(0), t.stride(1)


def _neighbour(prev: Sequence[tuple[int, torch.Tensor]], k: int, width: int
               ) -> tuple[int, ...]:
    """``(pointer, outer, inner, first, length)`` of previous memory cell ``k``."""
    if k >= len(prev):
        return (*_array(None, width), 0, 0)
    row, c_k = prev[k]
    return (*_array(c_k, width), row, c_k.size(0))


def lstm_forward(gates: torch.Tensor, prev: Sequence[tuple[int, torch.Tensor]],
                 c: torch.Tensor, tanh_c: torch.Tensor, h: torch.Tensor,
                 h2: torch.Tensor | None = None) -> None:
    """:func:`pairrepro.models.grid.lstm_forward` in one pass (``h2``: a second copy of h)."""
    length, batch, d = c.shape
    _fn("lstm_fwd", gates.dtype)(
        length, batch, d, gates.size(-1) // d - 3, *_array(gates, d), *_neighbour(prev, 0, d),
        *_neighbour(prev, 1, d), *_array(c, d), *_array(tanh_c, d), *_array(h, d),
        *_array(h if h2 is None else h2, d), _zeros(d).data_ptr())


def lstm_backward(gates: torch.Tensor, prev: Sequence[tuple[int, torch.Tensor]],
                  tanh_c: torch.Tensor, dh: Sequence[torch.Tensor | None], dc: torch.Tensor,
                  d_gates: torch.Tensor, d_prev: Sequence[torch.Tensor]) -> None:
    """:func:`pairrepro.models.grid.lstm_backward` in one pass (``dh``: None, absent)."""
    length, batch, d = dc.shape
    terms = [*dh, None, None, None][:3]
    d_rows = [_array(d_prev[k], d) if k < len(d_prev) else _array(None, d) for k in range(2)]
    scratch = torch.empty(2 * d)  # named: it must live through the call
    _fn("lstm_bwd", gates.dtype)(
        length, batch, d, gates.size(-1) // d - 3, *_array(gates, d), *_neighbour(prev, 0, d),
        *_neighbour(prev, 1, d), *_array(tanh_c, d), *(x for t in terms for x in _array(t, d)),
        *_array(dc, d), *_array(d_gates, d), *d_rows[0], *d_rows[1], _zeros(d).data_ptr(),
        scratch.data_ptr())


def fits_attention(stores: Sequence[torch.Tensor], q: torch.Tensor, memory: int) -> bool:
    """Whether the attention kernels take these stores and query: bf16 only (in float32 the
    eager read was faster)."""
    return (q.dtype == torch.bfloat16 and memory <= MAX_SLOTS
            and all(s.dtype == q.dtype and s.is_contiguous() for s in stores) and usable(q))


def _window(window: torch.Tensor) -> tuple[int, int, int]:
    """``(pointer, cell stride, slot stride)`` of a ``[L, K, B, d]`` window."""
    assert window.stride(3) == 1 and window.stride(2) == window.size(3)
    return window.data_ptr(), window.stride(0), window.stride(1)


def _attention(name: str, keys: torch.Tensor, values: torch.Tensor, q: torch.Tensor,
               v: torch.Tensor, *args: int) -> None:
    """Call ``name`` over ``[L, K, B, d]`` windows; ``args`` between ``v`` and the scratch
    (``work``: floats as the C file says)."""
    length, memory, batch, d = keys.shape
    key_ptr, cell, slot = _window(keys)
    work = torch.empty((3 * batch + 1) * -(-d // VECTOR) * VECTOR + memory * batch)
    failed = _fn(name, q.dtype)(length, batch, d, memory, key_ptr, _window(values)[0], cell,
                                slot, *_array(q, d), v.data_ptr(), *args, work.data_ptr())
    assert not failed, f"attention over {memory} slots (at most {MAX_SLOTS})"


def attention_forward(keys: torch.Tensor, values: torch.Tensor, q: torch.Tensor,
                      v: torch.Tensor, mask: torch.Tensor, attn: torch.Tensor,
                      r: torch.Tensor) -> None:
    """:func:`pairrepro.models.dflstm._attend` in one pass (``attn_fwd`` in the C file)."""
    _attention("attn_fwd", keys, values, q, v, mask.data_ptr(), attn.data_ptr(),
               *_array(r, q.size(-1)))


def attention_backward(keys: torch.Tensor, values: torch.Tensor, q: torch.Tensor,
                       v: torch.Tensor, attn: torch.Tensor, dr: Sequence[torch.Tensor | None],
                       dq: torch.Tensor, g_v: torch.Tensor, d_keys: torch.Tensor,
                       d_values: torch.Tensor) -> None:
    """:meth:`pairrepro.models.dflstm._SlotGradients.read` in one pass (``attn_bwd``)."""
    d = q.size(-1)
    assert _window(d_keys)[1:] == _window(keys)[1:] == _window(d_values)[1:]
    _attention("attn_bwd", keys, values, q, v, attn.data_ptr(), *_array(dr[0], d),
               *_array(dr[1], d), d_values.data_ptr(), d_keys.data_ptr(), *_array(dq, d),
               g_v.data_ptr())
