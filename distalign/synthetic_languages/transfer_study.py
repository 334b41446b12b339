"""The bench's transfer numbers (ALIGN-MLM's Table 3, Figure 3 and App. E): Δ per task and cell, mean ± std over
seeds, Spearman's ρ between alignment and transfer across cells, the expected shape checked, the scatter drawn.

Δ is ``distalign.transfer.protocol``'s: the source (base language) score minus the target (derived language)
score of the task's main metric, x 100; positive = lost in transfer, as the paper's Table 3 prints it. ρ is
taken between the cells' mean alignment and their mean −Δ (better alignment, less lost: the paper's
ρ_s = 0.727 XNLI, 0.781 NER, 0.734 POS are positive in that sense).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

# ALIGN-MLM's App. E: Spearman's ρ of alignment vs transfer across its objectives x transformations; the bench's
# tasks stand for the paper's nearest (the sentence-pair task for XNLI)
PAPER_SPEARMAN = {"udpos": ("POS", 0.734), "pawsx": ("XNLI", 0.727), "xnli": ("XNLI", 0.727)}
# ALIGN-MLM's Table 3, Δ (x 100): (transformation, objective, task) -> value; Trans, Trans + Inv, Trans + Syn
PAPER_TABLE3 = {
    (t, o, task): value
    for o, rows in {
        "mlm": ((1.5, 0.4), (17.2, 38.5), (4.5, 2.0)),
        "xlm": ((-0.2, 0.2), (8.2, 33.2), (1.9, 0.9)),
        "dict_mlm": ((1.1, 0.3), (9.2, 19.0), (2.2, 1.0)),
        "align": ((-0.5, 0.1), (6.7, 3.0), (3.6, 0.8)),
    }.items()
    for t, (xnli, pos) in zip(("translit", "translit_inv", "translit_syn"), rows)
    for task, value in (("pawsx", xnli), ("xnli", xnli), ("udpos", pos))
}
# ALIGN-MLM's Table 1 (XLM, Trans + Inv, parallel sentences relative to MLM's) and Tables 4 / 5 (DICT-MLM vs
# ALIGN-MLM by dictionary share, Trans + Inv / Trans + Syn): Δ x 100 on XNLI and POS
PAPER_PARALLEL = (
    "ALIGN-MLM Table 1 (XLM, Trans + Inv; share: Δ XNLI, Δ POS): 1 %: 16.1, 28.1; 10 %: 9.5, 31.5; "
    "25 %: 8.2, 33.2; 100 %: 9.8, 35.1; ALIGN-MLM (no parallel data): 6.7, 3.0"
)
PAPER_DICTIONARY = (
    "ALIGN-MLM Tables 4 / 5 (dictionary share: Δ XNLI DICT, ALIGN; Δ POS DICT, ALIGN): Trans + Inv "
    "25 %: 9.2, 6.7; 19.0, 3.0; 50 %: 6.0, 5.7; 3.4, 1.5. Trans + Syn 25 %: 2.2, 3.6; 1.0, 0.8; "
    "50 %: 2.9, 1.6; 0.9, 0.7"
)
CELL = ["transformation", "objective"]
ORDER_CHANGING = ("translit_inv", "translit_perm")
MIN_CELLS_FOR_RHO = 3  # below it Spearman's ρ says nothing (2 cells give ±1)


def delta_column(task: str) -> str:
    return f"delta_{task}"


def transfer_scores(summary: pd.DataFrame, source: str, target: str) -> dict[str, float]:
    """From ``run_transfer``'s summary (one fine-tuning seed): per task the source and target score and Δ, x 100."""
    from distalign.transfer.tasks.registry import TRANSFER_TASKS

    out = {}
    for task, rows in summary.groupby("task", sort=False):
        value = {(r.lang, r.metric): r.mean for r in rows.itertuples()}
        main = TRANSFER_TASKS[task].main_metric
        out |= {
            f"source_{task}": 100 * value[source, main],
            f"target_{task}": 100 * value[target, main],
            delta_column(task): 100 * value[target, "delta"],
        }
    return out


