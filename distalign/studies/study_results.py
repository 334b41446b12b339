"""A study's results on its MLflow parent run: the trial table, the best trial and its checkpoint, and the
plots the papers draw.

- ``trials.csv`` and ``trials.json`` (``log_table``: the MLflow UI shows it as a table), ``trials.png``;
- per trial: the vanilla score (the metric at step 0, the trial's own seed and starting model), the gain over
  it, the time to the first step (``startup/total_s``) and the wall time; on the parent, the trials' mean
  start-up, its share of their time and the mean of each start-up phase (``study/…``);
- with seeds in the grid: ``configurations.csv/png``, mean ± std of the metric and of the gain per configuration;
- with language samples: ``diversity.png``, the metric against d_typ and against sim_train-test, with
  Spearman's ρ and p (as BabelBERT §5.1 discusses), also logged as ``study/spearman_*``;
- with constraint sizes (``data.max_constraints`` in the grid): ``sizes.png``, the metric against the size
  on a log axis with the vanilla model's score (step 0) as a line (BabelBERT Figure 2);
- ``pairs.png``: the best trial's MRR per language pair as a heatmap, each cell annotated with the URIEL
  distance (1 − cosine of syntax_knn vectors) of its two languages where URIEL knows them;
- with a transfer metric (``transfer/<task>/<lang>/<metric>``, ``eval.transfer``) instead: every trial's
  per-language transfer scores (``transfer_languages.csv/json``, ``log_table``) and ``transfer_<task>.png``, the
  metric by language per trial beside the best trial's starting model, std over fine-tuning seeds as error bars.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from pathlib import Path
from typing import Any

from distalign.logs import console

log = logging.getLogger("distalign")
SEED = "train.seed"
SIZE = "data.max_constraints"
PAIR_METRIC = re.compile(r"^(eval|test)/bli/([^/]+)-([^/]+)/mrr$")  # in-loop (validation) or test pairs


def tag_value(text: str) -> Any:
    """A tag as the value it stands for (tags are strings: JSON for grid values, plain text otherwise)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def child_runs(client, parent_id: str) -> dict[str, Any]:
    parent = client.get_run(parent_id)
    runs = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'")
    return {run.info.run_name: run for run in runs}


