"""Running the check's steps side by side, each under its own timeout, all within one time budget.

A step starts once the steps it needs have passed and a slot is free (``jobs`` at a time); its timeout is its own
cap or what is left of the budget, whichever is less, and a step with less than ``MIN_STEP_S`` left is skipped.
A step runs in a process session of its own; at its end (or timeout) every process that still carries its tag in
its environment (the command's Ray cluster, its DeepSpeed workers) is ended, so no step leaves the GPU held.
A failing or killed step never stops the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from distalign.tools.gpu_check.steps import Step

MIN_STEP_S = 10
KILL_GRACE_S = 8
STOP_MARGIN_S = 30  # {stop_s}: when a step that stops itself by the clock should, to finish before its timeout
TAG = "DISTALIGN_GPU_CHECK_STEP"  # in each step's environment: its processes are found by it
PASSED, FAILED, TIMEOUT, SKIPPED = "PASS", "FAIL", "TIMEOUT", "SKIPPED"


@dataclass(kw_only=True)
class StepResult:
    name: str
    about: str
    status: str
    seconds: float = 0.0
    timeout_s: int = 0
    returncode: int | None = None
    started_s: float = 0.0  # since the check started
    note: str = ""
    log: str = ""
    figures: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Places:
    repo: Path
    work: Path  # homes/<step>, logs/<step>.log, cache/, the transfer inputs
    out: Path  # outputs/<step>/ (tables, plots); the report goes to the check's output folder
    carry: Path
    python: str

    def home(self, step: Step) -> Path:
        return self.work / "homes" / step.name

    def log(self, step: Step) -> Path:
        return self.work / "logs" / f"{step.name}.log"

    def step_out(self, step: Step) -> Path:
        return self.work / "outputs" / step.name


def step_argv(step: Step, places: Places, limit_s: int) -> list[str]:
    values = {
        "python": places.python,
        "home": str(places.home(step)),
        "out": str(places.step_out(step)),
        "work": str(places.work),
        "carry": str(places.carry),
        "limit_s": str(limit_s),
        "stop_s": str(max(limit_s - STOP_MARGIN_S, limit_s // 2)),
    }
    return [arg.format(**values) for arg in step.argv]


class Runner:
    def __init__(
        self,
        steps: list[Step],
        places: Places,
        env: dict[str, str],
        budget_s: float,
        jobs: int,
        on_change: Callable[[list[StepResult]], None] = lambda results: None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.steps, self.places, self.env = steps, places, env
        self.jobs, self.on_change, self.clock = max(1, jobs), on_change, clock
        self.started = clock()
        self.deadline = self.started + budget_s
        self.results = {s.name: StepResult(name=s.name, about=s.about, status="PENDING") for s in steps}
        self.running: dict[str, tuple[subprocess.Popen, float, int]] = {}  # name -> (process, start, timeout)

    def run(self) -> list[StepResult]:
        pending = list(self.steps)
        while pending or self.running:
            for step in list(pending):
                blocked = self._blocked(step)
                if blocked is not None:
                    self._finish(step.name, SKIPPED, note=blocked)
                    pending.remove(step)
                elif len(self.running) < self.jobs and self._ready(step):
                    pending.remove(step)
                    self._start(step)
            self._reap()
            time.sleep(0.5)
        return list(self.results.values())

    def _ready(self, step: Step) -> bool:
        return all(self.results[n].status == PASSED for n in step.needs)

    def _blocked(self, step: Step) -> str | None:
        """Why the step cannot run any more (a step it needs did not pass, no time left), or None."""
        failed = [n for n in step.needs if self.results[n].status not in (PASSED, "PENDING", "RUNNING")]
        if failed:
            return f"needs {', '.join(failed)}, which did not pass"
        left = self.deadline - self.clock()
        if left < MIN_STEP_S:
            return f"no time left ({left:.0f} s of the budget)"
        return None

    def _start(self, step: Step) -> None:
        now = self.clock()
        timeout = int(min(step.timeout_s, self.deadline - now))
        log, home, out = self.places.log(step), self.places.home(step), self.places.step_out(step)
        for folder in (log.parent, home, out):
            folder.mkdir(parents=True, exist_ok=True)
        argv = step_argv(step, self.places, timeout)
        env = self.env | step.env | {"DISTALIGN_HOME": str(home), TAG: f"{os.getpid()}-{step.name}"}
        with log.open("w") as f:
            f.write(f"### {step.name}: {' '.join(argv)}\n### timeout {timeout} s\n")
            f.flush()
            process = subprocess.Popen(
                argv,
                cwd=self.places.repo,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.running[step.name] = (process, now, timeout)
        result = self.results[step.name]
        result.status, result.timeout_s, result.started_s, result.log = "RUNNING", timeout, now - self.started, str(log)
        self.on_change(list(self.results.values()))

    def _reap(self) -> None:
        for name, (process, started, timeout) in list(self.running.items()):
            timed_out = process.poll() is None and self.clock() - started > timeout
            if timed_out:
                end_session(process)
            if process.poll() is None:
                continue
            end_tagged(f"{os.getpid()}-{name}")
            del self.running[name]
            code = process.returncode
            status = TIMEOUT if timed_out else PASSED if code == 0 else FAILED
            self._finish(name, status, code, self.clock() - started)

    def _finish(
        self, name: str, status: str, returncode: int | None = None, seconds: float = 0.0, note: str = ""
    ) -> None:
        result = self.results[name]
        result.status, result.returncode, result.seconds, result.note = status, returncode, seconds, note
        self.on_change(list(self.results.values()))


def end_session(process: subprocess.Popen) -> None:
    """SIGTERM to the step's process session, SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tagged_processes(tag: str) -> list[int]:
    """Processes whose environment has ``TAG=tag`` (the step's, and whatever it started: Ray keeps the env)."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def end_tagged(tag: str) -> list[int]:
    """End the processes a finished step left running (a Ray cluster outlives a killed driver)."""
    pids = tagged_processes(tag)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGTERM and pids:
            time.sleep(3)
            pids = tagged_processes(tag)
    return pids
