"""Models where users keep them: ``distalign model fetch`` from a Hugging Face cache laid out here (offline) to a
directory and to S3 (moto's server on loopback), an ``s3://`` model checked before anything starts and staged once
per node (once for two processes at once), and every command that takes a model giving one line, at once, for an
uncached Hub name under HF_HUB_OFFLINE=1. No test talks to the real Hub."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import QUICKSTART, REPO, SMALL, free_port
from transfer_data import tiny_model

from distalign.errors import ConfigError
from distalign.model_store.locate import locate_model
from distalign.model_store.model_fetch import fetch_model
from distalign.storage import node_local


def distalign(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real command line, as a user runs it (the worktree's code first on the path)."""
    return subprocess.run(
        [sys.executable, "-m", "distalign.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})),
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("model") / "tiny")


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, model_dir) -> Path:
    """A Hugging Face cache holding ``org/tiny`` as huggingface_hub lays one out (refs/main names the snapshot),
    with files of other frameworks beside the model's, which a fetch leaves out."""
    cache = tmp_path_factory.mktemp("hf") / "hub"
    repo = cache / "models--org--tiny"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    for file in model_dir.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    for other in ("tf_model.h5", "flax_model.msgpack", "pytorch_model.bin", "onnx/model.onnx"):
        (snapshot / other).parent.mkdir(exist_ok=True)
        (snapshot / other).write_bytes(b"not read")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    return cache


@pytest.fixture
def offline_cache(hub_cache):
    return {"HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1"}


def test_model_fetch_copies_a_cached_hub_model_offline_to_a_directory(offline_cache, model_dir, tmp_path):
    done = distalign("model", "fetch", "org/tiny", "--to", str(tmp_path / "models" / "tiny"), env=offline_cache)
    assert done.returncode == 0, done.stderr
    copied = sorted(p.name for p in (tmp_path / "models" / "tiny").iterdir())
    assert copied == sorted(p.name for p in model_dir.iterdir())  # no TensorFlow, Flax, ONNX or pickled copies
    total = sum(p.stat().st_size for p in model_dir.iterdir())
    assert f"copied {len(copied)} files, {total:,} bytes, of org/tiny" in done.stdout
    assert f"model: {{name_or_path: {tmp_path / 'models' / 'tiny'}}}" in done.stdout
    with pytest.raises(ConfigError, match="exists and is not an empty directory"):
        fetch_model(str(model_dir), str(tmp_path / "models" / "tiny"))


def test_model_fetch_copies_a_cached_hub_model_offline_to_s3(offline_cache, model_dir, s3_endpoint):
    url, s3 = s3_endpoint
    done = distalign(
        "model", "fetch", "org/tiny", "--to", "s3://ckpt/models/fetched", "--endpoint-url", url, env=offline_cache
    )
    assert done.returncode == 0, done.stderr
    stored = {
        item["Key"]: item["Size"] for item in s3.list_objects_v2(Bucket="ckpt", Prefix="models/fetched/")["Contents"]
    }
    assert stored == {f"models/fetched/{p.name}": p.stat().st_size for p in model_dir.iterdir()}
    assert "model: {name_or_path: s3://ckpt/models/fetched}" in done.stdout
    with pytest.raises(ConfigError, match=r"^--to s3://ckpt/models/fetched \(endpoint .*\): something is stored there"):
        fetch_model(str(model_dir), "s3://ckpt/models/fetched", url)


def test_model_fetch_of_an_uncached_model_offline_is_one_line(offline_cache, tmp_path):
    done = distalign("model", "fetch", "org/absent", "--to", str(tmp_path / "m"), env=offline_cache)
    assert done.returncode == 2 and not done.stdout
    assert (
        done.stderr.startswith(
            "distalign: error: model fetch NAME: org/absent is not in the Hugging Face cache and HF_HUB_OFFLINE is set"
        )
        and done.stderr.count("\n") == 1
    )
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def stored_model(s3_endpoint, model_dir) -> str:
    """The tiny model in moto's S3, copied there by ``model fetch`` from a local directory."""
    fetch_model(str(model_dir), "s3://ckpt/models/tiny", s3_endpoint[0])
    return "s3://ckpt/models/tiny"


@pytest.fixture
def node_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DISTALIGN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_an_s3_model_is_staged_once_per_node_and_again_when_it_changes(
    s3_endpoint, stored_model, model_dir, node_cache, caplog
):
    url, s3 = s3_endpoint
    caplog.set_level(logging.INFO, logger="distalign")
    first = locate_model(stored_model, "model.name_or_path", url)
    second = locate_model(stored_model, "model.name_or_path", url)
    staged = [r for r in caplog.records if r.getMessage().startswith(f"staged {stored_model} on this node")]
    assert first == second and len(staged) == 1
    assert sorted(p.name for p in Path(first).iterdir()) == sorted(p.name for p in model_dir.iterdir())
    assert [p.name for p in node_cache.iterdir() if p.is_dir()] == [Path(first).name]  # no partial copy left

    config = json.loads((model_dir / "config.json").read_text()) | {"note": "written again"}
    s3.put_object(Bucket="ckpt", Key="models/tiny/config.json", Body=json.dumps(config).encode())
    try:
        third = locate_model(stored_model, "model.name_or_path", url)
    finally:
        s3.upload_file(str(model_dir / "config.json"), "ckpt", "models/tiny/config.json")
    assert third != first and json.loads((Path(third) / "config.json").read_text())["note"] == "written again"


