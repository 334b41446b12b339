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
