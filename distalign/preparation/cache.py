"""Prepared inputs shared between runs: one directory per content hash under ``data.cache_dir``.

The trials of a study (and any run started again) that would generate the same synthetic world or
build the same tiny model find the finished directory here instead of paying for it again. The key
hashes everything the directory is made from (settings, seed, the very texts a tokenizer is trained
on), so a hit is the same content by construction and a change of any input is a new entry.

Concurrent trials may build one entry at once: each builds into a private directory and renames it
into place (atomic on one filesystem); the loser of the race drops its copy and uses the winner's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("distalign")
COMPLETE_MARKER = "_COMPLETE"


def content_key(*parts: Any) -> str:
    """A short hash of JSON-serialisable ``parts`` (dict keys sorted)."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_directory(root: str | Path, kind: str, key: str, build: Callable[[Path], None]) -> Path:
    """``root/<kind>-<key>``, built by ``build(directory)`` (which creates ``directory``) unless already there."""
    final = Path(root) / f"{kind}-{key}"
    if (final / COMPLETE_MARKER).exists():
        log.info("reusing the %s %s", kind, final)
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    private = final.with_name(f".{final.name}-{uuid.uuid4().hex[:8]}")
    try:
        build(private)
        (private / COMPLETE_MARKER).write_text("complete\n")
        os.rename(private, final)
    except OSError:
        if not (final / COMPLETE_MARKER).exists():
            raise
        log.info("another run built the %s %s first: using it", kind, final)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return final


def cached_json(root: str | Path, kind: str, parts: Any, build: Callable[[], Any]) -> Any:
    """``build()``'s JSON-serialisable value, stored under ``root/<kind>-<content_key(parts)>``: computed once for
    the same ``parts`` by every later run and trial (e.g. parquet footers, keyed by the files' paths, sizes, mtimes)."""

    def write(directory: Path) -> None:
        directory.mkdir(parents=True)
        (directory / "value.json").write_text(json.dumps(build()))

    return json.loads((cached_directory(root, kind, content_key(parts), write) / "value.json").read_text())
