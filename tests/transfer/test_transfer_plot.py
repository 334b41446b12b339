"""The bar plot per task and the summary <-> MLflow metric names round trip (no Ray)."""

import pandas as pd
import pytest

from distalign.transfer.plot import plot_task, summary_from_metrics, summary_metrics
from distalign.transfer.protocol import seed_rows, summarise

PNG = b"\x89PNG\r\n\x1a\n"


def summary(en, de, fr, en2=None):
    results = [{"task": "udpos", "seed": 0, "test": {"xa": {"acc": en}, "xb": {"acc": de}, "xc": {"acc": fr}}}]
    if en2 is not None:
        results.append({"task": "udpos", "seed": 1, "test": {"xa": {"acc": en2}, "xb": {"acc": de}, "xc": {"acc": fr}}})
    return summarise(pd.DataFrame([row for r in results for row in seed_rows(r, "xa", "acc")]))


def test_metric_names_round_trip():
    table = summary(0.9, 0.6, 0.5, en2=0.8)
    metrics = summary_metrics(table)
    assert metrics["transfer/udpos/avg/acc"] == pytest.approx((0.85 + 0.6 + 0.5) / 3)
    assert metrics["transfer/udpos/xa/acc_std"] == pytest.approx(0.0707107, abs=1e-6)
    assert metrics["transfer/udpos/avg/delta"] == pytest.approx(((0.85 - 0.6) + (0.85 - 0.5)) / 2)
    # a training run also holds other metrics, and the fine-tuning runs' dev scores: left out
    back = summary_from_metrics(
        metrics | {"Train/loss": 1.0, "transfer/udpos/dev/xa/acc": 0.3, "eval/bli/avg/mrr": 0.1}
    )
    merged = table.merge(back, on=["task", "lang", "metric"], suffixes=("", "_back"))
    assert len(back) == len(table) == len(merged)
    assert merged["mean"].tolist() == pytest.approx(merged["mean_back"].tolist())
    assert merged["std"].tolist() == pytest.approx(merged["std_back"].tolist())


def test_plot_has_a_bar_per_model_and_language(tmp_path, monkeypatch):
    import matplotlib.axes

    drawn = []
    original = matplotlib.axes.Axes.bar

    def spy(self, x, height, *args, **kwargs):
        drawn.append((kwargs.get("label"), list(height), list(kwargs.get("yerr"))))
        return original(self, x, height, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", spy)
    path = plot_task(
        {"start": summary(0.5, 0.2, 0.1), "trained": summary(0.9, 0.6, 0.5, en2=0.8)},
        "udpos",
        "acc",
        "xa",
        tmp_path / "udpos.png",
    )
    assert path.read_bytes().startswith(PNG)
    # languages in order: source, targets, average; x 100; std over seeds as error bars
    assert drawn[0] == ("start", pytest.approx([50, 20, 10, 100 * 0.8 / 3]), [0, 0, 0, 0])
    assert drawn[1][0] == "trained" and drawn[1][1] == pytest.approx([85, 60, 50, 65])
    assert drawn[1][2][0] == pytest.approx(7.07107, abs=1e-4)
