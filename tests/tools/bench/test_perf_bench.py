"""The performance benchmark's anchors compute what distalign computes (so the timings compare like with like),
and its process-group timing runs; the whole benchmark is run by hand (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.eval.bli_metrics import gold_ranks
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams
from distalign.tools.bench.perf import BareObjectives, authors_ranks, batch_overrides, step_timings, trial_overhead
from distalign.train.recipe import TrainingRecipe
from distalign.train.trainer import plan_training


def test_the_bare_loop_computes_distalign_s_losses(tmp_path, monkeypatch, gloo_group):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(QUICKSTART, SMALL + ["run.name=perf", "train.num_workers=1", "objectives.lexical.weight=1"])
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, ""))
    recipe.setup()
    module = recipe.engine.module.eval()  # no dropout: both sides see the same network
    batches = {name: next(stream) for name, stream in local_streams(prepared, config).items()}
    bare = BareObjectives(module.masked_lm, config.objectives["lexical"].temperature).eval()
    with torch.no_grad():
        losses = module(batches)
        assert bare(batches["corpus"], batches["constraints"]).item() == pytest.approx(losses["loss"].item(), rel=1e-5)
        assert losses["mlm"].item() > 0 and losses["lexical"].item() > 0  # both terms take part


def test_the_authors_ranking_gives_the_ranks_of_gold_ranks():
    vocabulary = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [-1.0, 0.0]], dtype=np.float32)
    queries = np.array([[1.0, 0.1], [0.1, 1.0], [-1.0, 0.2]], dtype=np.float32)
    words, gold = ["a", "b", "c", "d"], [2, 2, 3]
    # by hand: query 0 ranks a, c, b, d (c second); query 1: b, c, a, d (c second); query 2: d first
    assert authors_ranks(queries, vocabulary, words, [words[g] for g in gold]) == [2, 2, 1]
    assert gold_ranks(torch.from_numpy(queries), torch.from_numpy(vocabulary), torch.tensor(gold)).tolist() == [2, 2, 1]


@pytest.mark.heavy
def test_step_timings_in_two_gloo_processes(tmp_path):
    (result,) = step_timings(tmp_path, 2, [{"pairs": 8, "overrides": SMALL + batch_overrides(8, 2), "steps": 1}])
    assert result["pairs"] == 8 and result["distalign"] > 0 and result["bare"] > 0


@pytest.mark.heavy
def test_the_gpu_row_s_engines_run_on_a_small_model():
    """The GPU row's three engines on a tiny model: here on CPU (gloo; no MFU, the CPU has no peak in the table),
    on a GPU machine with NCCL (an MFU in (0, 1) where the card's peak is known, else none)."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from distalign.tools.bench.gpu import Shape, throughput\n"
        "from distalign.train.step_timing import peak_flops\n"
        "print('PEAK', peak_flops(torch.device('cuda' if torch.cuda.is_available() else 'cpu')))\n"
        "tiny = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, "
        "intermediate_size=64, max_position_embeddings=80)\n"
        "for t in throughput(tiny, Shape(4, 16, 8, 8), steps=1, warmup=1):\n"
        "    print('ENGINE', t.engine, t.tokens_per_s, t.mfu)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("ENGINE")]
    assert [r[1] for r in rows] == ["ddp", "zero2", "hf-trainer"], out.stderr[-3000:]
    assert all(float(r[2]) > 0 for r in rows)
    peak_known = next(line for line in out.stdout.splitlines() if line.startswith("PEAK")) != "PEAK None"
    assert all((0 < float(r[3]) < 1) if peak_known else r[3] == "None" for r in rows), rows


def test_rows_gpu_alone_writes_its_row_and_no_plot(tmp_path):
    """``--rows gpu`` on a GPU node needs no Ray: only the GPU row is measured (here: "not measured")."""
    from distalign.tools.bench.perf import run_perf_bench

    report = run_perf_bench(tmp_path, log_to_mlflow=False, areas=("gpu",))
    assert [row.area for row in report.rows] == ["GPU"]
    text = (tmp_path / "results.md").read_text()
    assert ("not measured" in text) != torch.cuda.is_available()
    assert not (tmp_path / "scaling.png").exists() and not (tmp_path / "home").exists()


def test_an_unknown_row_is_refused_before_anything_runs(tmp_path):
    from distalign.errors import InputError
    from distalign.tools.bench.perf import run_perf_bench

    with pytest.raises(InputError, match="--rows: unknown speed"):
        run_perf_bench(tmp_path, log_to_mlflow=False, areas=("gpu", "speed"))
    assert not (tmp_path / "results.md").exists()


@pytest.mark.heavy
def test_the_plain_script_masks_tokenises_and_trains_on_the_quickstart_files(tmp_path, monkeypatch):
    """The real-run row's anchor (no Ray): its batches are what ``BareObjectives`` reads, and it trains."""
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from distalign.tools.bench.plain_script import Collate, StepRows

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(QUICKSTART, SMALL + ["run.name=plain"])
    prepared = prepare_data(config)
    pairs = prepared.constraints.select(["word1", "word2", "synset_index"]).to_pydict()
    rows = StepRows(["xa1 xa2 xa3", "xb1 xb2", "xc1"], pairs, (2, 4), steps=1, seed=(0, 0))
    batches = Collate(AutoTokenizer.from_pretrained(prepared.model_path), 64, 16, mask_prob=0.5)(rows[0])
    corpus, constraints = batches["corpus"], batches["constraints"]
    assert corpus["masked_ids"].shape == corpus["labels"].shape == corpus["attention_mask"].shape
    assert ((corpus["labels"] != -100) <= corpus["attention_mask"].bool()).all()  # no padding predicted
    assert constraints["input_ids1"].shape == constraints["input_ids2"].shape and len(constraints["synset"]) == 4
    for side in ("1", "2"):  # the word's own subwords: all but [CLS] and [SEP]
        assert (constraints[f"word_mask{side}"].sum(1) == constraints[f"attention_mask{side}"].sum(1) - 2).all()
    pq.write_table(prepared.constraints, tmp_path / "constraints.parquet")
    corpus_files = [path for source in prepared.corpus.sources for path in source.paths]
    # as the 2-worker row runs it: two DDP processes, rank 0 printing its step times and both ranks' CPU time
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "distalign.tools.bench.plain_script",
            prepared.model_path,
            str(tmp_path / "constraints.parquet"),
            *corpus_files,
            "--steps",
            "3",
            "--steady-from",
            "1",
            "--processes",
            "2",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    run = json.loads(out.stdout.splitlines()[-1])
    assert len(run["step_s"]) == 3 and min(run["step_s"]) > 0 and run["cpu_s"] > 0


def test_the_fine_tuning_row_s_trainer_does_the_steps_distalign_does(tmp_path):
    """Same start, batches, order, optimizer and schedule: without dropout both sides end with the same weights."""
    from distalign.tools.bench.finetune_speed import (
        distalign_seconds,
        pair_features,
        task_model,
        tiny_classifier_dir,
        trainer_seconds,
    )

    model_dir = str(
        tiny_classifier_dir(tmp_path / "model", vocab_size=60, hidden_size=16, layers=1, max_length=32, dropout=0.0)
    )
    features = pair_features(4 * 8, 60, 32)
    batches = [features[i * 8 : (i + 1) * 8] for i in range(4)]
    ours, theirs = task_model(model_dir), task_model(model_dir)
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters()))
    assert (distalign_seconds(ours, batches, 1, 1, 3) > 0).all()
    assert (trainer_seconds(theirs, batches, 1, 1, 3) > 0).all()
    moved = [not torch.equal(a, b) for a, b in zip(ours.parameters(), task_model(model_dir).parameters())]
    assert any(moved)
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_trial_overhead_parts_cold_and_warm_trials_by_hand():
    """Two trials at once: A and B start cold; C starts after A ended and takes its place, D takes B's; each later
    trial's gap runs from the end of the trial whose place it took to its own first step."""

    def trial(start, first_step, end, total, **phases):
        return {
            "start": start,
            "first_step": first_step,
            "end": end,
            "startup/total_s": total,
            **{f"startup/{k}_s": v for k, v in phases.items()},
        }

    trials = [
        trial(21, 24, 30, 3, workers=2),
        trial(0, 10, 20, 10, workers=6, vanilla_eval=1),
        trial(23, 27, 33, 4, workers=3),
        trial(1, 12, 22, 11, workers=7),
    ]
    assert trial_overhead(trials) == {
        "first/trials": 2,
        "later/trials": 2,
        "first/startup/total_s": 10.5,
        "first/startup/workers_s": 6.5,
        "first/startup/vanilla_eval_s": 1.0,
        "later/startup/total_s": 3.5,
        "later/startup/workers_s": 2.5,
        "later/gap_s": ((24 - 20) + (27 - 22)) / 2,
    }
