"""The quiet console: what of a command's output reaches the terminal, what only its log file, and the study's
one-line-per-trial-event view (no Ray: the router and the Tune callback are fed by hand)."""

from __future__ import annotations

import io
import logging
import sys
from types import SimpleNamespace

import pytest

from distalign.logs import TOKEN_AUTH_LINE, ConsoleRouter, console, duration, progress, quiet_console
from distalign.studies.progress import TrialProgress, eta
from distalign.studies.trials import GridTrial, SearchBase, TrialIdentity

RAY_OUTPUT = [  # as Ray writes them to the driver's standard streams
    "\x1b[36m(_trial pid=23884)\x1b[0m [distalign] data: 200 constraint pairs",
    "\x1b[36m(RayTrainWorker pid=25295)\x1b[0m [distalign] step 20/60 loss 3.1 (2.0 steps/s, ETA 0:20)",
    "\x1b[36m(RayTrainWorker pid=25295, ip=10.0.0.2)\x1b[0m [distalign] WARNING checkpoint x is incomplete",
    "\x1b[36m(RayTrainWorker pid=25295)\x1b[0m Checkpoint successfully created at: Checkpoint(...)",
    "2026-11-25 12:54:54,161\tWARNING authentication_token_setup.py:85 -- Token authentication is enabled for "
    "this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.",
    "2026-11-25 12:54:58,720\tINFO worker.py:2029 -- Started a local Ray instance. View the dashboard at "
    "\x1b[1m\x1b[32mhttp://127.0.0.1:8265 \x1b[39m\x1b[22m",
    "2026-11-25 12:55:54,161\tWARNING authentication_token_setup.py:85 -- Token authentication is enabled",
    "2026/11/25 12:54:59 INFO mlflow.store.db.utils: Creating initial MLflow database tables...",
    "╭──────────────────────────────────────────╮",  # Tune's tables, printed whatever its verbosity
    "(raylet) WARNING: 8 PYTHON worker processes have been started on node",
]


def routed(worker_lines: str) -> tuple[list[str], list[str]]:
    log, terminal = io.StringIO(), io.StringIO()
    router = ConsoleRouter(log, terminal, worker_lines)
    for line in RAY_OUTPUT:
        router.route(line)
    return terminal.getvalue().splitlines(), log.getvalue().splitlines()


def test_train_console_shows_distalign_lines_without_ray_prefixes_or_ansi_and_logs_everything():
    shown, logged = routed("all")
    assert shown == [
        "[distalign] data: 200 constraint pairs",
        "[distalign] step 20/60 loss 3.1 (2.0 steps/s, ETA 0:20)",
        "[distalign] WARNING checkpoint x is incomplete",
        TOKEN_AUTH_LINE,
    ]  # Ray's notice, once, in distalign's words
    assert len(logged) == len(RAY_OUTPUT) and not any("\x1b" in line for line in logged)
    assert (
        "2026-11-25 12:54:58,720\tINFO worker.py:2029 -- Started a local Ray instance. View the dashboard at "
        "http://127.0.0.1:8265 " in logged
    )


def test_study_console_shows_only_the_workers_warnings():
    shown, _ = routed("warnings")
    assert shown == ["[distalign] WARNING checkpoint x is incomplete", TOKEN_AUTH_LINE]


def test_quiet_console_keeps_the_terminal_to_distalign_and_restores_the_streams(tmp_path, capsys):
    library = logging.getLogger("some.library")
    handler = logging.StreamHandler(sys.stderr)  # bound to the console when the library set it up
    library.addHandler(handler)
    try:
        with quiet_console(tmp_path / "logs" / "tune.log") as path:
            print("\x1b[1mView detailed results here\x1b[0m")
            print("(RayTrainWorker pid=1) some worker chatter\r(RayTrainWorker pid=1) [distalign] step 2/4")
            print("a Python warning", file=sys.stderr)
            library.warning("library record")
            logging.getLogger("distalign").info("trial t started")
            print("summary table", file=console())
            assert not sys.stdout.isatty()
        print("after")
    finally:
        library.removeHandler(handler)
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"[distalign] Ray's and the libraries' output: {path}",
        "[distalign] step 2/4",
        "[distalign] trial t started",
        "summary table",
        "after",
    ]
    assert err == "" and "\x1b" not in out
    assert path.read_text().splitlines() == [
        "View detailed results here",
        "(RayTrainWorker pid=1) some worker chatter",
        "(RayTrainWorker pid=1) [distalign] step 2/4",
        "a Python warning",
        "library record",
    ]
    assert handler.stream is sys.stderr


