"""The check's one report: ``report.json`` (everything) and ``report.md`` (pass/fail per step with its time, the
figures each step measured, the log tails of the steps that did not pass). Written again whenever a step changes
state, so a check stopped from outside still leaves its report so far."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from distalign.tools.gpu_check.run import PASSED, StepResult

LOG_TAIL_LINES = 40
# columns of a training run's row: (metric, label, how to show it)
RUN_COLUMNS = (
    ("perf/step_ms", "step ms", "{:.1f}"),
    ("perf/tokens_per_s", "tokens/s", "{:,.0f}"),
    ("perf/mfu", "MFU", "{:.2%}"),
    ("perf/data_wait_ms", "data wait ms", "{:.1f}"),
    ("perf/peak_memory_gib", "peak GiB", "{:.2f}"),
    ("startup/total_s", "start-up s", "{:.1f}"),
)


def write_report(folder: Path, header: dict, results: list[StepResult]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    document = header | {"passed": sum(r.status == PASSED for r in results), "steps": [asdict(r) for r in results]}
    json_path, md_path = folder / "report.json", folder / "report.md"
    json_path.write_text(json.dumps(document, indent=1, default=str))
    md_path.write_text(markdown(header, results))
    return md_path, json_path


def markdown(header: dict, results: list[StepResult]) -> str:
    finished = [r for r in results if r.status not in ("PENDING", "RUNNING")]
    passed = sum(r.status == PASSED for r in results)
    lines = [f"# distalign GPU check: {passed}/{len(results)} steps passed ({header.get('mode', '?')} mode)", ""]
    lines += [f"- {key}: {value}" for key, value in header.items() if key != "mode" and not isinstance(value, dict)]
    for key, value in header.items():
        if isinstance(value, dict):
            lines.append(f"- {key}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
    lines += ["", "| step | status | seconds | timeout s | started at s | what |", "|---|---|---|---|---|---|"]
    for r in results:
        status = (
            r.status
            + (f" (rc {r.returncode})" if r.status not in (PASSED, "SKIPPED") and r.returncode is not None else "")
            + (f": {r.note}" if r.note else "")
        )
        lines.append(f"| {r.name} | {status} | {r.seconds:.0f} | {r.timeout_s} | {r.started_s:.0f} | {r.about} |")
    for r in finished:
        if r.figures:
            lines += ["", f"## {r.name}", "", *figure_lines(r.figures)]
    failing = [r for r in finished if r.status != PASSED and r.log]
    for r in failing:
        lines += [
            "",
            f"## log of {r.name} ({r.status}), last {LOG_TAIL_LINES} lines",
            "",
            "```",
            *log_tail(Path(r.log)),
            "```",
        ]
    return "\n".join(lines) + "\n"


def figure_lines(figures: dict) -> list[str]:
    if "error" in figures:
        return [f"figures not read: {figures['error']}"]
    if "runs" in figures:
        return run_lines(figures["runs"]) + ([figures["note"]] if "note" in figures else [])
    if "settings" in figures:
        lines = [
            "| setting | steps | alignment % | MLM loss | ms/step | curve (step: alignment) |",
            "|---|---|---|---|---|---|",
        ]
        for name, s in figures["settings"].items():
            curve = ", ".join(f"{step}: {value}" for step, value in s["curve"])
            lines.append(
                f"| {name} | {s['step']} | {s['alignment']} | {s['mlm_loss']} | {s['ms_per_step']} | {curve} |"
            )
        return lines
    if "rows" in figures:
        return figures["rows"] or ["(no GPU rows in results.md)"]
    if "summary" in figures:
        rows = figures["summary"]
        if not rows:
            return ["(empty summary.csv)"]
        keys = list(rows[0])
        return [
            "| " + " | ".join(keys) + " |",
            "|" + "---|" * len(keys),
            *("| " + " | ".join(str(row[k]) for k in keys) + " |" for row in rows),
        ]
    if "not_passed" in figures:
        counts = ", ".join(f"{figures[k]} {k}" for k in ("passed", "failed", "skipped"))
        return [counts, *(f"- {line}" for line in figures["not_passed"])]
    return [f"- {key}: {json.dumps(value)}" for key, value in figures.items()]


def run_lines(runs: list[dict]) -> list[str]:
    """A training run's row: its status, seconds, engine and the perf/start-up figures (mean after the first logged
    window); then its start-up phases and loss."""
    if not runs:
        return ["(no MLflow runs)"]
    lines = [
        "| run | status | seconds | params | " + " | ".join(label for _, label, _ in RUN_COLUMNS) + " |",
        "|---|---|---|---|" + "---|" * len(RUN_COLUMNS),
    ]
    details = []
    for run in runs:
        metrics = run["metrics"]
        cells = [
            form.format(metrics[key]["mean_after_first"]) if key in metrics else "-" for key, _, form in RUN_COLUMNS
        ]
        params = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(run["params"].items()))
        seconds = f"{run['seconds']:.0f}" if run["seconds"] is not None else "-"
        lines.append(f"| {run['name']} | {run['status']} | {seconds} | {params} | " + " | ".join(cells) + " |")
        phases = {
            k.removeprefix("startup/"): v["last"]
            for k, v in metrics.items()
            if k.startswith("startup/") and k != "startup/total_s"
        }
        if phases:
            details.append(f"- {run['name']} start-up: " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
        if "Train/loss" in metrics:
            loss = metrics["Train/loss"]
            details.append(
                f"- {run['name']} Train/loss: {loss['first']:.3f} -> {loss['last']:.3f} ({loss['n']} values)"
            )
        gpu = {k.split("/")[-1]: v["max"] for k, v in metrics.items() if k.startswith("system/") and "gpu" in k}
        if gpu:
            details.append(f"- {run['name']} GPU (max): " + ", ".join(f"{k} {v:.0f}" for k, v in gpu.items()))
    return lines + [""] + details


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as err:
        return [f"(no log: {err})"]
    return [line[:400] for line in text[-lines:]]
