"""The data home: where the benchmark resources live, in the layout the readers expect.

``$DISTALIGN_DATA``, else ``$XDG_CACHE_HOME/distalign/data``, else ``~/.cache/distalign/data``. On a cluster, point
``DISTALIGN_DATA`` at a shared filesystem (fetch once) or fetch on each node.
"""

from __future__ import annotations

import os
from pathlib import Path

from distalign.benchmark_data.catalog import DataFile, files_of
from distalign.errors import InputError

DATA_ENV = "DISTALIGN_DATA"
MIRROR_ENV = "DISTALIGN_DATA_MIRROR"
# the Hub's and datasets' switches too: one setting for an air-gapped node
OFFLINE_ENVS = ("DISTALIGN_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def data_home() -> Path:
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache / "distalign" / "data"


def eval_dir() -> Path:
    """The benchmark folder of ``distalign eval`` (``suite.eval_dir``'s default)."""
    return data_home() / "eval"


def offline() -> bool:
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in OFFLINE_ENVS)


def is_present(file: DataFile, home: Path) -> bool:
    """There with its catalogued size (the hash was checked when it was fetched, before it got its name)."""
    path = home / file.path
    return path.is_file() and path.stat().st_size == file.size


def missing_files(name: str, home: Path) -> list[DataFile]:
    return [f for f in files_of(name) if not is_present(f, home)]


def fetch_command(name: str) -> str:
    return f"distalign data fetch {name}"


def not_fetched(name: str, what: str) -> InputError:
    """The error of a benchmark that is not there: what was looked for and the command that gets it."""
    return InputError(
        f"{what} not found: fetch the {name} benchmark with `{fetch_command(name)}` (into the data "
        f"home {data_home()}, set by ${DATA_ENV})"
    )
