"""Where a run's files are: DISTALIGN_HOME, the MLflow store, and every local path made absolute.

Resolved once when the config is loaded, so Ray workers (other working directories) see the same files.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from distalign.errors import require_writable

if TYPE_CHECKING:
    from distalign.config.schema import ExperimentConfig


def distalign_home() -> Path:
    """Base for relative outputs (mlflow.db, runs/): $DISTALIGN_HOME or the working directory."""
    return Path(os.environ.get("DISTALIGN_HOME") or os.getcwd()).resolve()


def command_log(command: str) -> Path:
    """Where a command's Ray and library output goes: $DISTALIGN_HOME/logs/<command>-<time>.log."""
    return distalign_home() / "logs" / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.log"


def command_output_dir(flag: str, default_name: str) -> Path:
    """A command's ``--output-dir`` value ``flag`` (default $DISTALIGN_HOME/<default_name>), checked writable before
    the command's work starts."""
    out = Path(flag).resolve() if flag else distalign_home() / default_name
    require_writable(out, "--output-dir")
    return out


def resolve_tracking_uri(explicit: str = "") -> str:
    """The MLflow store: ``explicit``, else $MLFLOW_TRACKING_URI, else sqlite:///<distalign_home()>/mlflow.db."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{distalign_home() / 'mlflow.db'}"


def resolve_path(p: str, base: Path) -> str:
    """An absolute local path (URIs and "" unchanged): relative to the working directory if it exists there,
    else to ``base`` (the config file's folder) if it exists there, else to the working directory."""
    if not p or "://" in p:
        return p
    q = Path(p).expanduser()
    if q.is_absolute():
        return str(q)
    for candidate in (Path.cwd() / q, base / q):
        if candidate.exists():
            return str(candidate.resolve())
    return str((Path.cwd() / q).resolve())


def resolve_paths(config: ExperimentConfig, base: Path) -> None:
    """Make every local path absolute so Ray workers (other working dirs) see the same files."""
    data = config.data
    data.constraints = [resolve_path(p, base) for p in data.constraints]
    for src in (
        data.dictionaries + data.eval_dictionaries + data.corpora + data.validation_corpora + data.static_vectors
    ):
        src.path = resolve_path(src.path, base)
    for pair_source in data.parallel:
        pair_source.path, pair_source.path1, pair_source.path2 = (
            resolve_path(p, base) for p in (pair_source.path, pair_source.path1, pair_source.path2)
        )
    for src in data.corpora + data.validation_corpora:  # a local save_to_disk directory, not a hub dataset name
        if src.hf_dataset and Path(resolve_path(src.hf_dataset, base)).is_dir():
            src.hf_dataset = resolve_path(src.hf_dataset, base)
    if config.model.name_or_path != "tiny" and Path(config.model.name_or_path).expanduser().exists():
        config.model.name_or_path = str(Path(config.model.name_or_path).expanduser().resolve())
    config.storage.path = config.storage.path or os.environ.get("DISTALIGN_STORAGE") or "runs"
    config.storage.endpoint_url = config.storage.endpoint_url or os.environ.get("DISTALIGN_STORAGE_ENDPOINT", "")
    if not config.storage_is_remote:
        storage = Path(config.storage.path).expanduser()
        config.storage.path = str(storage if storage.is_absolute() else distalign_home() / storage)
    config.tracking.uri = resolve_tracking_uri(config.tracking.uri)
    config.train.deepspeed_config_file = resolve_path(config.train.deepspeed_config_file, base)
    config.eval.vocab_dir = resolve_path(config.eval.vocab_dir, base)
    config.eval.transfer.data_dir = resolve_path(config.eval.transfer.data_dir, base)
    if data.output_dir:
        data.output_dir = str(Path(data.output_dir).expanduser().resolve())
    elif config.storage_is_remote:
        data.output_dir = str(distalign_home() / "runs" / config.run.name / "data")
    else:
        data.output_dir = str(Path(config.storage.path) / config.run.name / "data")
    if data.cache_dir:
        data.cache_dir = str(Path(data.cache_dir).expanduser().resolve())
    else:  # remote storage: a driver-local cache (what a run needs is staged under its own name)
        data.cache_dir = str((distalign_home() if config.storage_is_remote else Path(config.storage.path)) / "cache")
