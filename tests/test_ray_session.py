"""Which Ray a command joins, and the settings a local cluster starts with."""

import pytest
import ray

from distalign import ray_session


@pytest.fixture
def init_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    return calls


def test_a_local_cluster_keeps_idle_workers_warm(init_calls, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray_session.ensure_ray()
    (call,) = init_calls
    assert call["address"] == "local" and call["_system_config"] == ray_session.WARM_WORKER_SETTINGS


def test_a_running_cluster_is_joined_as_it_was_started(init_calls, monkeypatch):
    """Ray refuses system settings when joining a cluster: its nodes take them when started (``cluster/``)."""
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    ray_session.ensure_ray()
    (call,) = init_calls
    assert call["address"] == "auto" and "_system_config" not in call


def test_a_command_leaves_only_the_ray_session_it_started(monkeypatch):
    up, shutdowns = [False], []
    monkeypatch.setattr(ray, "is_initialized", lambda: up[0])
    monkeypatch.setattr(ray_session, "shutdown_ray", lambda: shutdowns.append(up[0]))
    with ray_session.leaving_ray():
        up[0] = True  # the command started Ray
    assert shutdowns == [True]
    with ray_session.leaving_ray():  # Ray was up before (a test's session): it stays
        pass
    assert shutdowns == [True]
