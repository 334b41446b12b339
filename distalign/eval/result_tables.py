"""Tables, plots and MLflow metric names from evaluation result rows.

A result frame has columns ``task, pair, layer, metric, value`` (rows from ``distalign.eval.tasks``);
pairs are ``<l1>-<l2>``, and ``avg`` marks the mean over a task's pairs (see :func:`averages`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: Agg canvas, no global backend or figure state
from matplotlib.ticker import MaxNLocator

AVG = "avg"
LOWER_IS_BETTER = {"oov"}
KEYS = ["task", "pair", "metric"]


def averages(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` plus one ``pair == "avg"`` row per task/layer/metric: the mean over pairs (NaN skipped).

    Existing ``avg`` rows are replaced, so calling it twice changes nothing.
    """
    pairs = df[df["pair"] != AVG]
    avg = pairs.groupby(["task", "layer", "metric"], as_index=False, sort=False)["value"].mean()
    avg.insert(1, "pair", AVG)
    return pd.concat([pairs, avg], ignore_index=True)


def best_layers(df: pd.DataFrame) -> pd.DataFrame:
    """The best layer per task x pair x metric: highest value (lowest for ``oov``), ties to the lower layer.

    Columns ``task, pair, metric, layer, value``; groups whose values are all NaN are left out.
    """
    scored = df.dropna(subset=["value"]).sort_values("layer", kind="stable").reset_index(drop=True)
    sign = np.where(scored["metric"].isin(LOWER_IS_BETTER), -1.0, 1.0)
    best = scored.assign(_key=sign * scored["value"]).groupby(KEYS, sort=False)["_key"].idxmax()
    return scored.loc[best, [*KEYS, "layer", "value"]].sort_values(KEYS).reset_index(drop=True)


def write_table(df: pd.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """``df`` as ``<path>.csv`` and ``<path>.parquet`` (any suffix of ``path`` is replaced)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    csv_path, parquet_path = path.with_suffix(".csv"), path.with_suffix(".parquet")
    df.to_csv(csv_path, index=False)
    df.to_parquet(parquet_path, index=False)
    return csv_path, parquet_path


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    return path


def _resolve_layer(df: pd.DataFrame, layer: int) -> int:
    """A negative layer counts from the last one (-1 = last), as in ``ModelConfig.word_layer``."""
    return int(df["layer"].max()) + 1 + layer if layer < 0 else layer


def plot_by_layer(df: pd.DataFrame, path: str | Path) -> Path:
    """PNG: the pair-averaged score by layer, one panel per task and one line per metric (``oov`` left out)."""
    avg = averages(df)
    avg = avg[(avg["pair"] == AVG) & ~avg["metric"].isin(LOWER_IS_BETTER)]
    tasks = sorted(avg["task"].unique())
    fig = Figure(figsize=(4.5 * max(len(tasks), 1), 3.5))
    axes = fig.subplots(1, max(len(tasks), 1), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for metric, rows in avg[avg["task"] == task].groupby("metric"):
            rows = rows.sort_values("layer")
            ax.plot(rows["layer"], rows["value"], marker="o", label=metric)
        ax.set(title=task, xlabel="layer", ylabel="score (mean over pairs)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="small")
    return _save(fig, path)


def plot_pair_heatmap(df: pd.DataFrame, task: str, metric: str, layer: int, path: str | Path) -> Path:
    """PNG: one metric of one task at one layer, rows = first language of the pair, columns = second."""
    layer = _resolve_layer(df, layer)
    rows = df[(df["task"] == task) & (df["metric"] == metric) & (df["layer"] == layer) & (df["pair"] != AVG)]
    if rows.empty:
        raise ValueError(f"no rows for task={task!r} metric={metric!r} layer={layer}")
    langs = rows["pair"].str.split("-", n=1, expand=True)
    table = rows.assign(lang1=langs[0], lang2=langs[1]).pivot_table(index="lang1", columns="lang2", values="value")
    fig = Figure(figsize=(2 + 0.7 * table.shape[1], 1.5 + 0.5 * table.shape[0]))
    ax = fig.subplots()
    values = table.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="viridis")
    ax.set_xticks(range(table.shape[1]), table.columns)
    ax.set_yticks(range(table.shape[0]), table.index)
    middle = (np.nanmin(values) + np.nanmax(values)) / 2
    for (i, j), value in np.ndenumerate(values):
        if not np.isnan(value):
            ax.text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize="x-small",
                color="black" if value > middle else "white",
            )
    ax.set(title=f"{task} {metric} (layer {layer})", xlabel="lang2", ylabel="lang1")
    fig.colorbar(image, ax=ax)
    return _save(fig, path)


def mlflow_metrics(df: pd.DataFrame, layer: int | None = None) -> dict[str, float]:
    """``eval/<task>/<pair>/<metric>`` (pairs and ``avg``) plus ``eval/<task>/best_layer/<metric>``.

    ``layer`` picks the layer of every value (negative counts from the last); None takes, per task
    and metric, the layer with the best pair-averaged value (what the papers report), the same
    layer for all pairs of that task.
    """
    avg = averages(df)
    best = best_layers(avg[avg["pair"] == AVG])
    if layer is None:
        chosen = best[["task", "metric", "layer"]]
    else:
        chosen = avg[["task", "metric"]].drop_duplicates().assign(layer=_resolve_layer(df, layer))
    at_layer = avg.merge(chosen, on=["task", "metric", "layer"])
    metrics = {f"eval/{r.task}/{r.pair}/{r.metric}": float(r.value) for r in at_layer.itertuples()}
    for r in best.itertuples():
        metrics[f"eval/{r.task}/best_layer/{r.metric}"] = float(r.layer)
    return metrics
