"""What a run started again under the same ``run.name`` (a resume) must agree with: its newest checkpoint.

A resume continues the checkpoint's own model and optimizer state, and the run's schedule as its first start
derived it (``kept_schedule``): ``train.epochs`` counts steps of W workers' batches, and a resume on another W
would otherwise stretch or shrink the learning-rate schedule it is in the middle of. A config that names another
engine, another model, or adapters where the checkpoint has none (or the other way round) would fail inside the
workers, retried ``train.max_failures`` times, or (a changed model) train the old model silently. Checked on the
driver before anything is prepared, from the files of the checkpoint where the run keeps them (local or object
storage).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow.fs

from distalign.checkpoint import DEEPSPEED_DIR, MODEL_DIR, OPTIMIZER_FILE, STATE_FILE
from distalign.config import ExperimentConfig
from distalign.errors import ConfigError
from distalign.models.adapters import ADAPTER_WEIGHTS
from distalign.preparation.schedule import RunSchedule
from distalign.storage import run_location

SCHEDULE_FILE = "schedule.json"  # in the run's directory: the schedule its first start derived
CHECKPOINT_PREFIX = "checkpoint_"  # Ray Train's directory names, which sort by time
# the model settings a checkpoint's config.json must share with the configured model
ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


def newest_checkpoint(fs: pyarrow.fs.FileSystem, root: str) -> str | None:
    """The newest checkpoint directory of the run with a trainer state (one being written has none yet)."""
    infos = fs.get_file_info(pyarrow.fs.FileSelector(root, allow_not_found=True))
    names = sorted(
        i.path for i in infos if i.type == pyarrow.fs.FileType.Directory and i.base_name.startswith(CHECKPOINT_PREFIX)
    )
    return next(
        (path for path in reversed(names) if fs.get_file_info(f"{path}/{STATE_FILE}").type == pyarrow.fs.FileType.File),
        None,
    )


def configured_architecture(config: ExperimentConfig) -> dict | None:
    """``ARCHITECTURE_KEYS`` of the model the config names (None for a hub name: not read here, no download)."""
    m = config.model
    if m.name_or_path == "tiny":
        return {
            "model_type": "xlm-roberta",
            "hidden_size": m.tiny.hidden_size,
            "num_hidden_layers": m.tiny.num_layers,
            "num_attention_heads": m.tiny.num_heads,
            "intermediate_size": m.tiny.intermediate_size,
        }
    path = Path(m.name_or_path) / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def check_resume(config: ExperimentConfig) -> None:
    """A ``ConfigError`` naming the key, the checkpoint and what to do where the config cannot resume the run of
    the same ``run.name`` (module docstring); nothing to check for a run not started before."""
    fs, root, scheme = run_location(config.storage.path, config.storage.endpoint_url, config.run.name)
    checkpoint = newest_checkpoint(fs, root)
    if checkpoint is None:
        return

    def exists(name: str) -> bool:
        return fs.get_file_info(f"{checkpoint}/{name}").type != pyarrow.fs.FileType.NotFound

    where = f"run.name={config.run.name} resumes from {scheme}{checkpoint}"
    other_run = "or give a new run.name to start another run"
    saved_engine = "deepspeed" if exists(DEEPSPEED_DIR) else "ddp" if exists(OPTIMIZER_FILE) else None
    if saved_engine and saved_engine != config.train.engine:
        raise ConfigError(
            f"train.engine: {where}, saved by train.engine={saved_engine}: set train.engine="
            f"{saved_engine} to resume it, {other_run}"
        )
    saved_adapters = exists(f"{MODEL_DIR}/{ADAPTER_WEIGHTS}")
    if saved_adapters != config.model.adapters.enabled:
        trained = "with" if saved_adapters else "without"
        raise ConfigError(
            f"model.adapters.enabled: {where}, which was trained {trained} adapters: set "
            f"model.adapters.enabled={str(saved_adapters).lower()} to resume it, {other_run}"
        )
    wanted = configured_architecture(config)
    if wanted is None or not exists(f"{MODEL_DIR}/config.json"):
        return
    with fs.open_input_stream(f"{checkpoint}/{MODEL_DIR}/config.json") as stream:
        saved = json.loads(stream.read().decode())
    differ = {key: (saved.get(key), wanted.get(key)) for key in ARCHITECTURE_KEYS if saved.get(key) != wanted.get(key)}
    if differ:
        shown = ", ".join(f"{key} {old} (checkpoint) vs {new}" for key, (old, new) in differ.items())
        raise ConfigError(
            f"model.name_or_path: {where}, whose model is another architecture than "
            f"model.name_or_path={config.model.name_or_path} ({shown}): a resume continues the "
            f"checkpoint's model; name that model to resume, {other_run}"
        )


def kept_schedule(config: ExperimentConfig, derived: RunSchedule) -> RunSchedule:
    """The run's schedule: on a resume (a checkpoint to continue), the one its first start derived, where the config
    still asks for the same (``train.epochs``, ``eval.every_epochs``, ``train.max_steps``, ``eval.every``): a
    schedule in epochs is counted in steps of the first start's W workers, and kept so on any W; else ``derived``
    (this config's, from now on the run's)."""
    t, e = config.train, config.eval
    asked = [t.epochs, e.every_epochs, t.max_steps, e.every]
    fs, root, _ = run_location(config.storage.path, config.storage.endpoint_url, config.run.name)
    path = f"{root}/{SCHEDULE_FILE}"
    if newest_checkpoint(fs, root) is not None and fs.get_file_info(path).type == pyarrow.fs.FileType.File:
        with fs.open_input_stream(path) as stream:
            saved = json.loads(stream.read().decode())
        if saved["asked"] == asked:
            return RunSchedule(**saved["schedule"])
    fs.create_dir(root, recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(json.dumps({"asked": asked, "schedule": dataclasses.asdict(derived)}).encode())
    return derived
