"""Which Ray a command joins, and the settings a local cluster starts with."""

import json

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


def test_the_drivers_offline_mode_and_data_places_reach_workers_on_every_node(init_calls, monkeypatch):
    """A worker on another node has that node's environment, not the driver's: the driver's offline switches, data
    home and Hugging Face cache travel in the job's runtime env (unset ones stay unset)."""
    driver = {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "DISTALIGN_OFFLINE": "1",
        "DISTALIGN_DATA": "/shared/distalign-data",
        "HF_HOME": "/shared/hf",
    }
    for name in ray_session.NODE_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    for name, value in driver.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    ray_session.ensure_ray()
    (call,) = init_calls
    assert call["runtime_env"] == {"env_vars": driver}


def test_a_submitted_jobs_own_runtime_env_is_left_to_it():
    """Under `ray job submit` the job's runtime env already sets some (the driver sees them too): naming one again
    in ray.init is a conflict Ray refuses, so only the others are added."""
    # what ray.init merges a job's runtime env with
    from ray.runtime_env.runtime_env import _merge_runtime_env

    job = {"working_dir": ".", "env_vars": {"HF_HUB_OFFLINE": "1", "MLFLOW_TRACKING_URI": "http://mlflow:5000"}}
    driver = {
        "HF_HUB_OFFLINE": "1",
        "DISTALIGN_DATA": "/shared/data",
        "PATH": "/usr/bin",
        ray_session.JOB_CONFIG_ENV: json.dumps({"runtime_env": job}),
    }
    forwarded = ray_session.forwarded_environment(driver)
    assert forwarded == {"DISTALIGN_DATA": "/shared/data"}
    merged = _merge_runtime_env(job, {"env_vars": forwarded})
    assert merged is not None and merged["env_vars"]["DISTALIGN_DATA"] == "/shared/data"


def test_a_running_cluster_is_joined_on_a_thread_and_the_run_waits_for_that_join(monkeypatch):
    """``join_in_background``: the join of RAY_ADDRESS's cluster runs beside the checks; ``ensure_ray`` waits for it
    and does not join again. Without RAY_ADDRESS nothing starts (a local cluster waits for the checks)."""
    import threading

    joins = []  # the thread of each ray.init
    monkeypatch.setattr(ray, "is_initialized", lambda: bool(joins))
    monkeypatch.setattr(ray, "init", lambda **kwargs: joins.append(threading.current_thread()))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray_session.join_in_background()
    assert ray_session._connecting is None and joins == []
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    ray_session.join_in_background()
    ray_session.ensure_ray()
    assert ray_session._connecting is None
    assert len(joins) == 1 and joins[0] is not threading.main_thread()


def test_a_join_that_fails_on_its_thread_fails_the_caller_that_waits_for_it(monkeypatch):
    """A dead RAY_ADDRESS: the thread's error is raised where the join is waited for (the checks name the key)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing answers there
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    ray_session.join_in_background()
    with pytest.raises(ConnectionError, match=f"RAY_ADDRESS=127.0.0.1:{port} does not answer"):
        ray_session.ensure_ray()


def test_a_command_leaves_the_cluster_it_was_still_joining(init_calls, monkeypatch):
    """A check failed while the join went on: the command waits for it and leaves, nothing left joining."""
    shutdowns = []
    monkeypatch.setattr(ray, "shutdown", lambda: shutdowns.append(True))
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    with pytest.raises(ValueError), ray_session.leaving_ray():
        ray_session.join_in_background()
        monkeypatch.setattr(ray, "is_initialized", lambda: True)
        raise ValueError("a bad input")
    assert len(init_calls) == 1 and shutdowns == [True] and ray_session._connecting is None
