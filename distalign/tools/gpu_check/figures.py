"""What each step measured, read from what it left behind: a dict of figures per step for the report.

``READERS`` maps a step's ``figures`` name to its reader, ``(step output folder, step home, child) -> dict``.
MLflow is read in a child process (``python -m distalign.tools.gpu_check.mlflow_runs``) in the steps' environment (on
the GPU machine MLflow is in the carried site folder, which only the steps' PYTHONPATH names): the check itself
imports only the standard library, and a broken store must not break the report.
"""

from __future__ import annotations

import csv
import json
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ChildPython:
    """How the readers start a Python process: the steps' interpreter and environment (None: this process's)."""

    executable: str
    env: dict[str, str] | None = field(default=None, hash=False)


# of the MLflow runs' metrics, those the report shows (mean after the first logged window, which holds the warm-up)
REPORTED_METRICS = (
    "perf/step_ms",
    "perf/tokens_per_s",
    "perf/mfu",
    "perf/data_wait_ms",
    "perf/peak_memory_gib",
    "startup/total_s",
    "Train/loss",
)


def environment(out: Path, home: Path, child: ChildPython) -> dict:
    return json.loads((out / "environment.json").read_text())


def pytest_results(out: Path, home: Path, child: ChildPython) -> dict:
    """Counts and the names of the tests that did not pass, from the JUnit XML pytest wrote."""
    root = ET.parse(out / "junit.xml").getroot()
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    not_passed = []
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        key = "skipped" if outcome == "skipped" else "failed" if outcome in ("failure", "error") else "passed"
        counts[key] += 1
        if key != "passed":
            message = next(iter(case)).get("message", "")
            not_passed.append(f"{key}: {name}: {message[:300]}")
    return counts | {"not_passed": not_passed}


def bench_rows(out: Path, home: Path, child: ChildPython) -> dict:
    """The GPU rows of ``bench perf``'s results.md (tokens/s, the Trainer anchor, MFU)."""
    lines = (out / "bench_perf" / "results.md").read_text().splitlines()
    return {"rows": [line for line in lines if line.startswith("| GPU")]}


def emergence_curves(out: Path, home: Path, child: ChildPython) -> dict:
    """Per setting: its last row (step, alignment, MLM loss) and the milliseconds a step took."""
    settings: dict[str, list[dict]] = {}
    tables = sorted((out / "emergence").rglob("curves.csv"))
    if not tables:
        raise FileNotFoundError(f"no curves.csv under {out / 'emergence'}")
    for table in tables:
        with table.open(encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            settings.setdefault(row["setting"], []).append(row)
    summary = {}
    for name, rows in settings.items():
        last, steps = rows[-1], float(rows[-1]["step"])
        summary[name] = {
            "step": int(steps),
            "alignment": round(float(last["alignment"]), 2),
            "mlm_loss": round(float(last["mlm_loss"]), 3),
            "ms_per_step": round(1000 * float(last["seconds"]) / steps, 1) if steps else None,
            "curve": [(int(float(r["step"])), round(float(r["alignment"]), 1)) for r in rows],
        }
    return {"settings": summary}


def transfer_summary(out: Path, home: Path, child: ChildPython) -> dict:
    with (out / "transfer" / "summary.csv").open(encoding="utf-8") as f:
        return {"summary": list(csv.DictReader(f))}


def mlflow_runs(out: Path, home: Path, child: ChildPython) -> dict:
    """The step's MLflow runs (its own store, ``<home>/mlflow.db``): status, seconds, the reported metrics."""
    store = home / "mlflow.db"
    if not store.exists():
        return {"runs": [], "note": f"no MLflow store at {store}"}
    done = subprocess.run(
        [child.executable, "-m", "distalign.tools.gpu_check.mlflow_runs", f"sqlite:///{store}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child.env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reading {store}: {done.stderr[-2000:]}")
    return {"runs": json.loads(done.stdout)}


READERS = {
    "environment": environment,
    "pytest": pytest_results,
    "bench": bench_rows,
    "emergence": emergence_curves,
    "transfer": transfer_summary,
    "mlflow": mlflow_runs,
}


def read_figures(kind: str, out: Path, home: Path, child: ChildPython) -> dict:
    """The step's figures, or ``{"error": ...}`` where what it should have left is missing or unreadable."""
    if not kind:
        return {}
    try:
        return READERS[kind](out, home, child)
    except Exception as err:  # a failed step leaves no (or half) files: the report says what could not be read
        return {"error": f"{type(err).__name__}: {err}"[:2000]}
