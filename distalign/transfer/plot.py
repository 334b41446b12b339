"""A bar plot per task: score by language for each evaluated model (the trained one beside the model it started
from, or earlier checkpoints), error bars the std over fine-tuning seeds; and the summary table to and from MLflow
metric names (``transfer/<task>/<lang>/<metric>`` and ``..._std``), so a run's logged scores can be plotted again.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distalign.transfer.protocol import AVG, DELTA

STD = "_std"


def summary_metrics(summary: pd.DataFrame) -> dict[str, float]:
    """The summary's means and stds as MLflow metrics."""
    out = {}
    for row in summary.itertuples():
        key = f"transfer/{row.task}/{row.lang}/{row.metric}"
        out[key], out[key + STD] = float(row.mean), float(row.std)
    return out


def summary_from_metrics(metrics: dict[str, float]) -> pd.DataFrame:
    """``summary_metrics``' inverse (without ``n``): a run's ``transfer/<task>/<lang>/<metric>`` values; other
    metrics (the fine-tuning runs' ``transfer/<task>/dev/...``, anything else) are left out."""
    rows: dict[tuple[str, ...], dict[str, str | float]] = {}
    for key, value in metrics.items():
        parts = key.removesuffix(STD).split("/")
        if len(parts) != 4 or parts[0] != "transfer" or parts[2] == "dev":
            continue
        row = rows.setdefault(tuple(parts[1:]), {"task": parts[1], "lang": parts[2], "metric": parts[3], "std": 0.0})
        row["std" if key.endswith(STD) else "mean"] = value
    return pd.DataFrame([r for r in rows.values() if "mean" in r], columns=["task", "lang", "metric", "mean", "std"])


def source_language(summary: pd.DataFrame, task: str) -> str:
    """The task's source language in a summary: the one tested language without a Δ."""
    rows = summary[summary["task"] == task]
    sources = set(rows["lang"]) - set(rows[rows["metric"] == DELTA]["lang"]) - {AVG}
    return min(sources) if sources else ""


def plot_task(summaries: dict[str, pd.DataFrame], task: str, metric: str, source: str, path: Path) -> Path:
    """Grouped bars of ``metric`` per language (source first, then the targets, then their average), one bar per
    model in ``summaries`` (label -> summary table, in the order given), error bars the std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tables = {
        label: s[(s["task"] == task) & (s["metric"] == metric)].set_index("lang") for label, s in summaries.items()
    }
    langs = sorted(set().union(*(t.index for t in tables.values())) - {source, AVG})
    langs = [lang for lang in (source, *langs, AVG) if any(lang in t.index for t in tables.values())]
    x, width = np.arange(len(langs)), 0.8 / max(len(tables), 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(langs) * max(len(tables), 1) ** 0.5 + 2), 3.2))
    for i, (label, table) in enumerate(tables.items()):
        means = [100 * table["mean"].get(lang, np.nan) for lang in langs]
        stds = [100 * table["std"].get(lang, 0.0) for lang in langs]
        ax.bar(x + (i - (len(tables) - 1) / 2) * width, means, width, yerr=stds, capsize=3, label=label)
    ax.set_xticks(x, langs)
    ax.set_ylabel(f"{metric} x 100" if metric != DELTA else f"Δ ({source} - language) x 100")
    ax.set_title(f"{task}: zero-shot transfer from {source} (mean ± std over seeds)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
