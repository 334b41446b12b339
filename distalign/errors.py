"""Errors every layer may raise (kept at the bottom so plugins and loaders share them)."""

from __future__ import annotations

import os
from pathlib import Path


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key or file."""


class InputError(ValueError):
    """An input file that cannot be used at all (missing, wrong columns); names the file."""


def require_writable(path: Path, key: str) -> None:
    """Raise ``ConfigError`` naming ``key`` unless ``path`` is, or could be created as, a folder this process may
    write in: its nearest existing ancestor is a writable directory (checked before any work, nothing created)."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        why = "is a file" if not existing.is_dir() else "is not writable"
        raise ConfigError(f"{key}: {path} is not writable ({existing} {why}): give a folder this user may create "
                          "and write in")


def require(condition: bool, key: str, message: str) -> None:
    """Raise ``ConfigError("<key>: <message>")`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"{key}: {message}")
