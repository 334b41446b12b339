"""Errors every layer may raise (kept at the bottom so plugins and loaders share them)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key or file."""


class InputError(ValueError):
    """An input file that cannot be used at all (missing, wrong columns); names the file."""


def require(condition: bool, key: str, message: str) -> None:
    """Raise ``ConfigError("<key>: <message>")`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"{key}: {message}")
