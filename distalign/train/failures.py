"""A deterministic error fails the run fast: retried once, not ``train.max_failures`` times.

Ray Train restarts a failed worker group up to ``train.max_failures`` times (each start costs tens of seconds on
a GPU node) whatever the failure was. That suits a lost worker, a lost node or a collective that timed out, which
a restart cures; an error of the training code itself (a tensor on the wrong device, a shape mismatch) comes back
at the same step every time. So:

- a worker records, on the exception its training raised, a ``StepFailure``: the steps it had done, the
  exception's type and a fingerprint of the traceback's distalign frames (``recording_failures``);
- the controller's ``FailFast`` callback compares a failed worker group's records with those of the group that
  failed before it: the same failure again after a restart ends the run instead of restarting it once more;
- the driver raises the worker's own exception, its worker-side traceback chained as the cause
  (``raising_worker_exceptions``).

A first failure is always retried (a transient error may not repeat), and a failure at another step counts as
progress. Lost workers, preempted nodes and errors of the collectives or of I/O carry no record: Ray Train retries
them as before.
"""

from __future__ import annotations

import contextlib
import logging
import re
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import ray.exceptions
import ray.train
import torch.distributed as dist

# Ray Train 2.60's controller hooks (DeveloperAPI, not exported by ray.train): a callback seeing each poll of the
# workers and each failure decision runs in the controller, where retries are decided
from ray.train.v2._internal.execution.callback import ControllerCallback, WorkerGroupCallback
from ray.train.v2._internal.execution.failure_handling import FailureDecision
from ray.train.v2._internal.execution.worker_group import WorkerGroupPollStatus

log = logging.getLogger("distalign")
PACKAGE = Path(__file__).resolve().parents[1]
RECORD_ATTRIBUTE = "distalign_step_failure"  # where a worker leaves its StepFailure on the exception
# errors of a collective whose peer went away or timed out: gloo raises a plain RuntimeError naming itself
# ("[.../gloo/transport/tcp/pair.cc:553] Connection closed by peer"), NCCL names itself too
COLLECTIVE_MESSAGE = re.compile(r"nccl|gloo|connection (?:closed|reset) by peer|collective operation tim", re.I)
# the cluster's (a lost actor, object or node; a Ray Data task), the process group's and I/O's (storage, network)
INFRASTRUCTURE_ERRORS = (ray.exceptions.RayError, dist.DistError, OSError)


@dataclass(frozen=True)
class StepFailure:
    """How a worker's training failed: after ``steps_done`` optimizer steps, with an exception of type
    ``error_type`` raised through the distalign ``frames`` (file in the package, function, line; outermost
    first). ``traceback``: the worker-side traceback, for the console."""

    steps_done: int
    error_type: str
    frames: tuple[str, ...]
    traceback: str

    @property
    def identity(self) -> tuple:
        # not the message: it may carry addresses, sizes or times that differ between two runs of the same error
        return self.steps_done, self.error_type, self.frames


def is_infrastructure_error(error: BaseException | None) -> bool:
    """Whether ``error``, or an exception it was raised from or while handling, is the cluster's, a collective's
    or I/O's rather than the training code's: a restart may cure those."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, INFRASTRUCTURE_ERRORS) or COLLECTIVE_MESSAGE.search(str(error)):
            return True
        error = error.__cause__ or error.__context__
    return False


def step_failure(error: BaseException, steps_done: int) -> StepFailure | None:
    """The record of ``error`` raised by a worker's training after ``steps_done`` steps; None for an error a
    restart may cure (``is_infrastructure_error``)."""
    if is_infrastructure_error(error):
        return None
    frames = tuple(
        f"{Path(frame.filename).resolve().relative_to(PACKAGE)}:{frame.name}:{frame.lineno}"
        for frame in traceback.extract_tb(error.__traceback__)
        if Path(frame.filename).resolve().is_relative_to(PACKAGE)
    )
    return StepFailure(steps_done, type(error).__qualname__, frames, "".join(traceback.format_exception(error)))


def recorded_failure(error: BaseException) -> StepFailure | None:
    """The ``StepFailure`` a worker left on ``error``; None on an error no worker's training raised."""
    return getattr(error, RECORD_ATTRIBUTE, None)