def test_two_processes_staging_at_once_download_once(s3_endpoint, stored_model, node_cache):
    stage = (
        "import logging, sys; from distalign.storage import node_local; "
        "logging.basicConfig(level=logging.INFO, format='%(message)s', stream=sys.stdout); "
        f"print('at', node_local({stored_model!r}, {s3_endpoint[0]!r}))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), DISTALIGN_CACHE=str(node_cache))
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", stage], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    lines = [line for out, _ in outputs for line in out.splitlines()]
    assert len([line for line in lines if line.startswith("staged ")]) == 1
    assert len({line for line in lines if line.startswith("at ")}) == 1


def test_an_s3_model_is_checked_before_anything_starts(s3_endpoint, model_dir, node_cache):
    url, s3 = s3_endpoint
    with pytest.raises(
        ConfigError,
        match=r"^model.name_or_path: s3://ckpt/models/absent \(endpoint .*\): nothing "
        r"stored there; copy a whole model there: `distalign model fetch",
    ):
        locate_model("s3://ckpt/models/absent", "model.name_or_path", url)
    s3.upload_file(str(model_dir / "config.json"), "ckpt", "models/config-only/config.json")
    with pytest.raises(
        ConfigError,
        match="s3://ckpt/models/config-only .*not a model directory, it has no tokenizer files and no weights",
    ):
        locate_model("s3://ckpt/models/config-only", "model.name_or_path", url)
    with pytest.raises(
        ConfigError,
        match=r"^--model: s3://ckpt/models/tiny \(endpoint http://127.0.0.1:\d+\): the "
        "storage cannot be read",
    ):
        locate_model("s3://ckpt/models/tiny", "--model", f"http://127.0.0.1:{free_port()}")
    assert not node_cache.exists()  # nothing staged from a refused model


def test_a_local_path_stays_as_it_is(model_dir):
    assert node_local(str(model_dir)) == str(model_dir)
    assert locate_model(str(model_dir), "model.name_or_path") == str(model_dir)


# Every command that takes a model, as a user runs it, with a Hub name the (empty) cache lacks, offline
OFFLINE_COMMANDS = {
    "train": ("train", str(QUICKSTART), "model.name_or_path=org/absent"),
    "tune": ("tune", "tuning/quickstart.yaml", "model.name_or_path=org/absent"),
    "eval": ("eval", "--model", "org/absent"),
    "transfer": ("transfer", "org/absent", "--tasks", "xnli", "--hub"),
    "static extract": ("static", "extract", "--model", "org/absent", "--corpus", "corpus.txt", "--out", "out.vec"),
    "model fetch": ("model", "fetch", "org/absent", "--to", "copy"),
}


@pytest.mark.parametrize("command", OFFLINE_COMMANDS)
def test_an_uncached_hub_model_offline_is_one_line_in_every_command(command, tmp_path):
    (tmp_path / "corpus.txt").write_text("a few words\n")
    key = (
        "model.name_or_path"
        if command in ("train", "tune")
        else "model fetch NAME"
        if command == "model fetch"
        else "--model"
    )
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "TRANSFORMERS_OFFLINE": "1", "DISTALIGN_HOME": str(tmp_path)}
    args = [str(tmp_path / a) if a in ("corpus.txt", "out.vec", "copy") else a for a in OFFLINE_COMMANDS[command]]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "distalign.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), **env),
    )
    print(f"{command}: {time.monotonic() - started:.1f} s")
    assert done.returncode == 2, done.stderr
    # one line; a study's check reports every trial's, one line each
    errors = done.stderr.strip().splitlines()
    errors = errors[1:] if errors[0].endswith("problems:") and command == "tune" else errors
    assert len(errors) == 1 or command == "tune", done.stderr
    for error in errors:
        assert f"{key}: org/absent is not in the Hugging Face cache and HF_HUB_OFFLINE is set" in error, done.stderr
        assert "distalign model fetch org/absent" in error
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_an_s3_model_path_trains(s3_endpoint, stored_model, tmp_path):
    """``distalign train`` on the quickstart config with the model read from S3 (staged on the driver for its
    tokenizer and on each worker, once for the node) and the run's storage there too."""
    url = s3_endpoint[0]
    env = {
        "DISTALIGN_HOME": str(tmp_path),
        "DISTALIGN_CACHE": str(tmp_path / "cache"),
        "RAY_ADDRESS": "",
        "HF_HUB_OFFLINE": "1",
    }
    done = distalign(
        "train",
        str(QUICKSTART),
        *SMALL,
        "train.max_steps=4",
        "run.name=s3-model",
        f"model.name_or_path={stored_model}",
        "storage.path=s3://ckpt/runs",
        f"storage.endpoint_url={url}",
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[distalign] done" in done.stdout
    # one whole copy on the node, no partial one (the synthetic world the run generated and the constraint table
    # the workers read are cached beside it)
    copies = [
        p
        for p in (tmp_path / "cache").iterdir()
        if p.is_dir() and not p.name.startswith("world-") and not (p / "table.arrow").is_file()
    ]
    assert len(copies) == 1 and (copies[0] / "config.json").is_file(), copies
    logs = [f.read_text() for f in (tmp_path / "logs").glob("train-*.log")] + [done.stdout]
    assert sum(text.count(f"staged {stored_model} on this node") for text in logs) == 1
