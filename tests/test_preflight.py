"""``pairrepro preflight``: each check fails on the fault it exists to catch and passes
without it; the command writes preflight.json and exits 9 naming a failed check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from synth_prepared import write_synthetic
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.config import load_recipe
from pairrepro.data.batches import pad
from pairrepro.data.prepared import load_prepared, write_prepared
from pairrepro.errors import PreflightError
from pairrepro.models.base import ModelContext, PairModel
from pairrepro.models.layers import masked_mean
from pairrepro.train.preflight import (
    check_loss_falls,
    check_outputs_vary,
    check_padding,
    gradient_probe,
    run_preflight,
)

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
TINY = ["model.hidden=8", "model.mlp_hidden=8", "embeddings.dim=8", "train.batch_size=16"]
A = 0.5  # |every coordinate| of the test GloVe vectors
LR = 0.01


@pytest.fixture
def synth(data_home: Path) -> Path:
    write_synthetic(data_home, n_train=200, n_eval=60, n_queries=40, n_eval_queries=20)
    return data_home


def _glove(tmp_path: Path, home: Path, dim: int = 8) -> Path:
    """A GloVe text file with a vector for every word of the synthetic vocabulary, each
    coordinate +-A: one Adam step of the L2 gradient alone moves every coordinate by LR
    towards zero (Adam's first step is lr * sign(g)), so an unused row's norm changes by
    exactly LR / A."""
    vocab = load_prepared("synthetic", "nli", home / "prepared" / "synthetic-nli").vocab
    rng = np.random.default_rng(0)
    lines = []
    for word in vocab:
        signs = rng.choice([-A, A], dim)
        lines.append(word + " " + " ".join(f"{v:g}" for v in signs))
    path = tmp_path / "glove.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _pretrained(glove: Path, scope: str, l2: float) -> list[str]:
    return [*TINY, "embeddings.source=glove-file", f"embeddings.path={glove}",
            f"optim.l2={l2}", f"optim.l2_scope={scope}", f"optim.lr={LR}", "optim.clip_norm=0",
            # the schema refuses "all" here without a reason: preflight must catch it anyway
            'optim.l2_scope_why="testing the embedding_norms check"']


def test_a_small_recipe_passes_every_check(synth: Path) -> None:
    recipe = load_recipe(NLI, TINY)
    result = run_preflight(recipe, TINY, steps=3)
    statuses = {c.name: c.status for c in result.checks}
    assert statuses == {"loss_falls": "pass", "finite": "pass", "gradients": "pass",
                        "embedding_norms": "n/a", "outputs_vary": "pass", "padding": "pass"}
    assert result.passed and result.steps == 3 and result.data["stand_in"] is None
    assert result.data["split"] == "train"
    assert result.loss_after < result.loss_before
    assert result.pairs_per_step == 16 and result.pairs_per_s > 0
    assert result.flops_per_pair > 0 and result.peak_mb > 0


def test_flops_per_pair_match_a_hand_count() -> None:
    """A model that is one linear map of the mean word vector: 2*d*k FLOPs per pair
    forward, and twice that backward (the gradient of the weight and, since the embedding
    table is trained, of the mean vector; the table's own gradient is by index, no
    matmul): 3 * 2*d*k per pair."""
    d, k = 8, 3

    class Linear(PairModel):
        def __init__(self, ctx: ModelContext) -> None:
            super().__init__(ctx)
            self.emb = torch.nn.Embedding(ctx.vocab_size, d)
            self.out = torch.nn.Linear(d, k, bias=False)

        def forward(self, left, left_mask, right, right_mask):  # type: ignore[no-untyped-def]
            return self.out(masked_mean(self.emb(left), left_mask))

    model = Linear(ModelContext(vocab_size=20, embed_dim=d, num_outputs=k))
    batch = _batch([[2, 3, 4], [5, 6]], [[7], [8, 9]], labels=[0, 2])
    recipe = load_recipe(NLI)
    _, flops = gradient_probe(model, batch, recipe, torch.device("cpu"))
    assert flops == 2 * 3 * (2 * d * k)  # two pairs


def test_a_parameter_without_gradient_fails_the_gradient_check() -> None:
    class Dead(PairModel):
        def __init__(self, ctx: ModelContext) -> None:
            super().__init__(ctx)
            self.emb = torch.nn.Embedding(ctx.vocab_size, 4)
            self.out = torch.nn.Linear(4, 3)
            self.unused = torch.nn.Parameter(torch.ones(3))  # never in the forward pass

        def forward(self, left, left_mask, right, right_mask):  # type: ignore[no-untyped-def]
            return self.out(masked_mean(self.emb(left), left_mask))

    batch = _batch([[2, 3], [4]], [[5], [6]], labels=[0, 1])
    check, _ = gradient_probe(Dead(ModelContext(20, 4, 3)), batch, load_recipe(NLI),
                              torch.device("cpu"))
    assert check.status == "fail" and "unused" in check.detail and check.value == 1


def test_a_model_that_reads_padding_fails_the_padding_check() -> None:
    class Leaky(PairModel):
        def __init__(self, ctx: ModelContext, masked: bool) -> None:
            super().__init__(ctx)
            self.masked = masked
            self.emb = torch.nn.Embedding(ctx.vocab_size, 4)
            self.out = torch.nn.Linear(4, 3)

        def forward(self, left, left_mask, right, right_mask):  # type: ignore[no-untyped-def]
            x = self.emb(left)
            return self.out(masked_mean(x, left_mask) if self.masked else x.mean(dim=1))

    torch.manual_seed(0)
    batch = _batch([[2, 3, 4], [5]], [[6], [7, 8]], labels=[0, 1])
    assert check_padding(Leaky(ModelContext(20, 4, 3), masked=False), batch).status == "fail"
    assert check_padding(Leaky(ModelContext(20, 4, 3), masked=True), batch).status == "pass"


def test_constant_outputs_fail() -> None:
    assert check_outputs_vary(torch.ones(5, 3)).status == "fail"
    assert check_outputs_vary(torch.tensor([[1.0, 2.0], [1.0, 2.5]])).status == "pass"


def test_loss_falls_is_judged_on_the_last_half_of_the_steps() -> None:
    """The first steps of Adam and AdaGrad are lr * sign(g) and may raise the loss. CSRAN on
    SNLI dev, measured: 1.1018 before, then 1.0674, 1.2315, 0.8966, 0.7701, 0.5461, 0.3440
    after steps 1-6: judged on steps 4-6 it passes (lowest 0.3440); after 2 steps alone, as
    the committed figures were made, it failed (1.2315 > 1.1018)."""
    csran = [1.0674, 1.2315, 0.8966, 0.7701, 0.5461, 0.3440]
    ok = check_loss_falls(1.1018, csran, 6, finite=True)
    assert ok.status == "pass" and ok.value == pytest.approx(0.3440 - 1.1018)
    assert "steps 4-6" in ok.detail and "at step 2" in ok.detail  # the transient's peak
    assert check_loss_falls(1.1018, csran[:2], 2, finite=True).status == "fail"
    # an early dip does not count: the last half must end below the start
    assert check_loss_falls(1.0, [0.5, 1.2, 1.3, 1.4], 4, finite=True).status == "fail"
    # the budget stopped CIN after 2 of 10 steps (1.438 -> 2.336, 2.077): too few to judge
    short = check_loss_falls(1.438, [2.3362, 2.0770], 10, finite=True)
    assert short.status == "n/a" and "2 of 10 steps" in short.detail
    # a fall within the steps that ran is still a pass, a non-finite loss a fail
    assert check_loss_falls(1.438, [1.2, 1.1], 10, finite=True).status == "pass"
    assert check_loss_falls(1.0, [0.5, float("nan")], 2, finite=False).status == "fail"


def test_cntn_at_its_recipe_size_keeps_learning(data_home: Path) -> None:
    """CNTN (100 maps, 10 tensor slices, uniform(-0.1, 0.1)): at AdaGrad lr 0.03, MV-LSTM's
    own QA rate, the first step saturates every tanh of the tensor layer for every pair, so
    all scores are equal and the hinge loss is exactly its margin, 1, for good; at the
    recipe's rate the outputs vary and the loss falls."""
    path = paths.PROJECT_DIR / "recipes" / "cntn.toml"
    dead = run_preflight(load_recipe(path, ["optim.lr=0.03"]), stand_in=True, steps=3)
    assert {"loss_falls", "outputs_vary"} <= set(dead.failed)
    assert dead.eval_losses == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)
    live = run_preflight(load_recipe(path), stand_in=True)
    assert live.passed, [(c.name, c.detail) for c in live.checks if c.status != "pass"]
    assert live.steps == 10


