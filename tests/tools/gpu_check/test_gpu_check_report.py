"""The GPU check's figures (read from what each step leaves) and its one report (report.md, report.json)."""

import json
import os
import sys
from pathlib import Path

from distalign.tools.gpu_check.check_report import write_report
from distalign.tools.gpu_check.figures import ChildPython, bench_rows, emergence_curves, pytest_results, read_figures
from distalign.tools.gpu_check.run import StepResult

REPO = Path(__file__).resolve().parents[3]
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.train.test_step_timing" name="test_timer[cuda]" time="1.2"/>
<testcase classname="tests.test_x" name="test_nccl" time="0.3">
<failure message="RuntimeError: No backend">tb</failure></testcase>
<testcase classname="tests.test_x" name="test_other" time="0"><skipped message="no CUDA"/></testcase>
</testsuite></testsuites>"""

RUN = {
    "experiment": "distalign",
    "name": "align-mlm-tiny",
    "status": "FINISHED",
    "seconds": 95.5,
    "params": {"train.engine": "deepspeed", "train.zero_stage": "2"},
    "metrics": {
        "perf/step_ms": {"n": 3, "first": 90.0, "last": 28.0, "mean_after_first": 28.5, "max": 90.0},
        "perf/mfu": {"n": 3, "first": 0.01, "last": 0.036, "mean_after_first": 0.036, "max": 0.036},
        "startup/total_s": {"n": 1, "first": 61.0, "last": 61.0, "mean_after_first": 61.0, "max": 61.0},
        "startup/imports_s": {"n": 1, "first": 6.5, "last": 6.5, "mean_after_first": 6.5, "max": 6.5},
        "Train/loss": {"n": 5, "first": 9.1, "last": 6.2, "mean_after_first": 7.0, "max": 9.1},
        "system/node0/gpu_0_utilization_percentage": {
            "n": 9,
            "first": 0,
            "last": 40,
            "mean_after_first": 35,
            "max": 71,
        },
    },
}


def test_pytest_counts_and_the_tests_that_did_not_pass(tmp_path):
    (tmp_path / "junit.xml").write_text(JUNIT)
    figures = pytest_results(tmp_path, tmp_path, ChildPython("python3"))
    assert (figures["passed"], figures["failed"], figures["skipped"]) == (1, 1, 1)
    assert figures["not_passed"][0].startswith("failed: tests.test_x::test_nccl: RuntimeError: No backend")


def test_emergence_curves_from_one_table_or_a_table_per_setting(tmp_path):
    header = "setting,step,alignment,mlm_loss,tokens,vocab,sentences,seconds,cpu_seconds\n"
    (tmp_path / "emergence" / "wide").mkdir(parents=True)
    (tmp_path / "emergence" / "curves.csv").write_text(
        header + "default,0,1.0,nan,300,4000,20000,1,1\ndefault,1500,3.3,5.2,300,4000,20000,41.5,40\n"
    )
    (tmp_path / "emergence" / "wide" / "curves.csv").write_text(header + "wide,0,1.5,nan,300,4000,20000,1,1\n")
    settings = emergence_curves(tmp_path, tmp_path, ChildPython("python3"))["settings"]
    assert settings["default"] == {
        "step": 1500,
        "alignment": 3.3,
        "mlm_loss": 5.2,
        "ms_per_step": 27.7,
        "curve": [(0, 1.0), (1500, 3.3)],
    }
    assert settings["wide"]["step"] == 0 and settings["wide"]["ms_per_step"] is None
    assert "no curves.csv" in read_figures("emergence", tmp_path / "none", tmp_path, ChildPython("python3"))["error"]


def test_bench_keeps_the_gpu_rows(tmp_path):
    (tmp_path / "bench_perf").mkdir()
    (tmp_path / "bench_perf" / "results.md").write_text("| area | what |\n|---|---|\n| GPU | tokens/s ddp | 54,123 |\n")
    assert bench_rows(tmp_path, tmp_path, ChildPython("python3")) == {"rows": ["| GPU | tokens/s ddp | 54,123 |"]}


def test_a_missing_file_is_an_error_in_the_figures_not_a_crash(tmp_path):
    figures = read_figures("transfer", tmp_path, tmp_path, ChildPython("python3"))
    assert figures["error"].startswith("FileNotFoundError")
    assert read_figures("", tmp_path, tmp_path, ChildPython("python3")) == {}
    assert read_figures("mlflow", tmp_path, tmp_path, ChildPython("python3")) == {
        "runs": [],
        "note": f"no MLflow store at {tmp_path / 'mlflow.db'}",
    }


def test_mlflow_is_read_with_the_steps_environment(tmp_path):
    """On the GPU machine MLflow is only on the steps' PYTHONPATH (the carried site): its first run read no MLflow
    figures ("No module named 'mlflow'") from five finished runs. Here the environment given shadows mlflow."""
    (tmp_path / "mlflow.db").write_bytes(b"")
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "mlflow.py").write_text("raise ImportError('the mlflow of the steps environment')\n")
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(REPO)])}
    figures = read_figures("mlflow", tmp_path, tmp_path, ChildPython(sys.executable, env))
    assert "the mlflow of the steps environment" in figures["error"]


def test_report_has_every_step_with_status_time_figures_and_the_failing_logs(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "RuntimeError: No backend type for cpu\n")
    results = [
        StepResult(
            name="train_align_mlm_tiny",
            about="distalign train ...",
            status="PASS",
            seconds=101.2,
            timeout_s=270,
            returncode=0,
            started_s=12.0,
            figures={"runs": [RUN]},
        ),
        StepResult(
            name="pytest_gpu",
            about="tests",
            status="FAIL",
            seconds=40.0,
            timeout_s=150,
            returncode=1,
            started_s=12.0,
            log=str(log),
            figures={"passed": 1, "failed": 1, "skipped": 0, "not_passed": ["failed: t::x: boom"]},
        ),
        StepResult(
            name="transfer", about="transfer", status="SKIPPED", note="needs transfer_inputs, which did not pass"
        ),
        StepResult(
            name="bench_perf_gpu",
            about="bench",
            status="TIMEOUT",
            seconds=150.0,
            timeout_s=150,
            returncode=-15,
            started_s=12.0,
            log=str(log),
            figures={"error": "FileNotFoundError: results.md"},
        ),
    ]
    md_path, json_path = write_report(
        tmp_path / "report", {"mode": "GPU", "budget_s": 345, "install": {"unpack_s": 4.0, "compile_s": 11.0}}, results
    )
    md = md_path.read_text()
    assert md.startswith("# distalign GPU check: 1/4 steps passed (GPU mode)")
    assert "| train_align_mlm_tiny | PASS | 101 | 270 | 12 |" in md
    assert "| pytest_gpu | FAIL (rc 1) | 40 |" in md and "| bench_perf_gpu | TIMEOUT (rc -15) |" in md
    assert "SKIPPED: needs transfer_inputs, which did not pass" in md
    assert "| align-mlm-tiny | FINISHED | 96 | engine=deepspeed, zero_stage=2 | 28.5 | - | 3.60% |" in md
    assert "start-up: imports_s 6.5" in md and "Train/loss: 9.100 -> 6.200 (5 values)" in md
    assert "GPU (max): gpu_0_utilization_percentage 71" in md
    assert "- install: unpack_s 4.0, compile_s 11.0" in md
    assert "figures not read: FileNotFoundError: results.md" in md
    assert md.count("RuntimeError: No backend type for cpu") == 2 and "line 59\n" not in md  # tails of 40 lines
    document = json.loads(json_path.read_text())
    assert document["passed"] == 1 and [s["status"] for s in document["steps"]] == [
        "PASS",
        "FAIL",
        "SKIPPED",
        "TIMEOUT",
    ]
