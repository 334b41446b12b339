"""distalign.synthetic_languages.mlm_emergence: alignment learning curves of the bench's MLM cell, trained in this
process."""

import csv
import time

import pytest
from test_synthetic_bench import corpus

from distalign.synthetic_languages import mlm_emergence
from distalign.synthetic_languages.mlm_emergence import Setting


def test_a_curve_has_the_alignment_at_step_zero_and_every_n_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(
        mlm_emergence.SETTINGS,
        "tiny",
        Setting(
            "a toy corpus",
            {"corpus": str(corpus(tmp_path)), "eval_words": 4, "min_count": 1},
            ("model.tiny.vocab_size=200",),
        ),
    )
    assert (
        mlm_emergence.main(
            ["--settings", "tiny", "--steps", "4", "--every", "3", "--output-dir", str(tmp_path / "out")]
        )
        == 0
    )
    with (tmp_path / "out" / "curves.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [0, 3, 4]
    assert all(0 <= float(r["alignment"]) <= 100 and int(r["tokens"]) > 0 for r in rows)
    assert float(rows[-1]["mlm_loss"]) > 0 and (tmp_path / "out" / "curves.png").stat().st_size > 0
    assert "| tiny |" in (tmp_path / "out" / "crossings.md").read_text()


def test_max_seconds_ends_the_curve_with_a_row_and_cuda_is_refused_without_a_gpu(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(
        mlm_emergence.SETTINGS,
        "tiny",
        Setting(
            "a toy corpus",
            {"corpus": str(corpus(tmp_path)), "eval_words": 4, "min_count": 1},
            ("model.tiny.vocab_size=200",),
        ),
    )
    assert (
        mlm_emergence.main(
            [
                "--settings",
                "tiny",
                "--steps",
                "50",
                "--every",
                "40",
                "--max-seconds",
                "0.001",
                "--device",
                "cpu",
                "--output-dir",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    with (tmp_path / "out" / "curves.csv").open() as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [0, 1]  # stopped at the first step, its row kept
    # the time counts from the command's start, not the curve's: the GPU check's timeout relies on it (its first GPU
    # run killed the bench 30 s past --max-seconds: imports and set-up had not counted)
    monkeypatch.setattr(mlm_emergence.psutil.Process, "create_time", lambda self: time.time() - 1000)
    assert (
        mlm_emergence.main(
            [
                "--settings",
                "tiny",
                "--steps",
                "50",
                "--every",
                "40",
                "--max-seconds",
                "900",
                "--device",
                "cpu",
                "--output-dir",
                str(tmp_path / "late"),
            ]
        )
        == 0
    )
    with (tmp_path / "late" / "curves.csv").open() as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [0, 1]
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA device"):
            mlm_emergence.resolve_device("cuda")
    assert mlm_emergence.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_side_by_side_runs_interleave_their_rows_and_stay_apart_as_curves():
    rows = [
        {"setting": s, "step": step}
        for step, s in ((0, "a"), (0, "b"), (5, "b"), (5, "a"), (10, "a"), (0, "a"), (5, "a"))
    ]
    curves = mlm_emergence.split_curves(rows)
    assert [[(r["setting"], r["step"]) for r in c] for c in curves] == [
        [("a", 0), ("a", 5), ("a", 10)],
        [("b", 0), ("b", 5)],
        [("a", 0), ("a", 5)],
    ]


@pytest.mark.heavy
def test_parallel_settings_each_train_in_a_process_with_the_overrides_and_their_transformation(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    toy = {"corpus": str(corpus(tmp_path)), "eval_words": 4, "min_count": 1}
    monkeypatch.setitem(mlm_emergence.SETTINGS, "toy", Setting("a toy corpus", toy, ("model.tiny.vocab_size=200",)))
    monkeypatch.setitem(
        mlm_emergence.SETTINGS,
        "toy_inv",
        Setting("inverted", toy, ("model.tiny.vocab_size=200",), transformation="translit_inv"),
    )
    out = tmp_path / "out"
    assert (
        mlm_emergence.main(
            [
                "--settings",
                "toy,toy_inv",
                "--steps",
                "3",
                "--every",
                "3",
                "--parallel",
                "2",
                "--override",
                "train.lr_schedule=constant",
                "--override",
                "train.warmup_steps=1",
                "--output-dir",
                str(out),
            ]
        )
        == 0
    )
    with (out / "curves.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["setting"], int(r["step"])) for r in rows) == [
        ("toy", 0),
        ("toy", 3),
        ("toy_inv", 0),
        ("toy_inv", 3),
    ]
    # constant after warm-up: the peak at the last step (the bench's linear schedule would be at 0 there)
    assert all(float(r["lr"]) == 1e-3 for r in rows if r["step"] == "3")
    assert (out / "toy_inv" / "data" / "translit_inv" / "corpus.xx.txt").is_file()
    assert not (out / "toy" / "data" / "translit_inv").exists()


def test_crossings_give_the_first_step_and_epoch_each_curve_reached_a_threshold():
    rows = [
        {"setting": s, "step": step, "alignment": a, "epochs": step / 100, "mlm_loss": 3.0}
        for s, step, a in (("a", 0, 0.1), ("b", 0, 0.1), ("a", 500, 30.0), ("b", 500, 5.0), ("a", 1000, 55.0))
    ]
    assert mlm_emergence.crossings(rows, (25, 50, 80)).splitlines()[2:] == [
        "| a | 500 (5 epochs) | 1,000 (10 epochs) | – | 1,000 | 55.0 | 3.00 |",
        "| b | – | – | – | 500 | 5.0 | 3.00 |",
    ]
