"""Connecting the driver to Ray: the cluster in RAY_ADDRESS, else a fresh local one."""

import os

import ray


def ensure_ray() -> None:
    if not ray.is_initialized():
        # RAY_ADDRESS (set by `ray job submit`, or `auto` for a `ray start` cluster) points at a cluster;
        # otherwise always a fresh local one, never a stale cluster address left on disk.
        ray.init(address=os.environ.get("RAY_ADDRESS") or "local", log_to_driver=True)


def shutdown_ray() -> None:
    """Leave the cluster (stopping a local one). Ray prints the worker lines it held back as repeats on the way
    out: a command calls this while its console is still routed (``distalign.logs.quiet_console``)."""
    if ray.is_initialized():
        ray.shutdown()
