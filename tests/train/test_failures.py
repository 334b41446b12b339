"""Which failures of a Ray Train worker group end the run at once (``distalign.train.failures``): the same error
of the training code at the same step after a restart; not a first failure, a lost worker, a collective's error
or a failure at another step. Without Ray: the controller callback is fed the polls Ray Train's controller makes."""

from __future__ import annotations

import io
import pickle
import traceback

import pytest
import ray.exceptions
import ray.train
import torch
import torch.distributed as dist
from ray.train.v2._internal.exceptions import UserExceptionWithTraceback, WorkerHealthCheckFailedError
from ray.train.v2._internal.execution.failure_handling import FailureDecision
from ray.train.v2._internal.execution.worker_group import WorkerGroupPollStatus, WorkerStatus

from distalign.logs import ConsoleRouter
from distalign.train.failures import (
    FailFast,
    RepeatedFailure,
    WorkerTraceback,
    raising_worker_exceptions,
    recorded_failure,
    recording_failures,
    step_failure,
)

RETRY, RAISE = FailureDecision.RETRY, FailureDecision.RAISE


def bad_console_option():
    ConsoleRouter(io.StringIO(), io.StringIO(), worker_lines="some")  # a ValueError raised in distalign's code


def nccl_timeout():
    raise RuntimeError(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, "
        "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
    )


def gloo_peer_gone():
    raise RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer")


def worker_error(steps_done: int, fail=bad_console_option) -> Exception:
    """The exception a worker's training raises after ``steps_done`` steps, as Ray Train's controller receives
    it (pickled, without its traceback)."""
    try:
        with recording_failures(lambda: steps_done):
            fail()
    except Exception as error:
        return pickle.loads(pickle.dumps(UserExceptionWithTraceback(error, traceback.format_exc())))
    raise AssertionError("no failure")


def group_failed(callback: FailFast, decision: FailureDecision, *errors: Exception, preempted=False) -> None:
    """A poll of the workers finding ``errors`` (rank i: errors[i]), then the controller's failure decision."""
    statuses = {rank: WorkerStatus(running=False, error=error) for rank, error in enumerate(errors)}
    if preempted:
        statuses[len(errors)] = WorkerStatus(running=False, error=ray.exceptions.RayActorError(preempted=True))
    callback.after_worker_group_poll_status(WorkerGroupPollStatus(statuses))
    callback.before_controller_execute_failure_decision(decision)


def test_an_error_of_the_training_code_is_recorded_with_its_step_and_distalign_frames():
    error = worker_error(5)._base_exc
    record = recorded_failure(error)
    assert isinstance(error, ValueError) and record.steps_done == 5 and record.error_type == "ValueError"
    assert record.frames[-1].startswith("logs.py:__init__:")  # where it was raised, relative to the package
    assert all(".py:" in frame and "test_failures" not in frame for frame in record.frames)  # distalign's only
    assert "bad_console_option" in record.traceback and "worker_lines" in record.traceback  # the whole traceback
    assert recorded_failure(worker_error(5)._base_exc).identity == record.identity  # the same error, the same record


def test_the_first_gpu_runs_error_is_recorded_though_it_comes_from_the_process_group():
    # a CPU tensor all-reduced on a group with a CUDA backend only, as NCCL's was there: no collective's failure
    dist.init_process_group("cuda:gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        error = worker_error(4, fail=lambda: dist.all_reduce(torch.ones(2)))._base_exc
    finally:
        dist.destroy_process_group()
    assert str(error) == "No backend type associated with device type cpu"
    assert recorded_failure(error).error_type == "RuntimeError"


@pytest.mark.parametrize("fail", [nccl_timeout, gloo_peer_gone])
def test_a_collective_error_carries_no_record(fail):
    assert recorded_failure(worker_error(5, fail)._base_exc) is None


def test_errors_of_the_cluster_the_process_group_and_io_carry_no_record_even_when_wrapped():
    for error in (
        dist.DistBackendError("NCCL communicator was aborted"),
        ray.exceptions.ActorDiedError(),
        ConnectionResetError("reset"),
        FileNotFoundError("s3://bucket/run/checkpoint_000003"),
    ):
        assert step_failure(error, 5) is None, error
    try:
        try:
            raise dist.DistNetworkError("store down")
        except dist.DistError as lost:
            raise ValueError("no batch") from lost
    except ValueError as wrapped:
        assert step_failure(wrapped, 5) is None


def test_the_same_error_at_the_same_step_after_a_restart_ends_the_run():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))  # the first failure is restarted: it may be transient
    again = worker_error(5)
    with pytest.raises(RepeatedFailure) as raised:
        group_failed(callback, RETRY, again)
    assert raised.value.error is again._base_exc
    assert "ValueError" in str(raised.value) and "after step 5" in str(raised.value)


