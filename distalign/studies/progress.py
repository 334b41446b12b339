"""The console view of a study: one line per trial event (started with what it stands for; each evaluation with
the step, the study metric and an ETA; finished; failed), in place of Tune's tables (``RunConfig(verbose=0)``)."""

from __future__ import annotations

import logging
import time
from typing import Any

from ray.tune import Callback

from distalign.logs import duration
from distalign.studies.trials import describe_trial

log = logging.getLogger("distalign")


def eta(first: tuple[float, int], last: tuple[float, int], max_steps: int) -> float | None:
    """Seconds left at the pace between two (time, step) reports; None before the pace is known."""
    (t0, s0), (t1, s1) = first, last
    if s1 <= s0 or not max_steps:
        return None
    return max(max_steps - s1, 0) * (t1 - t0) / (s1 - s0)


class TrialProgress(Callback):
    """Logs each trial's progress on the driver (Tune calls it in the process running ``Tuner.fit``)."""

    def __init__(self, metric: str):
        self.metric = metric
        self._last: dict[str, tuple[float, int]] = {}  # a trial's latest (time, step): its start, then each report

    def on_trial_start(self, iteration: int, trials: list, trial, **info) -> None:
        name, stands_for, max_steps = describe_trial(trial.config, trial.trial_id)
        self._last[trial.trial_id] = (time.monotonic(), 0)
        log.info("trial %s started: %s (%d steps)", name, _params(stands_for), max_steps)

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info) -> None:
        name, _, max_steps = describe_trial(trial.config, trial.trial_id)
        step, value = result.get("step"), result.get(self.metric)
        if step is None:
            return
        # the pace since the previous report (since the start for the first: start-up included, so an overestimate)
        now = time.monotonic()
        left = eta(self._last.get(trial.trial_id, (now, step)), (now, step), max_steps) if step < max_steps else None
        self._last[trial.trial_id] = (now, step)
        log.info(
            "trial %s step %d/%d %s=%s%s",
            name,
            step,
            max_steps,
            self.metric,
            "-" if value is None else f"{value:.4f}",
            "" if left is None else f" ETA {duration(left)}",
        )

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        name, _, _ = describe_trial(trial.config, trial.trial_id)
        log.info("trial %s finished", name)

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        name, _, _ = describe_trial(trial.config, trial.trial_id)
        log.warning("trial %s failed (its traceback is in the log)", name)


def _params(stands_for: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in stands_for.items())
