"""Test harness shared by the model tests: tiny vocabularies, padding checks, quick fits.

The quick fit is deliberately a bare, hand-written loop (Adam, cross-entropy or
hinge): it is the independent reference the engine is compared with, and it
lets a model be tested without the trainer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pandas as pd
import torch
from torch import nn

from pairrepro.config import OptimSection
from pairrepro.data.synthetic import generate_nli, generate_ranking
from pairrepro.models.base import ModelContext, PairModel, available_models, build_model
from pairrepro.train.setup import initialise

ModelFactory = Callable[[ModelContext], PairModel]

# constructor keywords that make each model tiny (others keep their defaults)
TINY: dict[str, dict[str, object]] = {
    "arc_i": {"filters": 8, "mlp_hidden": 8},
    "arc_ii": {"filters": 8, "mlp_hidden": 8},
    "attention_lstm": {"hidden": 8},
    "attention_lstm_wbw": {"hidden": 8},
    "bilstm_max": {"hidden": 8, "mlp_hidden": 8},
    "bilstm_rnn": {"hidden": 8},
    "cin": {"hidden": 6, "dim": 12, "layers": 2, "kmax": 2, "char_dim": 4, "char_filters": 4,
            "mlp_hidden": 8},
    "cntn": {"filters": 8, "tensor_slices": 2},
    "csran": {"hidden": 6, "layers": 2, "char_dim": 4, "char_hidden": 4, "fm_factors": 2,
              "aggr_layers": 1, "out_hidden": 8},
    "df_lstm": {"hidden": 6, "memory": 3},
    "esim": {"hidden": 8},
    "lc_lstm": {"hidden": 6, "fc_hidden": 8},
    "lstm_rnn": {"hidden": 8},
    "mv_lstm": {"hidden": 6, "k": 2, "tensor_slices": 2, "mlp_hidden": 8},
    "nbow": {"hidden": 8},
    "parallel_lstms": {"hidden": 8, "mlp_hidden": 8, "mlp_layers": 2},
    "single_lstm": {"hidden": 8},
    "tc_lstm": {"hidden": 6, "fc_hidden": 8},
}
TRAINABLE = sorted(name for name, cls in available_models().items() if cls.needs_training)


def tiny_model(name: str, vocab: dict[str, int], num_outputs: int = 3) -> PairModel:
    """Model ``name`` at its TINY size, dropout off, initialised as a recipe would."""
    keywords = inspect.signature(available_models()[name].__init__).parameters
    model = build_model(name, context(vocab, num_outputs, embed_dim=8),
                        {**TINY[name], "dropout": 0.0} if "dropout" in keywords else TINY[name])
    initialise(model, OptimSection(init="xavier"), keep_embeddings=False)
    return model


def assert_one_bf16_step(name: str, device: torch.device) -> None:
    """One Adam step of tiny ``name`` under bf16 autocast on ``device``: a finite float32
    loss, a finite non-zero gradient for every trainable tensor, finite weights after."""
    torch.manual_seed(0)
    frame = generate_nli(6, seed=5)
    vocab = build_vocab(frame)
    model = tiny_model(name, vocab).to(device)
    left, lm = (t.to(device) for t in encode(list(frame.left), vocab))
    right, rm = (t.to(device) for t in encode(list(frame.right), vocab))
    labels = torch.tensor(frame.label.values, device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-3)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        out = model(left, lm, right, rm)
    assert out.dtype in (torch.bfloat16, torch.float32)
    loss = nn.functional.cross_entropy(out.float(), labels)
    assert torch.isfinite(loss), f"{name}: loss {loss} under bf16 autocast"
    loss.backward()
    dead = [n for n, p in model.named_parameters() if p.requires_grad
            and (p.grad is None or not bool(p.grad.abs().sum() > 0))]
    bad = [n for n, p in model.named_parameters() if p.grad is not None
           and not bool(torch.isfinite(p.grad).all())]
    assert not dead, f"{name}: no gradient under bf16 autocast for {dead}"
    assert not bad, f"{name}: non-finite gradient under bf16 autocast for {bad}"
    optimizer.step()
    assert all(bool(torch.isfinite(p).all()) for p in params)


def build_vocab(*frames: pd.DataFrame) -> dict[str, int]:
    vocab = {"<pad>": 0, "<unk>": 1}
    for frame in frames:
        for text in pd.concat([frame["left"], frame["right"]]):
            for tok in text.split():
                vocab.setdefault(tok, len(vocab))
    return vocab


def encode(texts: list[str], vocab: dict[str, int], pad_to: int = 0
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``[B, T]`` and a boolean mask; ``pad_to`` forces a longer T."""
    ids = [[vocab.get(t, 1) for t in text.split()] for text in texts]
    width = max(max(len(x) for x in ids), pad_to)
    out = torch.zeros(len(ids), width, dtype=torch.long)
    for i, row in enumerate(ids):
        out[i, : len(row)] = torch.tensor(row)
    return out, out != 0