def log_study_summary(client, parent_id: str, study, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    children = child_runs(client, parent_id)
    figures = {
        row["trial"]: trial_figures(client, children[row["trial"]], study.metric)
        for row in rows
        if row["trial"] in children
    }
    table = pd.DataFrame([row | figures.get(row["trial"], {}) for row in rows])
    if "vanilla" in table:  # each trial against its own seed's vanilla model (its step-0 score)
        table["gain"] = table[study.metric] - table["vanilla"]
    print(table.to_string(index=False), file=console(), flush=True)
    client.log_table(parent_id, data=table, artifact_file="trials.json")
    scored = table.dropna(subset=[study.metric])
    for name, value in _overhead(table, children, figures).items():
        client.log_metric(parent_id, f"study/{name}", value)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        table.to_csv(out / "trials.csv", index=False)
        if len(scored):
            best = scored.sort_values(study.metric, ascending=study.mode == "min").iloc[0]
            client.log_metric(parent_id, f"best/{study.metric}", float(best[study.metric]))
            client.set_tag(parent_id, "distalign.best_trial", best["trial"])
            # the checkpoint the metric comes from: the selected one for test pairs, else the last
            source = "distalign.best_checkpoint" if study.metric.startswith("test/") else "distalign.checkpoint"
            if best["trial"] in children and source in children[best["trial"]].data.tags:
                client.set_tag(parent_id, "distalign.best_checkpoint", children[best["trial"]].data.tags[source])
            _bars(scored, study, out / "trials.png")
            if SEED in study.grid or study.search.seeds > 1:
                _by_configuration(scored, study, out)
            if "d_typ" in scored:
                for name, value in _diversity(scored, study, out / "diversity.png").items():
                    client.log_metric(parent_id, f"study/{name}", value)
            if SIZE in study.grid:
                _sizes(
                    scored, study, table["vanilla"].dropna().tolist() if "vanilla" in table else [], out / "sizes.png"
                )
            if best["trial"] in children and study.metric.startswith("transfer/"):
                _transfer_languages(client, parent_id, children, list(scored["trial"]), best["trial"], study, out)
            elif best["trial"] in children:
                _pair_heatmap(
                    children[best["trial"]],
                    best["trial"],
                    out / "pairs.png",
                    "test" if study.metric.startswith("test/") else "eval",
                )
        for path in sorted(out.iterdir()):
            client.log_artifact(parent_id, str(path))


def trial_figures(client, run, metric: str) -> dict[str, float | None]:
    """A trial's vanilla score (``metric`` at step 0), its time to the first step and its wall time: the run's
    duration plus the start-up phases before the run opened, the span ``startup/total_s`` also starts at."""
    from distalign.train.startup import BEFORE_RUN_PHASES

    vanilla = next((m.value for m in client.get_metric_history(run.info.run_id, metric) if m.step == 0), None)
    wall = None
    if run.info.end_time:
        before = sum(run.data.metrics.get(f"startup/{phase}_s", 0.0) for phase in BEFORE_RUN_PHASES)
        wall = (run.info.end_time - run.info.start_time) / 1000 + before
    return {"vanilla": vanilla, "startup_s": run.data.metrics.get("startup/total_s"), "wall_s": wall}


def _overhead(table, children: dict, figures: dict) -> dict[str, float]:
    """What the trials spent before their first step: the mean start-up, its share of the trials' time,
    and the mean of every start-up phase (``distalign.train.startup``)."""
    timed = table.dropna(subset=["startup_s", "wall_s"]) if {"startup_s", "wall_s"} <= set(table) else table[:0]
    if timed.empty:
        return {}
    phases: dict[str, list[float]] = {}
    for trial in timed["trial"]:
        for key, value in children[trial].data.metrics.items():
            if key.startswith("startup/") and key != "startup/total_s":
                phases.setdefault(key.removeprefix("startup/"), []).append(value)
    summary = {
        "trial_startup_s_mean": float(timed["startup_s"].mean()),
        "trial_wall_s_mean": float(timed["wall_s"].mean()),
        "trial_startup_share": float(timed["startup_s"].sum() / timed["wall_s"].sum()),
    }
    print(
        f"trial overhead: {summary['trial_startup_s_mean']:.1f} s to the first step of "
        f"{summary['trial_wall_s_mean']:.1f} s per trial ({100 * summary['trial_startup_share']:.0f} %); "
        + ", ".join(f"{k.removesuffix('_s')} {sum(v) / len(v):.1f} s" for k, v in phases.items()),
        file=console(),
        flush=True,
    )
    return summary | {f"startup/{k}": sum(v) / len(v) for k, v in phases.items()}


def _figure(width: float = 5, height: float = 3.2):
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _label(row, keys: list[str]) -> str:
    return ", ".join(f"{k}={row[k]}" for k in keys if k in row)


def _bars(scored, study, path: Path) -> None:
    fig, ax = _figure(max(4, 0.8 * len(scored)))
    keys = list(study.grid) + list(study.search.space) + (["languages"] if "languages" in scored else [])
    ax.bar(range(len(scored)), scored[study.metric])
    ax.set_xticks(
        range(len(scored)), [_label(row, keys) for _, row in scored.iterrows()], rotation=30, ha="right", fontsize=6
    )
    ax.set_ylabel(study.metric)
    ax.set_title(study.study)
    _save(fig, path)


def _by_configuration(scored, study, out: Path) -> None:
    """Mean ± std over seeds of every configuration (the grid point without the seed, and the language sample)."""
    keys = [k for k in list(study.grid) + list(study.search.space) + ["languages"] if k != SEED and k in scored]
    grouped = scored.groupby(keys, dropna=False) if keys else scored.groupby(lambda _: "all")
    summary = grouped[study.metric].agg(["mean", "std", "count"])
    if "gain" in scored:  # over each seed's own vanilla model
        summary = summary.join(grouped["gain"].agg(["mean", "std"]).add_prefix("gain_"))
    summary = summary.reset_index()
    summary.to_csv(out / "configurations.csv", index=False)
    fig, ax = _figure(max(4, 0.9 * len(summary)))
    ax.errorbar(range(len(summary)), summary["mean"], yerr=summary["std"].fillna(0), fmt="o", capsize=4)
    ax.set_xticks(
        range(len(summary)), [_label(row, keys) for _, row in summary.iterrows()], rotation=30, ha="right", fontsize=6
    )
    ax.set_ylabel(f"{study.metric}\nmean ± std over seeds")
    ax.set_title(f"{study.study}: {int(summary['count'].max())} seeds")
    _save(fig, out / "configurations.png")


def _diversity(scored, study, path: Path) -> dict[str, float]:
    import matplotlib.pyplot as plt
    from scipy.stats import spearmanr

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    stats = {}
    for ax, column, name in (
        (axes[0], "d_typ", "typological diversity d_typ"),
        (axes[1], "sim_train_test", "similarity to the test languages"),
    ):
        x, y = scored[column].astype(float), scored[study.metric].astype(float)
        ax.scatter(x, y)
        if len(scored) >= 3 and x.nunique() > 1:
            rho, p = spearmanr(x, y)
            stats[f"spearman_{column}"], stats[f"spearman_{column}_p"] = float(rho), float(p)
            ax.set_title(f"Spearman ρ = {rho:.2f} (p = {p:.2g})", fontsize=9)
        ax.set_xlabel(name)
    axes[0].set_ylabel(study.metric)
    fig.suptitle(study.study, fontsize=10)
    _save(fig, path)
    return stats


def _sizes(scored, study, vanilla: list[float], path: Path) -> None:
    """The metric against the constraint-set size (0 = the whole set, drawn right of the largest subset), with
    the mean of the trials' ``vanilla`` scores as a line."""
    sizes = scored[SIZE].astype(int)
    largest = max(int(sizes.max()), 1)
    position = sizes.where(sizes > 0, largest * 10)
    summary = scored.assign(position=position).groupby("position")[study.metric].agg(["mean", "std"])
    fig, ax = _figure()
    ax.errorbar(summary.index, summary["mean"], yerr=summary["std"].fillna(0), fmt="o-", capsize=4, label="specialized")
    if vanilla:
        ax.axhline(sum(vanilla) / len(vanilla), linestyle="--", color="grey", label="vanilla (step 0)")
    ax.set_xscale("log")
    ax.set_xticks(list(summary.index), [str(int(p)) if p != largest * 10 else "all" for p in summary.index])
    ax.set_xlabel("constraint-set size")
    ax.set_ylabel(study.metric)
    ax.legend(fontsize=8)
    ax.set_title(study.study)
    _save(fig, path)


def _transfer_languages(client, parent_id: str, children: dict, trials: list[str], best: str, study, out: Path) -> None:
    """A transfer metric's study: every scored trial's per-language scores (``transfer_languages.csv``, and
    ``transfer_languages.json`` with ``log_table``) and a bar plot of the metric's task by language
    (``transfer_<task>.png``), the best trial's starting model first when it was transferred (its step-0 values)."""
    import pandas as pd

    from distalign.transfer.plot import plot_task, source_language, summary_from_metrics

    _, task, _, metric = study.metric.split("/")
    summaries = {trial: summary_from_metrics(children[trial].data.metrics) for trial in trials if trial in children}
    run_id = children[best].info.run_id
    start = {
        key: m.value
        for key in children[best].data.metrics
        if key.startswith(f"transfer/{task}/")
        for m in client.get_metric_history(run_id, key)
        if m.step == 0
    }
    if start:
        summaries = {f"start ({best})": summary_from_metrics(start)} | summaries
    table = pd.concat([summary.assign(trial=trial) for trial, summary in summaries.items()], ignore_index=True)
    table.to_csv(out / "transfer_languages.csv", index=False)
    client.log_table(parent_id, data=table, artifact_file="transfer_languages.json")
    plot_task(summaries, task, metric, source_language(summaries[best], task), out / f"transfer_{task}.png")


def _pair_heatmap(run, trial: str, path: Path, prefix: str) -> None:
    """The trial's MRR per language pair: the test pairs for a study scored on them, else the in-loop pairs."""
    import numpy as np

    from distalign.errors import ConfigError
    from distalign.typology import cosine_similarities, uriel_vectors

    scores = {}
    for key, value in run.data.metrics.items():
        if (match := PAIR_METRIC.match(key)) and match.group(1) == prefix:
            scores[match.groups()[1:]] = value
    if not scores:
        return
    languages = sorted({lang for pair in scores for lang in pair})
    try:
        vectors = uriel_vectors(languages)
        distance = 1 - cosine_similarities(vectors, vectors)
    except ConfigError:  # a language URIEL does not know (a synthetic one): no distances
        distance = None
    except ImportError as err:  # lang2vec (or its pkg_resources) missing: the finished study still gets its report
        log.warning("study report: no URIEL distances in %s (lang2vec cannot be imported: %s)", path.name, err)
        distance = None
    index = {lang: i for i, lang in enumerate(languages)}
    grid = np.full((len(languages), len(languages)), np.nan)
    for (a, b), value in scores.items():
        grid[index[a], index[b]] = grid[index[b], index[a]] = value
    fig, ax = _figure(1.2 + 0.7 * len(languages), 1 + 0.6 * len(languages))
    image = ax.imshow(grid, cmap="viridis")
    low, high = np.nanmin(grid), np.nanmax(grid)
    for (a, b), value in scores.items():
        bright = high > low and (value - low) / (high - low) > 0.6  # viridis turns yellow: dark text there
        for i, j in ((index[a], index[b]), (index[b], index[a])):
            text = f"{value:.2f}" + (f"\nd={distance[i, j]:.2f}" if distance is not None else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=6, color="black" if bright else "white")
    ax.set_xticks(range(len(languages)), languages)
    ax.set_yticks(range(len(languages)), languages)
    fig.colorbar(image, ax=ax, label="MRR")
    ax.set_title(
        f"{trial}: {prefix} BLI MRR per pair" + (" (d: URIEL distance)" if distance is not None else ""), fontsize=8
    )
    _save(fig, path)
