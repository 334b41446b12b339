"""distalign.eval.result_tables: best layers, averages, MLflow names, tables and PNG plots on a hand-made frame."""

import math

import pandas as pd
import pytest

from distalign.eval.result_tables import (
    averages,
    best_layers,
    mlflow_metrics,
    plot_by_layer,
    plot_pair_heatmap,
    write_table,
)


def frame():
    rows = []
    # bli mrr: en-de best at layer 1, en-fr best at layer 2; avg best at layer 1 (0.5 vs 0.45)
    for pair, values in [("en-de", [0.1, 0.6, 0.3]), ("en-fr", [0.2, 0.4, 0.6])]:
        rows += [("bli", pair, layer, "mrr", v) for layer, v in enumerate(values)]
    rows += [("bli", "en-de", layer, "oov", v) for layer, v in enumerate([5, 5, 5])]
    rows += [("bli", "en-fr", layer, "oov", v) for layer, v in enumerate([3, 3, 3])]
    # tatoeba: a NaN at layer 0 of deu; ties between layers 1 and 2 of fra go to the lower layer
    rows += [("tatoeba", "deu-eng", layer, "acc", v) for layer, v in enumerate([math.nan, 0.7, 0.8])]
    rows += [("tatoeba", "fra-eng", layer, "acc", v) for layer, v in enumerate([0.5, 0.9, 0.9])]
    return pd.DataFrame(rows, columns=["task", "pair", "layer", "metric", "value"])


def test_best_layers():
    best = best_layers(frame()).set_index(["task", "pair", "metric"])
    assert best.loc[("bli", "en-de", "mrr"), "layer"] == 1
    assert best.loc[("bli", "en-fr", "mrr"), "value"] == pytest.approx(0.6)
    assert best.loc[("bli", "en-fr", "oov"), "layer"] == 0  # constant: lowest layer
    assert best.loc[("tatoeba", "deu-eng", "acc"), "layer"] == 2
    assert best.loc[("tatoeba", "fra-eng", "acc"), "layer"] == 1
    assert len(best) == 6


def test_best_layer_of_oov_is_the_minimum():
    df = pd.DataFrame({"task": "bli", "pair": "a-b", "layer": [0, 1, 2], "metric": "oov", "value": [4, 2, 3]})
    assert best_layers(df)["layer"].tolist() == [1]


def test_averages_add_avg_rows_once():
    avg = averages(frame())
    assert averages(avg).equals(avg)
    means = avg[avg["pair"] == "avg"].set_index(["task", "layer", "metric"])["value"]
    assert means[("bli", 1, "mrr")] == pytest.approx(0.5)
    assert means[("bli", 0, "oov")] == pytest.approx(4.0)
    assert means[("tatoeba", 0, "acc")] == pytest.approx(0.5)  # NaN skipped
    assert len(avg) == len(frame()) + 3 * 3


def test_mlflow_metric_names():
    metrics = mlflow_metrics(frame(), layer=-1)
    assert metrics["eval/bli/en-de/mrr"] == pytest.approx(0.3)
    assert metrics["eval/bli/avg/mrr"] == pytest.approx(0.45)
    assert metrics["eval/bli/en-fr/oov"] == 3
    assert metrics["eval/tatoeba/deu-eng/acc"] == pytest.approx(0.8)
    assert metrics["eval/tatoeba/avg/acc"] == pytest.approx(0.85)
    assert metrics["eval/bli/best_layer/mrr"] == 1
    assert metrics["eval/tatoeba/best_layer/acc"] == 2  # averages 0.5, 0.8, 0.85
    assert set(metrics) == {
        *(f"eval/bli/{p}/{m}" for p in ("en-de", "en-fr", "avg") for m in ("mrr", "oov")),
        *(f"eval/tatoeba/{p}/acc" for p in ("deu-eng", "fra-eng", "avg")),
        "eval/bli/best_layer/mrr",
        "eval/bli/best_layer/oov",
        "eval/tatoeba/best_layer/acc",
    }
    assert mlflow_metrics(frame(), layer=1)["eval/bli/en-de/mrr"] == pytest.approx(0.6)


def test_mlflow_metrics_at_each_tasks_best_layer():
    metrics = mlflow_metrics(frame())
    # bli mrr: best averaged layer 1 (0.5) -> every pair at layer 1; tatoeba acc: layer 2
    assert metrics["eval/bli/en-de/mrr"] == pytest.approx(0.6)
    assert metrics["eval/bli/en-fr/mrr"] == pytest.approx(0.4)
    assert metrics["eval/bli/avg/mrr"] == pytest.approx(0.5)
    assert metrics["eval/tatoeba/fra-eng/acc"] == pytest.approx(0.9)
    assert metrics["eval/tatoeba/avg/acc"] == pytest.approx(0.85)
    assert set(metrics) == set(mlflow_metrics(frame(), layer=-1))


def test_write_table_csv_and_parquet(tmp_path):
    df = averages(frame())
    csv_path, parquet_path = write_table(df, tmp_path / "out" / "results.csv")
    assert (csv_path.name, parquet_path.name) == ("results.csv", "results.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(parquet_path), df)
    pd.testing.assert_frame_equal(pd.read_csv(csv_path), df, check_dtype=False)


def test_plots_are_written(tmp_path):
    df = frame()
    by_layer = plot_by_layer(df, tmp_path / "by_layer.png")
    heatmap = plot_pair_heatmap(df, "bli", "mrr", -1, tmp_path / "plots" / "bli_mrr.png")
    for path in (by_layer, heatmap):
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    with pytest.raises(ValueError, match="no rows"):
        plot_pair_heatmap(df, "bli", "p_at_1", 0, tmp_path / "none.png")
