"""The GPU check's runner: steps side by side, each under its own timeout within one budget; a step that needs a
failed one is skipped; what a step leaves running is ended."""

import sys
import time

from distalign.tools.gpu_check.run import Places, Runner, tagged_processes
from distalign.tools.gpu_check.steps import Step


def py(code: str) -> tuple[str, ...]:
    return ("{python}", "-c", code)


def run(tmp_path, steps, budget=60, jobs=4):
    places = Places(tmp_path, tmp_path / "work", tmp_path / "out", tmp_path / "carry", sys.executable)
    changes = []
    results = Runner(
        steps,
        places,
        {"PATH": "/usr/bin:/bin"},
        budget,
        jobs,
        on_change=lambda r: changes.append([x.status for x in r]),
    ).run()
    return {r.name: r for r in results}, changes


def test_pass_fail_timeout_and_a_skipped_dependent(tmp_path):
    started = time.monotonic()
    results, changes = run(
        tmp_path,
        [
            Step("ok", "", py("print('hello')"), 30),
            Step("fails", "", py("import sys; sys.exit(3)"), 30),
            Step("slow", "", py("import time; time.sleep(60)"), 2),
            Step("after_fails", "", py("print(1)"), 30, needs=("fails",)),
            Step("after_ok", "", py("import os; print(os.environ['DISTALIGN_HOME'])"), 30, needs=("ok",)),
        ],
    )
    assert time.monotonic() - started < 30  # the sleeper was ended at its timeout, not waited for
    assert {n: r.status for n, r in results.items()} == {
        "ok": "PASS",
        "fails": "FAIL",
        "slow": "TIMEOUT",
        "after_fails": "SKIPPED",
        "after_ok": "PASS",
    }
    assert results["fails"].returncode == 3 and "fails" in results["after_fails"].note
    assert results["slow"].timeout_s == 2 and 2 <= results["slow"].seconds < 20
    log = (tmp_path / "work" / "logs" / "after_ok.log").read_text()
    assert str(tmp_path / "work" / "homes" / "after_ok") in log  # each step its own DISTALIGN_HOME
    assert changes[-1] == ["PASS", "FAIL", "TIMEOUT", "SKIPPED", "PASS"]


def test_a_step_s_timeout_is_cut_to_the_budget_and_no_step_starts_without_time(tmp_path):
    results, _ = run(
        tmp_path,
        [Step("first", "", py("import time; time.sleep(30)"), 300), Step("second", "", py("print(1)"), 300)],
        budget=12,
        jobs=1,
    )
    assert results["first"].status == "TIMEOUT" and results["first"].timeout_s <= 12
    assert results["second"].status == "SKIPPED" and "no time left" in results["second"].note


def test_processes_a_step_leaves_behind_are_ended(tmp_path):
    """A daemon in a session of its own (as Ray starts its cluster) still carries the step's tag: ended."""
    pid_file = tmp_path / "pid"
    code = (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
        f"start_new_session=True); open({str(pid_file)!r}, 'w').write(str(p.pid))"
    )
    results, _ = run(tmp_path, [Step("leaves_a_daemon", "", py(code), 30)])
    assert results["leaves_a_daemon"].status == "PASS"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    assert not _alive(pid)
    assert tagged_processes("nothing-carries-this") == []


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().split()[2]
    except OSError:
        return False
    return state != "Z"