def test_outputs_vary_is_n_a_for_a_scorer_on_random_stand_in_words(data_home: Path) -> None:
    """BM25 on random words: texts that share no word all score 0, by construction; the
    check is not applied there (it is on real data), and says why."""
    result = run_preflight(load_recipe(paths.PROJECT_DIR / "recipes" / "bm25_sc.toml"),
                           stand_in=True)
    check = next(c for c in result.checks if c.name == "outputs_vary")
    assert check.status == "n/a" and "random stand-in words" in check.detail
    assert result.data["synthetic"] is True and result.passed


def test_l2_on_the_whole_table_fails_the_embedding_norm_check(synth: Path,
                                                              tmp_path: Path) -> None:
    """The old behaviour (L2 on every trainable parameter, the GloVe table included) shrinks
    rows the batch never uses; the weights-only and lazy scopes keep them."""
    glove = _glove(tmp_path, synth)
    old = _pretrained(glove, "all", 1e-2)
    result = run_preflight(load_recipe(NLI, old), old, steps=1)
    norms = next(c for c in result.checks if c.name == "embedding_norms")
    assert norms.status == "fail" and result.failed == ["embedding_norms"]
    # one Adam step: every unused row's norm falls by exactly LR / A (see _glove)
    assert norms.value == pytest.approx(LR / A, rel=1e-3)
    with pytest.raises(PreflightError, match="embedding_norms"):
        result.raise_if_failed()
    for scope in ("weights", "lazy"):
        fixed = _pretrained(glove, scope, 1e-2)
        result = run_preflight(load_recipe(NLI, fixed), fixed, steps=2)
        norms = next(c for c in result.checks if c.name == "embedding_norms")
        assert norms.status == "pass" and norms.value == 0.0, scope


