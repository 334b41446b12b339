"""The MLflow UI as a trainer reviews a distalign run: headless Chromium against a real `mlflow ui` on loopback.
A run logged the way training logs it (``tracked_run``, ``MetricLogger``) is listed in the experiment's
model-training view, and its page shows the charts grouped by prefix, the training losses (Train/) first."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest
from conftest import REPO

from distalign.tracking import MetricLogger, run_url, tracked_run


@pytest.fixture
def chromium():
    """Debian's chromium and Playwright, or a skip; in CI (``CI=true``, as .ci/run sets it, which also installs
    chromium) their absence fails the test instead: a skipped UI test there would pass unseen."""
    missing = [
        what
        for what, present in (
            ("Debian's chromium (apt-get install chromium)", shutil.which("chromium")),
            ("Playwright (the test extra)", importlib.util.find_spec("playwright")),
        )
        if not present
    ]
    if missing and os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI runs the MLflow UI test: {' and '.join(missing)} missing")
    if missing:
        pytest.skip(f"needs {' and '.join(missing)}")


def screenshot_script():
    spec = importlib.util.spec_from_file_location("screenshot", REPO / "jobs" / "screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.heavy  # an MLflow UI server and a browser
@pytest.mark.timeout(120)
def test_a_training_run_is_listed_under_model_training_with_its_charts_grouped(tmp_path, chromium):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with tracked_run(uri, "distalign", "quickstart", str(tmp_path / "runs"), {"train.lr": 0.001}, {}) as run_id:
        metrics = MetricLogger(uri, run_id)
        for step in (20, 40, 60):
            metrics.log(
                {
                    "Train/loss": 9 - step / 20,
                    "Train/mlm_loss": 6 - step / 30,
                    "perf/step_s": 0.11,
                    "perf/tokens_per_s": 5000.0,
                    "data/skipped_corpus_rows": 0.0,
                    "system/node0/cpu_utilization_percentage": 80.0,
                },
                step,
            )
        for step in (0, 30, 60):
            metrics.log({"eval/bli/avg/mrr": 0.3 + step / 600, "eval/bli/xa-xb/mrr": 0.3 + step / 500}, step)
        assert metrics.close() == 0
    script = screenshot_script()
    experiment = "1"  # the store's first experiment
    with script.mlflow_ui(uri) as base:
        assert run_url(base, experiment, run_id) == script.page_url(base, experiment, run_id, "overview")
        texts = script.visit(
            {
                "runs": (script.page_url(base, experiment, run_id, "runs"), "quickstart"),
                "metrics": (script.page_url(base, experiment, run_id, "metrics"), "eval/bli/avg"),
                "system": (script.page_url(base, experiment, run_id, "system"), "system/node0"),
            },
            out=tmp_path,
        )
    # the model-training view of the experiment (GenAI's would offer traces, judges and evaluation runs)
    assert "quickstart" in texts["runs"] and "Model registry" in texts["runs"]
    assert "Evaluation runs" not in texts["runs"] and "Judges" not in texts["runs"]
    # charts per section, in page order: MLflow 3.17's UI sorts the sections by name (a metric's name up to its
    # last "/") character by character, so the training losses' capital prefix puts them first; its own section
    # (names without "/") comes last
    assert sections(texts["metrics"]) == [
        ("Train", 2),
        ("data", 1),
        ("eval/bli/avg", 1),
        ("eval/bli/xa-xb", 1),
        ("perf", 2),
        ("Model metrics", 0),
    ]
    assert sections(texts["system"]) == [("system/node0", 1), ("System metrics", 0)]


def sections(text: str) -> list[tuple[str, int]]:
    """A metrics tab's chart sections in page order, from its visible text: each header line is followed by
    "(<charts>)"."""
    lines = text.splitlines()
    return [
        (name, int(count.strip("()")))
        for name, count in zip(lines, lines[1:])
        if count.startswith("(") and count.endswith(")") and count.strip("()").isdigit()
    ]
