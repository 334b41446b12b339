"""Errors every layer may raise (kept at the bottom so plugins and loaders share them)."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key or file."""


class InputError(ValueError):
    """An input file that cannot be used at all (missing, wrong columns); names the file."""


class ConfigErrors(ConfigError):
    """Several problems found in one pass (``Problems``), reported together; each names its key or file."""

    def __init__(self, errors: list[ValueError]):
        self.errors = errors
        lines = (str(err).replace("\n", "\n    ") for err in errors)  # an InputError's summary spans lines
        super().__init__(f"{len(errors)} problems:\n" + "\n".join(f"  - {line}" for line in lines))


class Problems:
    """Collects the ``ConfigError``s and ``InputError``s of independent checks, so that a user sees every problem
    of a config in one run instead of one per try::

        problems = Problems()
        with problems.check():
            check_storage(...)
        with problems.check():
            check_reachable(...)
        problems.raise_any()  # the one error as it was raised, or ConfigErrors listing them all
    """

    def __init__(self) -> None:
        self.errors: list[ValueError] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        """Run the block; a bad-input error it raises is kept (a ``ConfigErrors``' own list, flattened)."""
        try:
            yield
        except ConfigErrors as err:
            self.errors.extend(err.errors)
        except (ConfigError, InputError) as err:
            self.errors.append(err)

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_any(self) -> None:
        """Raise what was kept: one error unchanged, several as one ``ConfigErrors``; nothing if none."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(list(self.errors))


def require_writable(path: Path, key: str) -> None:
    """Raise ``ConfigError`` naming ``key`` unless ``path`` is, or could be created as, a folder this process may
    write in: its nearest existing ancestor is a directory where a file can be made (checked before any work; the
    probe file is gone at once). Permission bits alone pass root on read-only pseudo-filesystems (/proc, /sys)."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not _can_make_a_file_in(existing):
        why = "is a file" if not existing.is_dir() else "is not writable"
        raise ConfigError(
            f"{key}: {path} is not writable ({existing} {why}): give a folder this user may create and write in"
        )


def _can_make_a_file_in(folder: Path) -> bool:
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def require(condition: bool, key: str, message: str) -> None:
    """Raise ``ConfigError("<key>: <message>")`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"{key}: {message}")


# The AWS error codes (as pyarrow's S3 errors spell them) of a request S3 refused for its credentials or their
# permissions. A refused HEAD request has no body to say which: it reads ACCESS_DENIED for an unknown key too.
S3_REFUSALS = {
    "ACCESS_DENIED",
    "INVALID_ACCESS_KEY_ID",
    "SIGNATURE_DOES_NOT_MATCH",
    "INVALID_SIGNATURE",
    "INCOMPLETE_SIGNATURE",
    "INVALID_CLIENT_TOKEN_ID",
    "UNRECOGNIZED_CLIENT",
    "MISSING_AUTHENTICATION_TOKEN",
    "REQUEST_EXPIRED",
    "EXPIRED_TOKEN",
}


def s3_refusal(err: OSError, where: str, needs: str) -> ConfigError | None:
    """A ``ConfigError`` saying that S3 refused the request behind ``err`` (pyarrow's error) for ``where`` (the key
    and path), naming the access key and what to check; None when ``err`` is another failure (an outage, a missing
    file). ``needs``: what the key must be allowed to do there, in words."""
    code = re.search(r"AWS Error (\w+)", str(err))
    if code is None or code.group(1) not in S3_REFUSALS:
        return None
    key = os.environ.get("AWS_ACCESS_KEY_ID")
    who = f"access key {key}" if key else "the credentials AWS's default chain found (no AWS_ACCESS_KEY_ID set)"
    operation = re.search(r"during (\w+) operation", str(err))
    return ConfigError(
        f"{where}: S3 refuses {who} ({code.group(1)}"
        f"{f' on {operation.group(1)}' if operation else ''}): check AWS_ACCESS_KEY_ID / "
        f"AWS_SECRET_ACCESS_KEY, or that the bucket policy lets this key {needs}"
    )
