"""The transfer protocol's numbers from the fine-tuning results: per seed, then mean ± std over seeds.

Per seed and task: each test language's metrics; ``avg``, their mean over every test language, the source
included (XTREME's average); ``delta`` of a target language = source score - its score in the task's main
metric (ALIGN-MLM's Δ; positive = lost in transfer), and ``avg`` ``delta`` = its mean over the targets.
Over seeds: the mean and the sample standard deviation (n - 1; 0 for one seed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

AVG = "avg"
DELTA = "delta"


def seed_rows(result: dict, source: str, main_metric: str) -> list[dict]:
    """(task, seed, lang, metric, value) rows of one fine-tuning run's test scores."""
    task, seed, test = result["task"], result["seed"], result["test"]
    rows = [
        {"task": task, "seed": seed, "lang": lang, "metric": metric, "value": value}
        for lang, metrics in test.items()
        for metric, value in metrics.items()
    ]
    for metric in test[source]:
        rows.append(
            {
                "task": task,
                "seed": seed,
                "lang": AVG,
                "metric": metric,
                "value": float(np.mean([metrics[metric] for metrics in test.values()])),
            }
        )
    deltas = {
        lang: test[source][main_metric] - metrics[main_metric] for lang, metrics in test.items() if lang != source
    }
    rows += [{"task": task, "seed": seed, "lang": lang, "metric": DELTA, "value": d} for lang, d in deltas.items()]
    if deltas:
        rows.append(
            {"task": task, "seed": seed, "lang": AVG, "metric": DELTA, "value": float(np.mean(list(deltas.values())))}
        )
    return rows


def summarise(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and number of seeds per (task, lang, metric)."""
    grouped = per_seed.groupby(["task", "lang", "metric"], sort=False)["value"]
    out = grouped.agg(mean="mean", n="count").reset_index()
    out["std"] = grouped.std(ddof=1).fillna(0.0).to_numpy()  # one seed: no spread
    return out[["task", "lang", "metric", "mean", "std", "n"]]


def text_table(summary: pd.DataFrame, main_metrics: dict[str, str], source: str) -> str:
    """Per task: a line per language with the main metric and Δ as mean ± std (x 100, as the papers print them)."""
    lines = []
    for task, rows in summary.groupby("task", sort=False):
        metric = main_metrics[task]
        value = {(r.lang, r.metric): (r.mean, r.std, r.n) for r in rows.itertuples()}
        langs = [source] + sorted({r.lang for r in rows.itertuples()} - {source, AVG}) + [AVG]
        lines.append(
            f"{task} ({metric} x 100, mean ± std over {value[(source, metric)][2]} seeds; Δ = {source} - language)"
        )
        for lang in langs:
            score = value[lang, metric]
            delta = value.get((lang, DELTA))
            text = f"  {lang:>6}  {metric} {100 * score[0]:6.2f} ± {100 * score[1]:5.2f}"
            lines.append(text + (f"   Δ {100 * delta[0]:6.2f} ± {100 * delta[1]:5.2f}" if delta else ""))
    return "\n".join(lines)
