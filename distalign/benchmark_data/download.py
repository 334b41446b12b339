"""One file over HTTP(S): resumable, verified, then renamed into place.

The bytes go to ``<file>.part``; an interrupted download leaves it, and the next try asks for the rest with a
``Range`` request. Only a ``.part`` whose SHA-256 is the pinned one is renamed to the file's name (an atomic rename
on one filesystem), so a reader never sees a half-written or corrupt file; a mismatch deletes the ``.part``.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from distalign.errors import InputError

CHUNK = 1 << 16
TIMEOUT_S = 60


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def download(url: str, dest: Path, sha256: str, size: int, progress: Callable[[int], object]) -> None:
    """``url`` to ``dest``, continuing a ``.part`` left by an earlier try; ``progress(n)`` for each n bytes
    received. An ``InputError`` names the URL for an HTTP or network failure (the ``.part`` kept for a retry) and
    for a checksum mismatch (the ``.part`` deleted)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    have = part.stat().st_size if part.is_file() else 0
    if have > size:  # not a prefix of this file: start again
        part.unlink()
        have = 0
    if have < size:
        _receive(url, part, have, progress)
        if part.stat().st_size < size:  # the server closed early (http.client does not always raise then)
            raise _interrupted(url, part, "the connection closed early")
    actual = _sha256(part)
    if actual != sha256:
        part.unlink()
        raise InputError(
            f"{url}: checksum mismatch, expected sha256 {sha256}, got {actual}; the download was "
            "deleted. The upstream file or the mirror's copy is not the pinned one: use another mirror, "
            "or report it"
        )
    os.replace(part, dest)


def _receive(url: str, part: Path, have: int, progress: Callable[[int], object]) -> None:
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S) as response:
            resumed = have and response.status == 206  # a server without Range support sends it all again
            if have and not resumed:
                progress(-have)
            with part.open("ab" if resumed else "wb") as out:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    progress(len(chunk))
    except urllib.error.HTTPError as err:
        raise InputError(f"{url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        raise _interrupted(url, part, str(getattr(err, "reason", err))) from None


def _interrupted(url: str, part: Path, why: str) -> InputError:
    kept = part.stat().st_size if part.is_file() and part.stat().st_size else 0
    if not kept:
        return InputError(
            f"{url}: download failed ({why}): check the network, or name a reachable mirror with "
            "--mirror (DISTALIGN_DATA_MIRROR)"
        )
    return InputError(
        f"{url}: download interrupted ({why}); {kept} bytes kept in {part}: run the same command again to resume"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