def test_dev_split_stands_in_for_a_missing_training_split(synth: Path) -> None:
    """SNLI here has dev and test only: preflight trains on dev and says so."""
    full = load_prepared("synthetic", "nli")
    splits = {name: full.split(name) for name in ("dev", "test")}
    root = paths.prepared_dir("synthetic", "devonly")
    write_prepared(root, splits, full.vocab, full.train_counts,
                   {"label_map": full.stats["label_map"], "task": "classification",
                    "splits": {k: len(v) for k, v in splits.items()}})
    overrides = [*TINY, "data.variant=devonly"]
    result = run_preflight(load_recipe(NLI, overrides), overrides, steps=2)
    assert result.data["split"] == "dev"
    assert "'train' is not prepared" in result.data["stand_in"]
    assert result.data["pairs"] == len(splits["dev"])


def test_cli_writes_json_and_exits_9_naming_the_check(synth: Path, tmp_path: Path) -> None:
    glove = _glove(tmp_path, synth)
    runner = CliRunner()
    out = tmp_path / "pf.json"
    args = ["preflight", str(NLI), "--steps", "1", "--out", str(out)]
    for item in _pretrained(glove, "all", 1e-2):
        args += ["--set", item]
    res = runner.invoke(app, args)
    assert res.exit_code == 10, res.output
    assert "embedding_norms" in res.output
    data = json.loads(out.read_text())
    assert data["failed"] == ["embedding_norms"] and data["passed"] is False
    ok = ["preflight", str(NLI), "--steps", "2", "--out", str(out)]
    for item in TINY:
        ok += ["--set", item]
    res = runner.invoke(app, ok)
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["passed"] is True