def test_a_failure_at_another_step_is_progress_and_restarted():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))
    group_failed(callback, RETRY, worker_error(9))  # got further: retried
    with pytest.raises(RepeatedFailure):
        group_failed(callback, RETRY, worker_error(9))


def test_a_different_error_at_the_same_step_is_restarted():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))
    group_failed(callback, RETRY, worker_error(5, fail=lambda: {}["missing"]))


def test_lost_workers_and_collective_timeouts_are_restarted_every_time():
    lost = WorkerHealthCheckFailedError("worker died", ray.exceptions.ActorDiedError())
    for errors in (
        [ray.exceptions.ActorDiedError()],
        [lost],
        [worker_error(5, nccl_timeout)],
        [worker_error(5, gloo_peer_gone), lost],
    ):
        callback = FailFast()
        for _ in range(3):
            group_failed(callback, RETRY, *errors)


def test_a_repeat_on_one_rank_ends_the_run_whatever_the_other_ranks_died_of():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5), worker_error(5, gloo_peer_gone))
    with pytest.raises(RepeatedFailure) as raised:
        group_failed(callback, RETRY, worker_error(5, gloo_peer_gone), worker_error(5))
    assert isinstance(raised.value.error, ValueError)


def test_a_lost_worker_in_between_keeps_the_last_training_failure():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))
    group_failed(callback, RETRY, ray.exceptions.ActorDiedError())
    with pytest.raises(RepeatedFailure):
        group_failed(callback, RETRY, worker_error(5))


def test_nothing_is_raised_where_ray_train_raises_anyway_or_a_node_was_preempted():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))
    group_failed(callback, RAISE, worker_error(5))  # max_failures reached: Ray Train's own error
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))
    group_failed(callback, RETRY, worker_error(5), preempted=True)  # the preemption budget's business


def test_a_failure_decision_without_a_failed_poll_judges_nothing():
    callback = FailFast()
    group_failed(callback, RETRY, worker_error(5))
    callback.after_worker_group_poll_status(WorkerGroupPollStatus({0: WorkerStatus(running=True)}))
    callback.before_controller_execute_failure_decision(RETRY)  # e.g. a worker group that failed to start
    with pytest.raises(RepeatedFailure):
        group_failed(callback, RETRY, worker_error(5))


def raised_on_the_driver(error: ray.train.TrainingFailedError) -> BaseException:
    with pytest.raises(BaseException) as raised:
        with raising_worker_exceptions():
            raise pickle.loads(pickle.dumps(error))  # as the controller hands it to the driver
    return raised.value


def test_the_driver_raises_the_workers_own_exception_with_its_traceback(caplog):
    error = worker_error(5)._base_exc
    raised = raised_on_the_driver(ray.train.ControllerError(RepeatedFailure(error)))
    assert type(raised) is ValueError and str(raised) == str(error)
    assert isinstance(raised.__cause__, WorkerTraceback) and "bad_console_option" in str(raised.__cause__)
    shown = "".join(traceback.format_exception(raised))
    assert "the worker's traceback:" in shown and "logs.py" in shown and "ValueError: worker_lines" in shown
    said = caplog.text
    assert "failed after step 5: ValueError" in said and "again after a restart: not retried" in said

    group_error = ray.train.WorkerGroupError("rank 1: ValueError", {0: ray.exceptions.ActorDiedError(), 1: error})
    assert type(raised_on_the_driver(group_error)) is ValueError  # max_failures spent on a training error


def test_the_driver_keeps_ray_trains_error_for_lost_workers():
    lost = ray.train.WorkerGroupError("rank 0 died", {0: ray.exceptions.ActorDiedError()})
    assert isinstance(raised_on_the_driver(lost), ray.train.WorkerGroupError)
