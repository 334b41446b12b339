"""The training recipe in one process (a gloo group of one), fed by ``local_streams``: no Ray."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from conftest import QUICKSTART, SMALL

from distalign.checkpoint import MODEL_DIR, OPTIMIZER_FILE, STATE_FILE, read_state, write_manifest
from distalign.config import load_config
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams
from distalign.train.recipe import TrainingRecipe
from distalign.train.trainer import plan_training


class RecordingLogger:
    """Stands in for the MLflow ``MetricLogger``: the metrics logged, by step."""

    def __init__(self):
        self.logged: dict[int, dict[str, float]] = {}

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.logged.setdefault(step, {}).update(metrics)

    def close(self) -> int:
        return 0


def run_recipe(config, prepared, checkpoints, resume_dir=None):
    """Run to train.max_steps; returns the recipe, the batches each step trained on and its losses, by step."""
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""))
    recipe.setup(resume_dir)
    recipe.logger = RecordingLogger()
    trained_on, losses = {}, {}
    step = recipe.step

    def recording_step(batches):
        number = recipe.state.step + 1
        trained_on[number] = batches
        losses[number] = step(batches)
        return losses[number]

    recipe.step = recording_step

    def checkpoint_dir():
        directory = checkpoints / f"step{recipe.state.step}"
        directory.mkdir()
        return directory

    reports = []

    def report(metrics, directory):
        if directory is not None:
            write_manifest(directory, 0, 1)  # what the session's upload writes first
        reports.append(metrics)

    recipe.run(local_streams(prepared, config, recipe.stream_states), report, checkpoint_dir)
    return recipe, trained_on, reports, losses


def assert_trained_on_longest_rows(trained_on, prepared, config) -> None:
    """The streams pad to ``data.max_seq_length`` and ``model.max_word_tokens``; the loop hands the step each
    batch cut to its longest row (issue 27: 75 % of the positions were padding)."""
    padded = local_streams(prepared, config)  # the same batches, as the streams give them
    widths = {"corpus": config.data.max_seq_length, "constraints": config.model.max_word_tokens}
    for step in sorted(trained_on):
        for micro, batches in enumerate(trained_on[step]):
            for stream, stream_batches in padded.items():
                full = next(stream_batches)
                longest = max(
                    int(mask.sum(1).max()) for name, mask in full.items() if name.startswith("attention_mask")
                )
                assert longest < widths[stream]
                for name, tensor in full.items():
                    expected = tensor[:, :longest] if tensor.dim() == 2 else tensor
                    assert torch.equal(batches[stream][name], expected), (step, micro, stream, name)


@pytest.mark.parametrize("accum", [1, 2])
def test_recipe_trains_checkpoints_and_resumes_on_the_same_batches(tmp_path, monkeypatch, gloo_group, accum, caplog):
    """With gradient accumulation a step trains on ``accum`` micro-batches per stream, and a resume skips
    step x accum of them."""
    caplog.set_level(logging.INFO, logger="distalign")
    monkeypatch.setattr(logging.getLogger("distalign"), "handlers", [caplog.handler])  # it may not propagate
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    # one sentence a sequence: corpus rows end before the width, so the trim to the longest row shows
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=recipe",
            "train.max_steps=4",
            "objectives.align.weight=1",
            f"train.grad_accum_steps={accum}",
            f"train.trace_rows={tmp_path / 'rows'}",
            "data.pack_sequences=false",
        ],
    )
    prepared = prepare_data(config)
    (tmp_path / "first").mkdir()
    recipe, first, reports, first_losses = run_recipe(config, prepared, tmp_path / "first")

    assert recipe.state.step == 4 and sorted(first) == [1, 2, 3, 4]
    assert "starting step 0/4 on 1 workers (ddp, zero=0, fp32, sdpa attention)" in caplog.text  # the start-up line
    assert_trained_on_longest_rows(first, prepared, config)
    assert [r["step"] for r in reports] == [3, 4]  # checkpoint_every=3, and the last step
    assert "eval/selection/rel_mrr_gain" in reports[-1]
    # the perf/ metrics (distalign.train.step_timing) at train.log_every=2, beside the losses
    trained = {step: metrics for step, metrics in recipe.logger.logged.items() if "Train/loss" in metrics}
    assert sorted(trained) == [2, 4]
    for metrics in trained.values():
        phases = sum(metrics[f"perf/{phase}_ms"] for phase in ("data_wait", "forward_backward", "optimizer"))
        assert 0 < phases <= metrics["perf/step_ms"] * 1.05
        assert metrics["perf/tokens_per_s"] == metrics["perf/tokens_per_s_per_worker"] > 0  # one worker
        assert metrics["perf/sequences_per_s"] > 0 and 0 < metrics["perf/padding_share"] < 1
        assert metrics["perf/allreduce_ms"] >= metrics["perf/allreduce_exposed_ms"] >= 0  # DDP's own timers
        assert "perf/mfu" not in metrics  # CPU: no peak to measure against
        assert metrics["Train/grad_norm"] > 0  # the window's mean of each step's norm before clipping
    saved = tmp_path / "first" / "step3"
    assert read_state(saved).step == 3 and (saved / MODEL_DIR / "config.json").is_file()
    assert (saved / STATE_FILE).is_file() and (saved / OPTIMIZER_FILE).is_file()
    # every step saw a masked corpus batch and a constraint batch, as the plugins declare
    assert all(len(first[step]) == accum for step in first)
    assert set(first[1][0]) == {"corpus", "constraints"}
    assert (first[1][0]["corpus"]["labels"] != -100).any()
    if accum > 1:  # the micro-batches of a step are different batches
        assert not torch.equal(first[1][0]["corpus"]["row"], first[1][1]["corpus"]["row"])

    # train.trace_rows: every step's rows per stream, and their epoch
    (trace,) = (tmp_path / "rows").iterdir()
    traced = {line["step"]: line["streams"] for line in map(json.loads, trace.read_text().splitlines())}
    assert sorted(traced) == [1, 2, 3, 4]
    for step, batches in first.items():
        for stream in ("corpus", "constraints"):
            assert traced[step][stream]["row"] == [row for b in batches for row in b[stream]["row"].tolist()]
        assert traced[step]["corpus"]["epoch"] == [0] * accum * 8
        assert traced[step]["constraints"]["epoch"] == [0] * accum * 16  # the epoch of the stream's draw

    # a resumed recipe continues at step 3 and trains step 4 on exactly the batch of the first run
    (tmp_path / "resumed").mkdir()
    resumed, again, _, again_losses = run_recipe(config, prepared, tmp_path / "resumed", resume_dir=saved)
    assert resumed.state.step == 4 and sorted(again) == [4]
    for micro, batches in enumerate(first[4]):
        for stream, batch in batches.items():
            for name, tensor in batch.items():
                assert torch.equal(again[4][micro][stream][name], tensor), (micro, stream, name)
    assert resumed.state.baseline_mrr == recipe.state.baseline_mrr  # model selection keeps its reference
    # same data, weights, optimizer and random state (dropout): the resumed step's losses are the first run's
    for name, value in first_losses[4].items():
        assert abs(again_losses[4][name] - value) < 1e-6, name


def test_gradient_checkpointing_trains(tmp_path, monkeypatch, gloo_group):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(
        QUICKSTART,
        SMALL
        + ["run.name=recipe-gc", "train.max_steps=2", "train.checkpoint_every=10", "train.gradient_checkpointing=true"],
    )
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""))
    recipe.setup()
    assert recipe.engine.module.masked_lm.is_gradient_checkpointing
    assert recipe.engine.module.masked_lm.config._attn_implementation == "sdpa"  # PyTorch's fused attention
    losses = recipe.step([{name: next(stream) for name, stream in local_streams(prepared, config).items()}])
    assert torch.isfinite(torch.tensor(losses["Train/loss"]))


@pytest.mark.parametrize(
    "objectives",
    [
        [
            "objectives.align.weight=1"
        ],  # the quickstart's MLM (whole words) and type-level lexical, with ALIGN-MLM's term
        [
            "objectives.mlm.weight=0",
            "objectives.lexical.sense_level=true",
            "objectives.lexical.gloss_weight=0.5",
            "objectives.lexical.max_sense_tokens=48",
        ],  # gloss inputs: word and gloss pooled apart
        [
            "objectives.mlm.weight=0",
            "objectives.lexical.weight=0",
            "objectives.dict_mlm.weight=1",
            "objectives.dict_mlm.tlm=true",
            "data.pack_sequences=false",
        ],  # the code-switched concatenation, twice as wide
        ["objectives.mlm.weight=0", "objectives.lexical.weight=0", "objectives.sense_aware.weight=1"],
        [
            "objectives.lexical.weight=0",
            "objectives.tlm.weight=1",
            "data.parallel=[{path: PAIRS, lang1: xa, lang2: xb}]",
        ],
    ],
    ids=["mlm-lexical-align", "sense-level-gloss", "dict-tlm", "sense-aware", "tlm"],
)
def test_trimming_leaves_the_losses_unchanged(tmp_path, monkeypatch, gloo_group, objectives):
    """Every objective's loss on a real batch, padded to the stream's width and trimmed: the same to rounding."""
    from distalign.data.batches import trim_padding

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    pairs = tmp_path / "pairs.tsv"  # translation pairs of 1 to 8 made-up words a side, for TLM
    pairs.write_text(
        "".join(
            " ".join(f"ka{i}" for i in range(n % 8 + 1)) + "\t" + " ".join(f"bo{i}" for i in range(n % 5 + 1)) + "\n"
            for n in range(64)
        )
    )
    config = load_config(QUICKSTART, SMALL + ["run.name=trim", *(o.replace("PAIRS", str(pairs)) for o in objectives)])
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""))
    recipe.setup()
    module = recipe.engine.module.eval()  # no dropout: both passes compute the same function
    full = {name: next(stream) for name, stream in local_streams(prepared, config).items()}
    trimmed = {name: trim_padding(batch, recipe.padded[name]) for name, batch in full.items()}
    assert any(trimmed[stream][name].shape != tensor.shape for stream in full for name, tensor in full[stream].items())
    with torch.no_grad():
        expected, got = module(full), module(trimmed)
    assert set(got) == set(module.objectives) | {"loss"}
    for name, value in expected.items():
        assert abs(float(got[name]) - float(value)) <= 1e-6 * max(1.0, abs(float(value))), name
