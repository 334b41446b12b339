"""distalign.bench.mlm_emergence: alignment learning curves of the bench's MLM cell, trained in this process."""

import csv

from distalign.bench import mlm_emergence
from distalign.bench.mlm_emergence import Setting
from test_synthetic_bench import corpus


def test_a_curve_has_the_alignment_at_step_zero_and_every_n_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(mlm_emergence.SETTINGS, "tiny", Setting("a toy corpus", {
        "corpus": str(corpus(tmp_path)), "eval_words": 4, "min_count": 1}, ("model.tiny.vocab_size=200",)))
    assert mlm_emergence.main(["--settings", "tiny", "--steps", "4", "--every", "3",
                               "--output-dir", str(tmp_path / "out")]) == 0
    with (tmp_path / "out" / "curves.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [0, 3, 4]
    assert all(0 <= float(r["alignment"]) <= 100 and int(r["tokens"]) > 0 for r in rows)
    assert float(rows[-1]["mlm_loss"]) > 0 and (tmp_path / "out" / "curves.png").stat().st_size > 0


def test_max_seconds_ends_the_curve_with_a_row_and_cuda_is_refused_without_a_gpu(tmp_path, monkeypatch):
    import pytest
    import torch

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(mlm_emergence.SETTINGS, "tiny", Setting("a toy corpus", {
        "corpus": str(corpus(tmp_path)), "eval_words": 4, "min_count": 1}, ("model.tiny.vocab_size=200",)))
    assert mlm_emergence.main(["--settings", "tiny", "--steps", "50", "--every", "40", "--max-seconds", "0.001",
                               "--device", "cpu", "--output-dir", str(tmp_path / "out")]) == 0
    with (tmp_path / "out" / "curves.csv").open() as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [0, 1]  # stopped at the first step, its row kept
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA device"):
            mlm_emergence.resolve_device("cuda")
    assert mlm_emergence.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_side_by_side_runs_this_command_once_per_setting_in_its_own_folder(tmp_path):
    argv = ["--settings", "default,wide", "--parallel=2", "--steps", "30", "--output-dir", "x", "--device", "cuda"]
    child = mlm_emergence.setting_argv(argv, "wide", tmp_path)
    assert child[1:3] == ["-m", "distalign.bench.mlm_emergence"]
    assert child[3:] == ["--steps", "30", "--device", "cuda", "--settings", "wide", "--parallel", "1",
                         "--output-dir", str(tmp_path / "wide")]
