"""CSRAN: FM formula vs the naive pairwise sum, char encoder vs padding, CSRA affinity vs
explicit loops, each Table 8 ablation switch padding-invariant, the padded LSTM path (CPU bf16)
against the packed one, and a short NLI fit."""

from __future__ import annotations

import pytest
import torch
from model_harness import assert_padding_invariant, fit_nli

from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext, build_model
from pairrepro.models.csran import CAFEBlock, co_stack_affinity, run_lstm_padded
from pairrepro.models.layers import CharEncoder, FactorizationMachine, run_rnn

SMALL = {"hidden": 12, "layers": 2, "char_dim": 6, "char_hidden": 8, "fm_factors": 4,
         "aggr_layers": 1, "out_hidden": 16, "dropout": 0.0}


def csran(ctx: ModelContext, **overrides: object) -> torch.nn.Module:
    return build_model("csran", ctx, {**SMALL, **overrides})


def test_fm_equals_naive_pairwise_sum() -> None:
    torch.manual_seed(0)
    fm = FactorizationMachine(7, factors=3)
    with torch.no_grad():
        fm.linear.weight.normal_()
        fm.linear.bias.fill_(0.3)
        fm.v.normal_()
    x = torch.randn(4, 7, dtype=torch.float64)
    fm = fm.double()
    w0, w, v = fm.linear.bias, fm.linear.weight[0], fm.v
    expected = torch.stack([
        w0[0] + (w * row).sum()
        + sum(v[i] @ v[j] * row[i] * row[j] for i in range(7) for j in range(i + 1, 7))
        for row in x
    ])
    torch.testing.assert_close(fm(x), expected)


def test_char_encoder_ignores_character_padding_and_word_order() -> None:
    vocab = ["<pad>", "<unk>", "cat", "horse", "a", "zebras"]
    torch.manual_seed(0)
    for kind in ("lstm", "cnn"):
        short = CharEncoder(vocab, char_dim=5, out_dim=6, max_word_len=6, kind=kind)
        long = CharEncoder(vocab, char_dim=5, out_dim=6, max_word_len=20, kind=kind)
        long.load_state_dict(short.state_dict())  # same weights, 14 more character pads
        ids = torch.tensor([[2, 3, 4, 0], [5, 4, 0, 0]])
        out_short, out_long = short(ids), long(ids)
        torch.testing.assert_close(out_short, out_long)
        assert out_short.shape == (2, 4, 6)
        assert out_short[0, 3].abs().sum() == 0  # the padding word has no characters
        # a word's vector does not depend on the other words of the batch
        torch.testing.assert_close(short(torch.tensor([[4]]))[0, 0], out_short[0, 2])


def test_char_encoder_needs_vocab() -> None:
    with pytest.raises(ConfigError, match="vocabulary"):
        CharEncoder(None)


def test_cafe_block_adds_six_features() -> None:
    block = CAFEBlock(10, fm_factors=3)
    a, b = torch.randn(2, 5, 10), torch.randn(2, 4, 10)
    ones = torch.ones(2, 6, dtype=torch.bool)
    out_a, out_b = block(a, ones[:, :5], b, ones[:, :4])
    assert out_a.shape == (2, 5, 16) and out_b.shape == (2, 4, 16)
    torch.testing.assert_close(out_a[..., :10], a)


def test_padded_lstm_equals_packed() -> None:
    """Outputs, last states (the backward direction's included) and gradients of the padded
    path equal those of the packed one, whose padding never enters a state."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(5, 7, batch_first=True, bidirectional=True)
    mask = torch.arange(6)[None] < torch.tensor([6, 1, 3, 4])[:, None]
    x = torch.randn(4, 6, 5)
    results = []
    for run in (run_rnn, run_lstm_padded):
        inp = x.clone().requires_grad_(True)
        out, last = run(lstm, inp, mask)
        (out.sin().sum() + last.cos().sum()).backward()
        results.append((out, last, inp.grad, lstm.weight_hh_l0_reverse.grad.clone()))
        lstm.zero_grad()
    for packed, padded in zip(*results, strict=True):
        torch.testing.assert_close(padded, packed, rtol=1e-5, atol=1e-6)


def test_csran_bf16_runs_the_padded_lstm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under CPU bf16 autocast the encoders take the padded path (the aggregation LSTM stays
    packed); in fp32 every LSTM is packed."""
    import pairrepro.models.csran as module

    calls: list[str] = []
    monkeypatch.setattr(module, "run_rnn", lambda *a: calls.append("packed") or run_rnn(*a))
    monkeypatch.setattr(module, "run_lstm_padded",
                        lambda *a: calls.append("padded") or run_lstm_padded(*a))
    ctx = ModelContext(vocab_size=30, embed_dim=8, num_outputs=2,
                       vocab=[f"w{i}" for i in range(30)])
    model = csran(ctx).eval()
    ids, mask = torch.randint(2, 30, (3, 5)), torch.ones(3, 5, dtype=torch.bool)
    model(ids, mask, ids, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(ids, mask, ids, mask)
    assert calls == ["packed"] * 6 + ["padded"] * 4 + ["packed"] * 2


def test_co_stack_affinity_against_loops() -> None:
    torch.manual_seed(0)
    ha, hb = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5)
    pairs = torch.stack([ha[:, p] @ hb[:, q].transpose(1, 2) for p in range(3) for q in range(3)])
    torch.testing.assert_close(co_stack_affinity(ha, hb, "max"), pairs.max(0).values)
    per_p = torch.stack([sum(ha[:, p] @ hb[:, q].transpose(1, 2) for q in range(3))
                         for p in range(3)])
    torch.testing.assert_close(co_stack_affinity(ha, hb, "max_sum"), per_p.max(0).values)


@pytest.mark.parametrize("switches", [
    {}, {"use_mar": False}, {"use_csra": False}, {"use_mar": False, "use_csra": False},
    {"affinity": "max_sum", "highway_layers": 0, "output_highway": False,
     "compare_pooled": False, "char_dim": 0, "layers": 1},
])
def test_csran_padding_invariant(switches: dict[str, object]) -> None:
    assert_padding_invariant(lambda ctx: csran(ctx, **switches), num_outputs=3)


def test_csran_pointwise_ranking_head_and_ablations_change_the_graph() -> None:
    assert_padding_invariant(csran, num_outputs=2)
    ctx = ModelContext(vocab_size=20, embed_dim=8, num_outputs=2,
                       vocab=[f"w{i}" for i in range(20)])
    full = csran(ctx)
    no_mar = csran(ctx, use_mar=False)
    no_csra = csran(ctx, use_csra=False)
    assert len(full.cafe) == 2 and len(no_mar.cafe) == 0
    # w/o CSRA aligns top-layer features only: the aggregation input is k times narrower
    assert full.aggregate.input_size == 2 * no_csra.aggregate.input_size


def test_csran_rejects_bad_affinity() -> None:
    ctx = ModelContext(vocab_size=5, embed_dim=4, num_outputs=3, vocab=list("abcde"))
    with pytest.raises(ConfigError, match="affinity"):
        csran(ctx, affinity="sum")


def test_csran_learns_synthetic_nli() -> None:
    acc = fit_nli(csran, n_train=600, n_test=300, epochs=4)
    assert acc > 0.6, f"CSRAN test accuracy {acc:.3f} (chance 0.33)"
