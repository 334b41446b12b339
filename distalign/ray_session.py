"""Connecting the driver to Ray (the cluster in RAY_ADDRESS, else a fresh local one), and holding resources
for a run's own use. Ray is imported where it is used: the commands that need no cluster do not pay for it."""

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any

from distalign.benchmark_data.home import DATA_ENV, OFFLINE_ENVS

# Idle worker processes a node keeps for the next task. Ray keeps as many as the node has free CPUs and kills the
# rest a second after they go idle: while trials hold every CPU, the task processes that imported torch and
# transformers and loaded the tokenizer (Ray Data's tokenising tasks) are killed, and every trial starts its own.
# Kept up to this many, they serve the next trial's tasks warm. A cluster started with ``ray start`` takes it
# from RAY_num_workers_soft_limit (``cluster/``).
WARM_WORKER_SETTINGS = {"num_workers_soft_limit": 8}
# The driver's settings every worker must share: offline mode (an air-gapped node's workers must not ask the Hub
# either), where the benchmark data and the Hugging Face cache are. A worker on another node gets the environment of
# that node's `ray start`, not the driver's: these travel in the job's runtime env.
NODE_ENVIRONMENT = (*OFFLINE_ENVS, "TRANSFORMERS_OFFLINE", DATA_ENV, "HF_HOME", "HF_HUB_CACHE")
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # how `ray job submit` hands its runtime env to the driver (Ray's name)


def ray_is_up() -> bool:
    """Whether this process is connected to Ray (never, if nothing imported it)."""
    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


def forwarded_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The ``NODE_ENVIRONMENT`` variables set here, for the job's runtime env; those a submitted job's runtime env
    sets already are left to it (Ray refuses a driver's runtime env that names one of them again)."""
    job_config = json.loads(environ.get(JOB_CONFIG_ENV) or "{}")
    submitted = (job_config.get("runtime_env") or {}).get("env_vars") or {}
    return {name: environ[name] for name in NODE_ENVIRONMENT if environ.get(name) and name not in submitted}


def _connect() -> None:
    import ray

    if not ray.is_initialized():
        # RAY_ADDRESS (set by `ray job submit`, or `auto` for a `ray start` cluster) points at a cluster;
        # otherwise always a fresh local one, never a stale cluster address left on disk.
        address = os.environ.get("RAY_ADDRESS") or "local"
        forwarded = forwarded_environment()
        options: dict[str, Any] = {"runtime_env": {"env_vars": forwarded}} if forwarded else {}
        if address == "local":
            options["_system_config"] = WARM_WORKER_SETTINGS
        else:
            answering(address)  # a dead address fails in seconds, named (Ray retries it for minutes)
        ray.init(address=address, log_to_driver=True, **options)


# A join begun by ``join_in_background``, until ``ensure_ray`` (or ``shutdown_ray``) collects it.
_connecting: Future | None = None


def join_in_background() -> None:
    """Begin joining the cluster in RAY_ADDRESS on a thread, so that it runs beside the caller's own work (imports,
    input checks): joining a running cluster takes none of its resources. Nothing without RAY_ADDRESS (a local
    cluster is started by ``ensure_ray`` on the calling thread, once the checks passed: Ray 2.60's local start did
    not reach its GCS from another thread), when Ray is up or already joining. ``ensure_ray`` waits for it and
    raises its error."""
    global _connecting
    if ray_is_up() or _connecting is not None or not os.environ.get("RAY_ADDRESS"):
        return
    _keep_ray_sigterm_exit()
    connecting: Future = Future()

    def connect() -> None:
        try:
            _connect()
            connecting.set_result(None)
        except BaseException as err:  # handed to whoever waits (``ensure_ray``)
            connecting.set_exception(err)

    _connecting = connecting
    threading.Thread(target=connect, name="ray-join", daemon=True).start()


def _keep_ray_sigterm_exit() -> None:
    """What ``ray.init`` does on the main thread and cannot on another: SIGTERM exits through ``sys.exit`` (so that
    Ray's exit hook leaves the cluster); and its warning about it, true for the thread only, is dropped."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
    logging.getLogger("ray._private.worker").addFilter(_NOT_ON_MAIN_THREAD)  # added once (the same object)


class _NotOnMainThread(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


_NOT_ON_MAIN_THREAD = _NotOnMainThread()


def ensure_ray() -> None:
    """Join the cluster in RAY_ADDRESS (waiting for ``join_in_background``'s), else start a local one."""
    global _connecting
    if _connecting is not None:
        connecting, _connecting = _connecting, None
        connecting.result()
    _connect()


def shutdown_ray() -> None:
    """Leave the cluster (stopping a local one), once a join under way is made. Ray prints the worker lines
    it held back as repeats on the way out: a command calls this while its console is still routed
    (``distalign.logs.quiet_console``)."""
    global _connecting
    if _connecting is not None:
        connecting, _connecting = _connecting, None
        connecting.exception()  # made or failed: either way nothing is left under way
    if ray_is_up():
        import ray

        ray.shutdown()


@contextlib.contextmanager
def leaving_ray() -> Iterator[None]:
    """``shutdown_ray`` when the block ends, if Ray was not up when it began: a command leaves the cluster it
    joined, and a session its caller holds (a test's, a notebook's) stays up."""
    was_up = ray_is_up() or _connecting is not None
    try:
        yield
    finally:
        if not was_up:
            shutdown_ray()


@contextlib.contextmanager
def reserved(bundles: list[dict[str, float]], what: str, timeout_s: float = 600) -> Iterator[list]:
    """Hold ``bundles`` of resources (a placement group each) while the block runs; ``what`` names them in the
    error raised when the cluster has not freed them within ``timeout_s``."""
    import ray
    import ray.util

    groups = [ray.util.placement_group([bundle]) for bundle in bundles]
    try:
        try:
            ray.get([group.ready() for group in groups], timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"could not reserve {what} in {timeout_s:.0f} s: the cluster has too few free resources"
            ) from None
        yield groups
    finally:
        for group in groups:
            ray.util.remove_placement_group(group)


def available_resources(gpus_wanted: bool) -> tuple[dict[str, float], str]:
    """(CPU and GPU totals, where) of the cluster a run would use, without starting one: the cluster this process
    is on (or is joining: ``join_in_background``, waited for), or the one in RAY_ADDRESS (joined for the
    question, then left), else this machine as a local Ray cluster would count it (its CPUs; its CUDA devices only
    when ``gpus_wanted``, since counting them imports torch)."""
    address = os.environ.get("RAY_ADDRESS")
    if ray_is_up() or address:
        import ray

        with contextlib.nullcontext() if _connecting is not None else leaving_ray():
            ensure_ray()
            resources = ray.cluster_resources()
        return {"CPU": resources.get("CPU", 0.0), "GPU": resources.get("GPU", 0.0)}, "the Ray cluster" + (
            f" at {address}" if address else ""
        )
    gpus = 0
    if gpus_wanted:
        import torch

        gpus = torch.cuda.device_count()
    return {"CPU": float(os.cpu_count() or 1), "GPU": float(gpus)}, "this machine (no RAY_ADDRESS: a local Ray cluster)"


def answering(address: str, timeout_s: float = 5.0) -> None:
    """Raise ``ConnectionError`` naming ``address`` (``host:port``, with or without a scheme; ``auto`` is Ray's to
    find) unless it accepts a connection within ``timeout_s``: Ray retries a dead address for minutes."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rstrip("/").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as err:
        raise ConnectionError(f"RAY_ADDRESS={address} does not answer ({err})") from None