@contextlib.contextmanager
def recording_failures(steps_done: Callable[[], int]) -> Iterator[None]:
    """On a worker: leave a ``StepFailure`` on the exception the block raises (it travels with it to Ray Train's
    controller and the driver), ``steps_done()`` the steps done by then."""
    try:
        yield
    except Exception as error:
        record = step_failure(error, steps_done())
        if record is not None:
            setattr(error, RECORD_ATTRIBUTE, record)
        raise


class RepeatedFailure(Exception):
    """A worker group failed as the one before it did: ``error`` is a worker's exception."""

    def __init__(self, error: BaseException):
        super().__init__(error)
        self.error = error

    def __str__(self) -> str:
        record = recorded_failure(self.error)
        assert record is not None, "raised only for an error that carries its StepFailure"
        return (
            f"{type(self.error).__name__}: {self.error} (after step {record.steps_done}) again after a restart: "
            "a deterministic error, not retried"
        )


class FailFast(ControllerCallback, WorkerGroupCallback):
    """Ray Train controller callback: when a failed worker group is to be restarted although its failure repeats
    the last recorded one (same steps done, error type and distalign frames), raise ``RepeatedFailure``; the
    controller then ends the run with it (a callback's error is a ``ControllerError``, never retried)."""

    def __init__(self):
        self.previous: set[tuple] = set()  # the identities of the last failed group's records
        self.failed: dict[int, Exception] = {}  # rank -> error, of the latest poll of the workers

    def after_worker_group_poll_status(self, worker_group_status: WorkerGroupPollStatus) -> None:
        preempted = worker_group_status.get_preemption_info() is not None or worker_group_status.has_preempted_worker()
        self.failed = {} if preempted else worker_group_status.errors

    def before_controller_execute_failure_decision(self, failure_decision: FailureDecision) -> None:
        records = [
            (rank, record)
            for rank, error in sorted(self.failed.items())
            if (record := recorded_failure(error)) is not None
        ]
        failed, self.failed = self.failed, {}
        if not records:  # a lost worker, a collective's error, a group that did not start: no training failure
            return
        repeated = [rank for rank, record in records if record.identity in self.previous]
        self.previous = {record.identity for _, record in records}
        if failure_decision == FailureDecision.RETRY and repeated:
            raise RepeatedFailure(failed[repeated[0]])


def worker_exception(error: ray.train.TrainingFailedError) -> BaseException | None:
    """The exception of a worker's training that ended a run (the lowest rank's, carrying its ``StepFailure``);
    None where the run ended on something else (lost workers, collectives, the controller)."""
    if isinstance(error, ray.train.ControllerError) and isinstance(error.controller_failure, RepeatedFailure):
        return error.controller_failure.error
    if isinstance(error, ray.train.WorkerGroupError):
        return next((e for _, e in sorted(error.worker_failures.items()) if recorded_failure(e) is not None), None)
    return None


class WorkerTraceback(Exception):
    """A worker's traceback as text (an exception loses its own on the way to the driver), shown as the cause of
    the worker's exception raised again on the driver."""

    def __init__(self, text: str):
        super().__init__(text)

    def __str__(self) -> str:
        return "the worker's traceback:\n" + self.args[0].rstrip()


@contextlib.contextmanager
def raising_worker_exceptions() -> Iterator[None]:
    """On the driver, around ``TorchTrainer.fit``: a run ended by an error of a worker's training raises that
    error, with the worker's traceback as its cause, instead of Ray Train's ``TrainingFailedError``."""
    try:
        yield
    except ray.train.TrainingFailedError as error:
        raised = worker_exception(error)
        if raised is None:
            raise
        repeated = isinstance(error, ray.train.ControllerError)
        record = recorded_failure(raised)
        assert record is not None, "worker_exception returns only errors that carry their StepFailure"
        log.error(
            "a worker's training failed after step %d: %s: %s%s",
            record.steps_done,
            type(raised).__name__,
            raised,
            " (again after a restart: not retried)" if repeated else "",
        )
        raise raised from WorkerTraceback(record.traceback)
