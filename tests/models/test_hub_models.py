"""A Hub model name where the Hub cannot be reached: one message naming the key, in one look of a few seconds
(transformers retried for ~30 s and ended in a 68-line traceback); a cached model and local paths pass untouched.
No test talks to the real Hub: the endpoint is a closed port on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from conftest import free_port
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


def test_a_cached_model_local_paths_and_the_tiny_model_pass_without_the_hub(hub, tmp_path):
    snapshot = tmp_path / "hub" / "models--org--cached" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc123")
    for name in ("org/cached", "tiny", str(tmp_path), "./somewhere/model", "s3://bucket/model"):
        check_hub_model(name, "model.name_or_path")  # no look at the (unreachable) Hub