def labels_used(predictions: Path) -> dict[str, int]:
    """How many distinct labels a fine-tuning predicted on one test set (``<lang>.jsonl`` of ``run_transfer``'s
    predictions), and how many the test set holds: a tagger that predicts fewer may have stopped at a shortcut
    (word position alone: VERB first, NOUN elsewhere), and its Δ then measures no model."""
    predicted, gold = set(), set()
    for line in predictions.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for labels, seen in ((row["predicted"], predicted), (row["gold"], gold)):
            seen.update(labels if isinstance(labels, list) else [labels])
    return {"predicted": len(predicted), "gold": len(gold)}


def shortcut_checks(runs: pd.DataFrame, tasks: list[str]) -> list[tuple[str, bool]]:
    """Per task, a failed check naming the fine-tunings (runs) that predicted fewer labels than the base language's
    test set holds; none where every run used them all (or runs from before the count was kept)."""
    checks = []
    for task in tasks:
        predicted, gold = f"labels_predicted_{task}", f"labels_gold_{task}"
        if predicted not in runs:
            continue
        short = runs[runs[predicted] < runs[gold]]
        if len(short):
            names = ", ".join(f"{r.transformation}/{r.objective}/seed {r.seed}" for r in short.itertuples())
            checks.append(
                (
                    f"{task}: {len(short)} of {len(runs)} fine-tunings predict fewer labels than the test set "
                    f"holds ({names}): a shortcut tagger, whose Δ measures no model; fine-tune longer "
                    "(--finetune-epochs)",
                    False,
                )
            )
    return checks