def context(vocab: dict[str, int], num_outputs: int, embed_dim: int = 16) -> ModelContext:
    return ModelContext(vocab_size=len(vocab), embed_dim=embed_dim, num_outputs=num_outputs,
                        vocab=list(vocab))


def assert_padding_invariant(factory: ModelFactory, num_outputs: int = 3, extra: int = 7,
                             atol: float = 1e-5) -> None:
    """Padding a batch further must not change any output."""
    torch.manual_seed(0)
    frame = generate_nli(6, seed=3)
    vocab = build_vocab(frame)
    model = factory(context(vocab, num_outputs)).eval()
    left, lm = encode(list(frame.left), vocab)
    right, rm = encode(list(frame.right), vocab)
    left2, lm2 = encode(list(frame.left), vocab, pad_to=left.size(1) + extra)
    right2, rm2 = encode(list(frame.right), vocab, pad_to=right.size(1) + extra + 2)
    with torch.no_grad():
        a = model(left, lm, right, rm)
        b = model(left2, lm2, right2, rm2)
    assert a.shape == (len(frame), num_outputs)
    torch.testing.assert_close(a, b, atol=atol, rtol=0)


def fit_nli(factory: ModelFactory, n_train: int = 1500, n_test: int = 300, epochs: int = 6,
            lr: float = 3e-3, batch_size: int = 32, embed_dim: int = 16) -> float:
    """Train briefly on synthetic NLI; return test accuracy (chance is 1/3)."""
    torch.manual_seed(0)
    train, test = generate_nli(n_train, seed=1), generate_nli(n_test, seed=1, split="test")
    vocab = build_vocab(train, test)
    model = factory(context(vocab, 3, embed_dim))
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.Adam(params, lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    labels = torch.tensor(train.label.values)
    for _ in range(epochs):
        order = torch.randperm(len(train))
        model.train()
        for start in range(0, len(train), batch_size):
            idx = order[start: start + batch_size].tolist()
            left, lm = encode([train.left.iat[i] for i in idx], vocab)
            right, rm = encode([train.right.iat[i] for i in idx], vocab)
            loss = loss_fn(model(left, lm, right, rm), labels[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
    model.eval()
    with torch.no_grad():
        left, lm = encode(list(test.left), vocab)
        right, rm = encode(list(test.right), vocab)
        pred = model(left, lm, right, rm).argmax(-1)
    return (pred == torch.tensor(test.label.values)).float().mean().item()


def fit_ranking(factory: ModelFactory, n_train: int = 400, n_test: int = 100, epochs: int = 6,
                lr: float = 3e-3, embed_dim: int = 16, negatives: int = 4) -> float:
    """Train with the pairwise hinge loss (margin 1) on synthetic ranking; return test P@1
    (chance is 1 / (negatives + 1))."""
    torch.manual_seed(0)
    train = generate_ranking(n_train, negatives, seed=1)
    test = generate_ranking(n_test, negatives, seed=1, split="test")
    vocab = build_vocab(train, test)
    model = factory(context(vocab, 1, embed_dim))
    optim = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    pos = train[train.label == 1].set_index("group_id")
    neg = train[train.label == 0]
    for _ in range(epochs):
        model.train()
        shuffled = neg.sample(frac=1.0, random_state=int(torch.randint(0, 10**6, ()).item()))
        for start in range(0, len(shuffled), 32):
            chunk = shuffled.iloc[start: start + 32]
            q, qm = encode(list(chunk.left), vocab)
            p, pm = encode([pos.at[g, "right"] for g in chunk.group_id], vocab)
            n, nm = encode(list(chunk.right), vocab)
            s_pos = model(q, qm, p, pm).squeeze(-1)
            s_neg = model(q, qm, n, nm).squeeze(-1)
            loss = torch.clamp(1.0 - s_pos + s_neg, min=0).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
    model.eval()
    with torch.no_grad():
        q, qm = encode(list(test.left), vocab)
        a, am = encode(list(test.right), vocab)
        scores = model(q, qm, a, am).squeeze(-1)
    frame = test.assign(score=scores.numpy())
    top = frame.sort_values("score", ascending=False).groupby("group_id").head(1)
    return float(top.label.mean())
