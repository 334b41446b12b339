"""A Hub model name where the Hub cannot be reached: one message naming the key, in one look of a few seconds
(transformers retried for ~30 s and ended in a 68-line traceback); a cached model and local paths pass untouched.
No test talks to the real Hub: the endpoint is a closed port on 127.0.0.1."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conftest import REPO, free_port
from distalign.errors import ConfigError
from distalign.models.loading import HUB_TIMEOUT_S, check_hub_model


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """huggingface_hub pointed at an empty cache and at a port nothing listens on."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return constants


def test_an_unreachable_hub_is_one_message_naming_the_key_and_what_to_do(hub):
    started = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        check_hub_model("xlm-roberta-base", "model.name_or_path")
    message = str(raised.value)
    assert time.monotonic() - started < HUB_TIMEOUT_S + 1
    assert message.startswith("model.name_or_path: xlm-roberta-base: the Hub (http://127.0.0.1:")
    assert "HF_HUB_OFFLINE=1" in message and "hf download xlm-roberta-base" in message and hub.HF_HUB_CACHE in message


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
    for name in ("org/cached", "tiny", str(tmp_path), "./somewhere/model", "s3://bucket/model"):
        check_hub_model(name, "model.name_or_path")  # no look at the (unreachable) Hub


def test_a_hub_that_never_answers_is_one_message_in_one_look(tmp_path):
    """A Hub that takes the connection and never answers (a proxy or firewall that drops the traffic): one request
    of HUB_TIMEOUT_S, no second look (HfApi's user-agent header fetched the Hub's agent registry first, 3 s more).
    In a fresh process, as a command's: huggingface_hub remembers that registry for the rest of a process."""
    import socket
    import subprocess
    import sys

    import threading

    check = ("from distalign.models.loading import check_hub_model\n"
             "try:\n    check_hub_model('org/model', '--model')\n"
             "except ValueError as error:\n    print(error)")
    held = []  # every connection taken and never answered: how many looks the check made

    def take(server):
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:  # the socket closed: the test is over
                return

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        threading.Thread(target=take, args=(server,), daemon=True).start()
        env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{server.getsockname()[1]}", HF_HOME=str(tmp_path),
                   PYTHONPATH=str(REPO))
        env.pop("HF_HUB_OFFLINE", None)
        done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=60)
    for connection in held:
        connection.close()
    message = done.stdout.strip()
    assert message.startswith("--model: org/model: the Hub (http://127.0.0.1:") and "cannot be reached" in message
    assert len(held) == 1  # one look of HUB_TIMEOUT_S (a second, the agent registry's, cost 3 s more)


def test_a_name_the_hub_does_not_know_is_named(hub):
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")  # what the Hub answers for an unknown or private model
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hub.ENDPOINT = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ConfigError, match=r"^model.name_or_path: org/typo: no such model on the Hub .*HF_TOKEN"):
            check_hub_model("org/typo", "model.name_or_path")
    finally:
        server.shutdown()


def test_a_cached_model_with_a_hub_that_never_answers_names_hf_hub_offline(hub, tmp_path):
    """transformers asks the Hub for a cached model's revision with no time limit (it waited > 10 min here)."""
    import socket

    cache_org_cached(tmp_path / "hub")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        hub.ENDPOINT = f"http://127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(ConfigError, match=r"^model.name_or_path: org/cached is in the Hugging Face cache, but the "
                                              r"Hub .* does not answer .*set HF_HUB_OFFLINE=1"):
            check_hub_model("org/cached", "model.name_or_path")
        assert time.monotonic() - started < HUB_TIMEOUT_S + 1
        hub.HF_HUB_OFFLINE = True
        check_hub_model("org/cached", "model.name_or_path")  # offline: the cache alone, the Hub never asked