def test_progress_bar_is_off_when_stderr_is_not_a_terminal(monkeypatch):
    items = [1, 2, 3]
    monkeypatch.setattr(sys, "__stderr__", io.StringIO())
    assert progress(items, description="mining") is items


def test_eta_and_duration():
    assert eta((10.0, 0), (40.0, 30), 60) == pytest.approx(30.0)  # 30 steps in 30 s, 30 to go
    assert eta((10.0, 0), (10.0, 0), 60) is None  # no pace yet
    assert [duration(s) for s in (0, 59.6, 75, 3725)] == ["0:00", "1:00", "1:15", "1:02:05"]


def test_trial_progress_prints_a_line_per_trial_event(caplog, monkeypatch):
    clock = iter([0.0, 40.0, 70.0])
    monkeypatch.setattr("distalign.studies.progress.time.monotonic", lambda: next(clock))
    grid = GridTrial(
        TrialIdentity("quickstart-tune-001", 0),
        {"train.lr": 0.001, "data.max_constraints": 400},
        {"train": {"max_steps": 60}},
    )
    trial = SimpleNamespace(trial_id="a1_00001", config={"trial": grid})
    progress_view = TrialProgress("eval/bli/avg/mrr")
    with caplog.at_level(logging.INFO, logger="distalign"):
        progress_view.on_trial_start(0, [], trial)
        progress_view.on_trial_result(0, [], trial, {"step": 20, "eval/bli/avg/mrr": 0.1})
        progress_view.on_trial_result(0, [], trial, {"step": 60, "eval/bli/avg/mrr": 0.25})
        progress_view.on_trial_complete(0, [], trial)
    assert caplog.messages == [
        "trial quickstart-tune-001 started: train.lr=0.001 data.max_constraints=400 (60 steps)",
        "trial quickstart-tune-001 step 20/60 eval/bli/avg/mrr=0.1000 ETA 1:20",  # 20 steps in 40 s, 40 to go
        "trial quickstart-tune-001 step 60/60 eval/bli/avg/mrr=0.2500",
        "trial quickstart-tune-001 finished",
    ]
    search = SimpleNamespace(
        trial_id="b2",
        config={
            "trial": SearchBase("s", {"train": {"seed": 3, "max_steps": 6}}),
            "point": {"train.lr": 0.01},
            "__trial_index__": 1,
        },
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="distalign"):
        progress_view.on_trial_error(0, [], search)
    assert caplog.messages == ["trial s-b2 failed (its traceback is in the log)"]


@pytest.mark.parametrize("command", ["eval", "transfer"])
def test_eval_and_transfer_keep_rays_lines_off_the_terminal_as_train_does(command, tmp_path, monkeypatch, capsys):
    import distalign.cli as cli
    import distalign.transfer.cli
    import distalign.transfer.zero_shot
    from distalign.logs import say

    def run(args):
        print("\x1b[36m(raylet)\x1b[0m worker started")
        print("2026-11-27 06:20:14,720\tINFO worker.py:2029 -- Started a local Ray instance.")
        say("[distalign eval] results in out/")
        return 0

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    monkeypatch.setattr(distalign.transfer.cli, "run_eval_and_transfer", run)
    monkeypatch.setattr(distalign.transfer.zero_shot, "run_transfer_cli", run)
    assert cli.main([command, "model"]) == 0
    out = capsys.readouterr().out.splitlines()
    [log] = (tmp_path / "logs").iterdir()
    assert out == [f"[distalign] Ray's and the libraries' output: {log}", "[distalign eval] results in out/"]
    assert log.name.startswith(f"{command}-") and log.read_text().splitlines() == [
        "(raylet) worker started",
        "2026-11-27 06:20:14,720\tINFO worker.py:2029 -- Started a local Ray instance.",
    ]
