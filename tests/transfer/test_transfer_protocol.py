"""The protocol's numbers (average, Δ, mean ± std over seeds) against a hand computation."""

import pandas as pd
import pytest

from distalign.transfer.protocol import seed_rows, summarise, text_table


def result(seed, en, de, fr):
    return {"task": "xnli", "seed": seed, "test": {"en": {"acc": en}, "de": {"acc": de}, "fr": {"acc": fr}}}


def test_average_delta_and_spread_over_seeds():
    per_seed = pd.DataFrame(
        seed_rows(result(0, 0.80, 0.70, 0.60), "en", "acc") + seed_rows(result(1, 0.90, 0.70, 0.80), "en", "acc")
    )
    value = {(r.seed, r.lang, r.metric): r.value for r in per_seed.itertuples()}
    assert value[0, "avg", "acc"] == pytest.approx(0.70)  # (0.8 + 0.7 + 0.6) / 3: the source counts
    assert value[0, "de", "delta"] == pytest.approx(0.10) and value[0, "fr", "delta"] == pytest.approx(0.20)
    assert value[0, "avg", "delta"] == pytest.approx(0.15)  # over the targets only
    assert (0, "en", "delta") not in value
    summary = summarise(per_seed)
    row = {(r.lang, r.metric): r for r in summary.itertuples()}
    assert row["en", "acc"].mean == pytest.approx(0.85) and row["en", "acc"].n == 2
    assert row["en", "acc"].std == pytest.approx(0.0707107, abs=1e-6)  # sample std of 0.8, 0.9: 0.1 / sqrt(2)
    assert row["de", "acc"].std == pytest.approx(0.0)
    assert row["avg", "delta"].mean == pytest.approx((0.15 + 0.15) / 2)  # seed 1: (0.2 + 0.1) / 2
    assert row["fr", "delta"].mean == pytest.approx(0.15) and row["fr", "delta"].std == pytest.approx(
        0.0707107, abs=1e-6
    )
    table = text_table(summary, {"xnli": "acc"}, "en")
    assert "en  acc  85.00 ±  7.07" in table and "fr  acc  70.00 ± 14.14   Δ  15.00 ±  7.07" in table


def test_one_seed_has_no_spread():
    summary = summarise(pd.DataFrame(seed_rows(result(0, 0.8, 0.7, 0.6), "en", "acc")))
    assert (summary["std"] == 0).all() and (summary["n"] == 1).all()
