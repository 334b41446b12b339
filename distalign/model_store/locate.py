"""One resolution of a model's name for every command that takes one (train, tune, eval, transfer, static extract,
bench perf), on the driver and, through ``distalign.storage.node_local``, on the workers:

- ``tiny``: built by the run itself (``distalign.preparation``); passes untouched;
- a local directory: checked whole (config.json, tokenizer, weights);
- a Hub name: in the Hugging Face cache, or the Hub reachable in one short look (``HF_HUB_OFFLINE=1`` or
  ``TRANSFORMERS_OFFLINE=1``: the cache only, no look);
- a storage URI (``s3://bucket/models/xlm-roberta-base``, as ``distalign model fetch`` writes one): its listing
  checked for config.json, tokenizer files and weights, then staged into this node's cache, once per node.

Every problem is one ``ConfigError`` naming the key (``model.name_or_path``, ``--model``) before Ray starts. A
study checks its trials inside ``each_model_checked_once``: one look per model, not one per trial.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from distalign.errors import ConfigError
from distalign.models.loading import (
    TOKENIZER_FILES,
    WEIGHTS_FILES,
    check_hub_model,
    check_local_model,
    check_model_files,
)

CHECK_TIMEOUT_S = 5.0


def is_storage_uri(name_or_path: str) -> bool:
    return "://" in name_or_path


def check_stored_model(uri: str, key: str, endpoint_url: str = "") -> None:
    """A model in storage, checked from its listing (no object read): it exists and holds config.json, tokenizer
    files and weights at its top level. Else a ``ConfigError`` naming ``key``, the URI and what to do."""
    where = f"{key}: {uri}" + (f" (endpoint {endpoint_url})" if endpoint_url else "")
    from distalign.storage import listed_files, storage_directory  # pyarrow: here, where a model is in storage

    copy = f"copy a whole model there: `distalign model fetch NAME --to {uri}`"
    try:
        # one try with short timeouts: a dead endpoint is one line in seconds, not half a minute of retries
        fs, directory = storage_directory(
            uri, endpoint_url, attempts=1, connect_timeout=CHECK_TIMEOUT_S, request_timeout=CHECK_TIMEOUT_S
        )
        names = {name for name, _, _ in listed_files(fs, directory)}
    except (OSError, ValueError) as err:  # pyarrow: an unknown scheme, no endpoint, refused credentials
        raise ConfigError(
            f"{where}: the storage cannot be read ({err}); check storage.endpoint_url "
            "(DISTALIGN_STORAGE_ENDPOINT) and the credentials"
        ) from None
    if not names:
        raise ConfigError(f"{where}: nothing stored there; {copy}")
    lacks = [
        what
        for what, files in (
            ("config.json", ("config.json",)),
            ("tokenizer files", TOKENIZER_FILES),
            ("weights", WEIGHTS_FILES),
        )
        if not names.intersection(files)
    ]
    if lacks:
        raise ConfigError(
            f"{where}: not a model directory, it has no {' and no '.join(lacks)} (it holds "
            f"{', '.join(sorted(names)[:5])}{', ...' if len(names) > 5 else ''}); {copy}"
        )


# (name_or_path, key, endpoint_url) -> what its check raised (None: it passed), inside ``each_model_checked_once``
_outcomes: contextvars.ContextVar[dict[tuple[str, str, str], ConfigError | None] | None] = contextvars.ContextVar(
    "model_check_outcomes", default=None
)


@contextlib.contextmanager
def each_model_checked_once() -> Iterator[None]:
    """Inside the block ``check_model`` checks each model once and answers again with that outcome, passed or
    refused: a study's trials mostly name one model, and a look at a Hub that does not answer costs seconds each.
    Only for the block: a later command looks again (the network fixed, the model copied)."""
    token = _outcomes.set({})
    try:
        yield
    finally:
        _outcomes.reset(token)


def check_model(name_or_path: str, key: str, endpoint_url: str = "") -> None:
    """``locate_model``'s checks without the staging: cheap to import and run, so a command calls it before its own
    imports (torch, Ray: seconds) and a missing model is one line at once. Once per model inside
    ``each_model_checked_once``."""
    outcomes = _outcomes.get()
    if outcomes is None:
        _check_model(name_or_path, key, endpoint_url)
        return
    where = (name_or_path, key, endpoint_url)
    if where not in outcomes:
        try:
            _check_model(name_or_path, key, endpoint_url)
            outcomes[where] = None
        except ConfigError as err:
            outcomes[where] = err
    if outcomes[where] is not None:
        raise ConfigError(str(outcomes[where]))


def _check_model(name_or_path: str, key: str, endpoint_url: str) -> None:
    if name_or_path == "tiny":
        return
    if is_storage_uri(name_or_path):
        check_stored_model(name_or_path, key, endpoint_url)
        return
    check_local_model(name_or_path, key)
    check_hub_model(name_or_path, key)


def locate_model(name_or_path: str, key: str, endpoint_url: str = "") -> str:
    """What ``from_pretrained`` reads here for ``name_or_path`` (module docstring): the name itself for ``tiny``, a
    local directory or a Hub name, this node's staged copy for a storage URI; checked first (``check_model``), each
    problem a ``ConfigError`` naming ``key``."""
    check_model(name_or_path, key, endpoint_url)
    if not is_storage_uri(name_or_path):
        return name_or_path
    from distalign.storage import node_local

    local = node_local(name_or_path, endpoint_url)
    check_model_files(local, f"{key} {name_or_path}")  # the tokenizer loads and the safetensors headers read
    return local
