"""Where a run's start-up time goes, from the command to its first optimizer step.

The driver marks its phases in the plan's clock, which travels to the workers; rank 0 marks its own
and logs each phase as ``startup/<phase>_s`` (and ``startup/total_s``) at the first step. A phase is
named after the mark that ends it:

- ``imports`` (``distalign train`` only): from the process's start, Python and its imports;
- ``prepare``: read and check the inputs, generate or reuse the world and the tiny model, stage them (a running
  cluster in RAY_ADDRESS is joined meanwhile, on a thread: ``distalign.ray_session.join_in_background``);
- ``ray``: start the local Ray cluster, or what is left of joining the running one;
- ``trainer``: open the MLflow run, build the Ray datasets, reserve the corpus CPUs;
- ``workers``: Ray Train starts the worker group and its process group;
- ``model``: load the model, build objectives and engine (restore a checkpoint);
- ``vanilla_eval``: the step-0 evaluation;
- ``first_batch``: the first batches of every stream (their Ray tasks' processes start, then read and tokenise);
- ``first_step``: the first optimizer step.

Work that runs beside another phase is not a phase of its own: the phases add up to the critical path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# the phases that end before the MLflow run opens (at the end of ``ray``): a run's own duration leaves them out
BEFORE_RUN_PHASES = ("imports", "prepare", "ray")


@dataclass
class StartupClock:
    marks: dict[str, float] = field(default_factory=lambda: {"start": time.time()})  # phase end -> epoch seconds

    def mark(self, phase: str) -> None:
        """The end of ``phase`` (the first time only: a later call leaves the mark alone)."""
        self.marks.setdefault(phase, time.time())

    def phases(self) -> dict[str, float]:
        """``startup/<phase>_s`` for each phase marked, in order, and ``startup/total_s``."""
        names, times = list(self.marks), list(self.marks.values())
        seconds = {f"startup/{name}_s": max(0.0, end - begin) for name, begin, end in zip(names[1:], times, times[1:])}
        return seconds | {"startup/total_s": times[-1] - times[0]}

    def summary(self) -> str:
        phases = self.phases()
        total = phases.pop("startup/total_s")
        return f"{total:.1f} s to the first step: " + ", ".join(
            f"{name.removeprefix('startup/').removesuffix('_s')} {value:.1f}" for name, value in phases.items()
        )


def since_process_start() -> StartupClock:
    """A clock started when this process was, with the ``imports`` phase ending now."""
    import psutil

    clock = StartupClock({"start": psutil.Process().create_time()})
    clock.mark("imports")
    return clock