def cell_means(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per (transformation, objective): mean, sample std (n - 1; 0 for one seed) and seeds of ``columns``."""
    grouped = runs.groupby(CELL, sort=False)[columns]
    means = grouped.mean()
    stds = grouped.std(ddof=1).fillna(0.0).add_suffix("_std")
    return pd.concat([means, stds, grouped.size().rename("seeds")], axis=1).reset_index()


def spread(mean: float, std: float, seeds: int, digits: int = 1) -> str:
    """``mean ± std``; a cell of one seed shows its value alone (its std of 0 is not a measured spread)."""
    return f"{mean:.{digits}f}" if seeds < 2 else f"{mean:.{digits}f} ± {std:.{digits}f}"


def correlations(cells: pd.DataFrame, tasks: list[str]) -> dict[str, tuple[float, float]]:
    """task -> (Spearman's ρ, two-sided p) of the cells' mean alignment against their mean −Δ (NaN below
    ``MIN_CELLS_FOR_RHO`` cells or for a constant column)."""
    from scipy.stats import spearmanr

    out = {}
    for task in tasks:
        if len(cells) < MIN_CELLS_FOR_RHO:
            out[task] = (float("nan"), float("nan"))
            continue
        result = spearmanr(cells["alignment"], -cells[delta_column(task)])
        out[task] = (float(result.statistic), float(result.pvalue))
    return out


def shape_checks(cells: pd.DataFrame, tasks: list[str], rho: dict[str, tuple[float, float]]) -> list[tuple[str, bool]]:
    """ALIGN-MLM's findings as (claim, holds): under inversion and permutation ALIGN-MLM loses no more than MLM
    and XLM (Δ_align ≤ Δ_other, cell means), and ρ(alignment, −Δ) > 0. Claims whose cells were not run are left out;
    a task with the same Δ in every cell (not learnt) fails as such instead of passing every comparison."""
    delta = {(r.transformation, r.objective): r for r in cells.itertuples()}
    checks = []
    for task in tasks:
        if len(cells) > 1 and cells[delta_column(task)].nunique() == 1:  # e.g. source and target both at chance
            checks.append(
                (
                    f"{task}: Δ is {cells[delta_column(task)].iloc[0]:.1f} in every cell (source "
                    f"{cells[f'source_{task}'].mean():.1f}): nothing learnt to transfer, no comparison",
                    False,
                )
            )
            continue
        for t in ORDER_CHANGING:
            for other in ("mlm", "xlm"):
                if (t, "align") in delta and (t, other) in delta:
                    a, b = (getattr(delta[t, o], delta_column(task)) for o in ("align", other))
                    checks.append((f"{task}, {t}: Δ align {a:.1f} ≤ Δ {other} {b:.1f}", bool(a <= b)))
        value, _ = rho[task]
        if not np.isnan(value):
            checks.append((f"{task}: ρ(alignment, −Δ) = {value:.3f} > 0", bool(value > 0)))
    return checks


def markdown(
    cells: pd.DataFrame, tasks: list[str], rho: dict[str, tuple[float, float]], checks: list[tuple[str, bool]]
) -> str:
    """The transfer table (mean ± std over seeds, the paper's Δ beside), the correlations and the checks."""
    head = "| transformation | objective | seeds | alignment | " + " | ".join(
        f"{task} source | {task} target | {task} Δ | paper Δ ({PAPER_SPEARMAN.get(task, (task,))[0]})" for task in tasks
    )
    lines = [head + " |", "|" + "---|" * (4 + 4 * len(tasks))]
    for r in cells.itertuples():
        row = f"| {r.transformation} | {r.objective} | {r.seeds} | {spread(r.alignment, r.alignment_std, r.seeds)} |"
        for task in tasks:
            paper = PAPER_TABLE3.get((r.transformation, r.objective, task))
            row += "".join(
                f" {spread(getattr(r, f'{kind}_{task}'), getattr(r, f'{kind}_{task}_std'), r.seeds)} |"
                for kind in ("source", "target", "delta")
            )
            row += f" {'–' if paper is None else f'{paper:.1f}'} |"
        lines.append(row)
    lines.append("")
    for task in tasks:
        name, paper = PAPER_SPEARMAN.get(task, (task, float("nan")))
        value, p = rho[task]
        found = (
            f"{value:.3f} (p = {p:.3g})"
            if len(cells) >= MIN_CELLS_FOR_RHO
            else f"not computed, it needs {MIN_CELLS_FOR_RHO} cells or more"
        )
        lines.append(
            f"- Spearman ρ(alignment, −Δ {task}) over {len(cells)} cells: {found}; paper ({name}): {paper:.3f}"
        )
    lines.append(
        "- ALIGN-MLM App. E, across its 4 objectives x 3 transformations: ρ_s = 0.727 XNLI, 0.781 NER, "
        "0.734 POS (each p < .01)"
    )
    lines.append(checks_markdown("Expected shape", checks))
    return "\n".join(lines)


def checks_markdown(title: str, checks: list[tuple[str, bool]]) -> str:
    """A list item saying whether all ``checks`` hold, then each claim marked ok or FAILS (or that none applies:
    cells that hold none of a check's pairs prove nothing)."""
    if not checks:
        return f"- {title}: no check applies to these cells\n"
    failed = sum(not holds for _, holds in checks)
    return (
        f"- {title}: {'holds' if not failed else 'DOES NOT HOLD'} ({len(checks) - failed} of {len(checks)} "
        "checks)" + "".join(f"\n  - {'ok' if holds else 'FAILS'}: {claim}" for claim, holds in checks) + "\n"
    )


def all_hold(checks: list[tuple[str, bool]]) -> float:
    """The MLflow metric of ``checks``: 1 when every one holds, 0 when one fails, NaN (not logged) when none applies."""
    return float(all(holds for _, holds in checks)) if checks else float("nan")


def paper_tables(varied: list[str]) -> str:
    """The paper's rows for a study varying ``parallel_share`` or ``dictionary_share``."""
    return "\n".join(
        [PAPER_PARALLEL] * ("parallel_share" in varied) + [PAPER_DICTIONARY] * ("dictionary_share" in varied)
    )


def scatter(cells: pd.DataFrame, tasks: list[str], rho: dict[str, tuple[float, float]], path: Path) -> Path:
    """ALIGN-MLM's Figure 3: per task, each cell's −Δ against its alignment, one colour per objective and one
    marker per transformation, ρ in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    markers = dict(zip(sorted(set(cells["transformation"])), "osD^v"))
    colours = dict(zip(sorted(set(cells["objective"])), plt.get_cmap("tab10").colors))
    figure, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for r in cells.itertuples():
            ax.errorbar(
                r.alignment,
                -getattr(r, delta_column(task)),
                xerr=r.alignment_std,
                yerr=getattr(r, f"{delta_column(task)}_std"),
                marker=markers[r.transformation],
                color=colours[r.objective],
                linestyle="none",
                label=f"{r.objective} / {r.transformation}",
            )
        value, p = rho[task]
        ax.set(
            title=f"{task}: Spearman ρ = {value:.2f} (p = {p:.2g})", xlabel="alignment (%)", ylabel=f"−Δ {task} (x 100)"
        )
    axes[0][-1].legend(fontsize=7, loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