def test_an_unprepared_dataset_needs_stand_in(data_home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "pf.json"
    args = ["preflight", str(NLI), "--steps", "1", "--out", str(out)]
    for item in TINY:
        args += ["--set", item]
    assert runner.invoke(app, args).exit_code == 3  # data missing
    res = runner.invoke(app, [*args, "--stand-in"])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert "random words" in data["data"]["stand_in"] and data["pairs_per_s"] > 0


def _batch(left: list[list[int]], right: list[list[int]], labels: list[int]):  # type: ignore[no-untyped-def]
    from pairrepro.data.batches import PairBatch

    lt, lm = pad([np.array(x) for x in left])
    rt, rm = pad([np.array(x) for x in right])
    return PairBatch(lt, lm, rt, rm, torch.tensor(labels))


def test_a_score_bias_is_exempt_under_the_pairwise_loss() -> None:
    """``max(0, m - s+ + s-)`` sees ``s+ - s-`` only: the bias of a one-output score layer
    cancels and gets exactly zero gradient; that is not a fault."""
    class Scorer(PairModel):
        def __init__(self, ctx: ModelContext) -> None:
            super().__init__(ctx)
            self.emb = torch.nn.Embedding(ctx.vocab_size, 4)
            self.out = torch.nn.Linear(4, 1)

        def forward(self, left, left_mask, right, right_mask):  # type: ignore[no-untyped-def]
            return self.out(masked_mean(self.emb(right), right_mask))

    torch.manual_seed(0)
    batch = _batch([[2, 3], [2, 3]], [[4, 5], [6]], labels=[1, 0])
    batch.num_triples = 1  # row 0 = (q, d+), row 1 = (q, d-)
    hinge = load_recipe(paths.PROJECT_DIR / "recipes" / "bilstm_max_ranking_synthetic.toml")
    model = Scorer(ModelContext(20, 4, 1))
    check, _ = gradient_probe(model, batch, hinge, torch.device("cpu"))
    assert check.status == "pass", check.detail
    # the same model under a classification loss: its bias does get a gradient
    model.zero_grad()
    out = model(batch.left, batch.left_mask, batch.right, batch.right_mask)
    torch.nn.functional.binary_cross_entropy_with_logits(out.squeeze(1), batch.labels.float()
                                                         ).backward()
    assert float(model.out.bias.grad.abs().sum()) > 0


# ----------------------------------------------------------------------------- the plan
def test_plan_takes_preflight_figures_first_then_the_same_model(tmp_path: Path) -> None:
    from pairrepro.planning.plan import _throughput

    preflight = {"cin": {"pairs_per_s": 3.2, "hardware": "cpu", "model": "cin",
                         "flops_per_pair": 3.7e9}}
    figures = {"cin": {"pairs_per_s": 2.0, "hardware": "cpu", "source": "bench"},
               "esim": {"pairs_per_s": 20.0, "hardware": "cpu", "source": "bench"}}
    runs = tmp_path / "runs"
    assert _throughput("cin", "cin", preflight, figures, runs)[:3] == (3.2, "preflight", "cpu")
    assert _throughput("cin_quora", "cin", preflight, figures, runs)[:2] == (
        3.2, "preflight of cin")
    assert _throughput("esim", "esim", preflight, figures, runs)[:2] == (20.0, "bench")
    assert _throughput("nbow", "nbow", preflight, figures, runs)[:2] == (None, "unknown")


def test_plan_gpu_lower_bound_is_flops_over_the_vendor_peak() -> None:
    from pairrepro.planning.gpus import gpu_peak
    from pairrepro.planning.plan import PlanItem

    name, peak, _ = gpu_peak("h100")
    assert name == "H100 SXM" and peak == 989e12  # NVIDIA's dense bf16 figure
    item = PlanItem(recipe="r", model="cin", dataset="snli", variant="", data_ready=True,
                    data_command="", seeds_done=[], seeds_todo=[1, 2], epochs=3,
                    train_pairs=1000, pairs_per_s=4.0, throughput_source="preflight",
                    hardware="cpu", flops_per_pair=2e9, gpu="H100 SXM", gpu_peak_flops=peak)
    # 2 seeds x 3 epochs x 1000 pairs x 2 GFLOP = 12 TFLOP at 989 TFLOP/s
    assert item.gpu_lower_bound_hours == pytest.approx(12e12 / 989e12 / 3600)
    assert item.cpu_hours == pytest.approx(6000 / 4.0 / 3600)
    bm25 = PlanItem(**{**item.__dict__, "trains": False, "pairs_per_s": None})
    assert bm25.hours == 0.0 and bm25.gpu_lower_bound_hours == 0.0


def test_plan_readiness_is_per_split(data_home: Path) -> None:
    """SNLI prepared with dev and test only is not ready for a recipe that trains on it."""
    from pairrepro.planning.plan import _missing_splits

    write_synthetic(data_home, n_train=30, n_eval=10, n_queries=5, n_eval_queries=5)
    recipe = load_recipe(NLI)
    assert _missing_splits(recipe) == []
    (paths.prepared_dir("synthetic", "nli") / "train.parquet").unlink()
    stats_path = paths.prepared_dir("synthetic", "nli") / "stats.json"
    stats = json.loads(stats_path.read_text())
    del stats["files"]["train.parquet"]
    stats_path.write_text(json.dumps(stats))
    assert _missing_splits(recipe) == ["train"]
