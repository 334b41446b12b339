"""A Hub model name where the Hub cannot be reached: one message naming the key, after one look (transformers
retried for ~30 s and ended in a 68-line traceback); a cached model and local paths pass untouched; a study looks
each name up once. No test talks to the real Hub: the endpoint is a port on 127.0.0.1 that counts the looks."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import QUICKSTART, REPO, SMALL, free_port

from distalign.errors import ConfigError
from distalign.models.loading import check_hub_model
from distalign.studies.shared_inputs import check_trials
from distalign.studies.study import load_study

STUDY = REPO / "tuning" / "quickstart.yaml"  # lr x data.max_constraints: 4 trials, 2 distinct inputs


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """huggingface_hub pointed at an empty cache and at a port nothing listens on (a test may point it at its own)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return constants


@contextlib.contextmanager
def hub_port(hold: bool) -> Iterator[tuple[str, list[socket.socket]]]:
    """A port on 127.0.0.1 posing as the Hub: it takes every connection and holds it unanswered (``hold``: a proxy or
    firewall that drops the traffic) or closes it at once (a network that refuses). Yields the endpoint and the
    connections taken: how many looks were made."""
    taken: list[socket.socket] = []

    def take(server):
        while True:
            try:
                connection = server.accept()[0]
            except OSError:  # the socket closed: the test is over
                return
            taken.append(connection)
            if not hold:
                connection.close()

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        threading.Thread(target=take, args=(server,), daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.getsockname()[1]}", taken
        finally:
            for connection in taken:
                connection.close()


@pytest.fixture
def unknown_names_hub(hub) -> Iterator[list[str]]:
    """An HTTP server posing as the Hub, answering every model's page as the Hub does an unknown or private model;
    yields the paths asked for."""
    asked: list[str] = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")  # what the Hub answers for an unknown or private model
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hub.ENDPOINT = f"http://127.0.0.1:{server.server_address[1]}"
    yield asked
    server.shutdown()
    server.server_close()


def test_an_unreachable_hub_is_one_line_naming_the_key_and_what_to_do_after_one_look(tmp_path):
    """`distalign train` as a user runs it, with a Hub name on a machine whose network refuses the Hub: exit code 2,
    one line naming the key, the Hub, the cache and the ways out, after one request (how long it takes:
    docs/guides/troubleshooting.md)."""
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    with hub_port(hold=False) as (endpoint, looks):
        env |= {
            "HF_ENDPOINT": endpoint,
            "HF_HOME": str(tmp_path / "hf"),
            "DISTALIGN_HOME": str(tmp_path),
            "RAY_ADDRESS": "",
            "PYTHONPATH": str(REPO),
        }
        train = ["train", str(QUICKSTART), "model.name_or_path=xlm-roberta-base"]
        done = subprocess.run(
            [sys.executable, "-m", "distalign.cli", *train],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        f"distalign: error: model.name_or_path: xlm-roberta-base: the Hub ({endpoint}) "
        "cannot be reached from this machine"
    )
    for remedy in (
        "HF_HUB_OFFLINE=1",
        "hf download xlm-roberta-base",
        str(tmp_path / "hf" / "hub"),
        "distalign model fetch xlm-roberta-base --to DIR_OR_S3_URI",
    ):
        assert remedy in done.stderr
    assert len(looks) == 1


def test_a_study_looks_each_hub_name_up_once(unknown_names_hub, distalign_home):
    """tuning/quickstart.yaml's 4 trials read 2 distinct inputs, all with one model: one look at the Hub (an
    unreachable Hub cost 5 s a look), and each input's problem still named by its trial."""
    _, trials = load_study(STUDY, [*SMALL, "model.name_or_path=org/typo"])
    with pytest.raises(ConfigError) as raised:
        check_trials(trials)
    assert unknown_names_hub == ["/api/models/org/typo"]
    lines = str(raised.value).splitlines()
    assert lines[0] == "2 problems:"
    assert [line.split(": ", 1)[0] for line in lines[1:]] == [
        "  - trial quickstart-tune-000",
        "  - trial quickstart-tune-001",
    ]
    assert all("model.name_or_path: org/typo: no such model on the Hub" in line for line in lines[1:])


def test_offline_mode_without_the_model_in_the_cache_is_named(hub, monkeypatch):
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError, match="--model: org/model is not in the Hugging Face cache and HF_HUB_OFFLINE"):
        check_hub_model("org/model", "--model")


def cache_org_cached(hub_cache: Path) -> None:
    """``org/cached`` in a Hugging Face cache laid out as the Hub client writes it (a snapshot and refs/main)."""
    snapshot = hub_cache / "models--org--cached" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc123")


def test_a_cached_model_local_paths_and_the_tiny_model_pass_without_the_hub(hub, tmp_path):
    cache_org_cached(tmp_path / "hub")
    with hub_port(hold=False) as (endpoint, looks):
        hub.ENDPOINT = endpoint
        for name in ("org/cached", "tiny", str(tmp_path), "./somewhere/model", "s3://bucket/model"):
            check_hub_model(name, "model.name_or_path")
    assert len(looks) == 1  # the cached model's (refused at once: its copy loads); none for the others


def test_a_hub_that_never_answers_is_one_message_in_one_look(tmp_path):
    """A Hub that takes the connection and never answers (a proxy or firewall that drops the traffic): one request
    of HUB_TIMEOUT_S, no second look (HfApi's user-agent header fetched the Hub's agent registry first, 3 s more).
    In a fresh process, as a command's: huggingface_hub remembers that registry for the rest of a process."""
    check = (
        "from distalign.models.loading import check_hub_model\n"
        "try:\n    check_hub_model('org/model', '--model')\n"
        "except ValueError as error:\n    print(error)"
    )
    with hub_port(hold=True) as (endpoint, looks):
        env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path), PYTHONPATH=str(REPO))
        env.pop("HF_HUB_OFFLINE", None)
        done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=60)
        message = done.stdout.strip()
        assert message.startswith(f"--model: org/model: the Hub ({endpoint})") and "cannot be reached" in message
        assert len(looks) == 1  # one look of HUB_TIMEOUT_S (a second, the agent registry's, cost 3 s more)


def test_a_name_the_hub_does_not_know_is_named(unknown_names_hub):
    with pytest.raises(ConfigError, match=r"^model.name_or_path: org/typo: no such model on the Hub .*HF_TOKEN"):
        check_hub_model("org/typo", "model.name_or_path")


def test_a_cached_model_with_a_hub_that_never_answers_names_hf_hub_offline(hub, tmp_path):
    """transformers asks the Hub for a cached model's revision with no time limit (it waited > 10 min here): one
    look, then the way out; offline, no look at all."""
    cache_org_cached(tmp_path / "hub")
    with hub_port(hold=True) as (endpoint, looks):
        hub.ENDPOINT = endpoint
        with pytest.raises(
            ConfigError,
            match=r"^model.name_or_path: org/cached is in the Hugging Face cache, but the "
            r"Hub .* does not answer .*set HF_HUB_OFFLINE=1",
        ):
            check_hub_model("org/cached", "model.name_or_path")
        assert len(looks) == 1
        hub.HF_HUB_OFFLINE = True
        check_hub_model("org/cached", "model.name_or_path")  # offline: the cache alone, the Hub never asked
        assert len(looks) == 1
