"""The experiment configuration: typed dataclasses, YAML in, dotted ``key=value`` overrides.

Everything a run needs is in one ``ExperimentConfig``. ``load_config`` validates it completely (unknown keys, wrong
types, missing files, impossible values, and the checks higher layers register for the sections whose rules they
own: ``register_section_check``) before any Ray resources are taken, and every error names the dotted key that is
wrong. The plugins below it see their own sections and ``ExperimentConfig.run_facts()``, never the whole config.
Read once: values derived from it later (the steps of ``train.epochs``, a trial's seed and name) live in typed
values of their own, never in it.

- ``loader``: generic typed YAML -> dataclasses, dotted overrides
- ``schema``: the experiment's sections and their checks
- ``environment``: DISTALIGN_HOME, the MLflow store, absolute paths
"""

from __future__ import annotations

import os
from pathlib import Path

from distalign.config.environment import distalign_home, resolve_path, resolve_paths, resolve_tracking_uri
from distalign.config.loader import apply_override, flatten, from_dict, load_dataclass, read_mapping
from distalign.config.schema import (
    AdaptersConfig,
    DataConfig,
    EvalConfig,
    ExperimentConfig,
    ModelConfig,
    ObjectivesConfig,
    RunConfig,
    StorageConfig,
    TrackingConfig,
    TrainConfig,
    default_objectives,
    objectives_from_dict,
    register_section_check,
    validate,
)
from distalign.data.sources import CorpusSource, DictionarySource, StaticVectorsSource
from distalign.data.synthetic import SyntheticConfig
from distalign.errors import ConfigError
from distalign.models.loading import TinyModelConfig

__all__ = [
    "AdaptersConfig",
    "ConfigError",
    "CorpusSource",
    "DataConfig",
    "DictionarySource",
    "EvalConfig",
    "ExperimentConfig",
    "ModelConfig",
    "ObjectivesConfig",
    "RunConfig",
    "StaticVectorsSource",
    "StorageConfig",
    "SyntheticConfig",
    "TinyModelConfig",
    "TrackingConfig",
    "TrainConfig",
    "apply_override",
    "default_objectives",
    "distalign_home",
    "flatten",
    "from_dict",
    "load_config",
    "load_dataclass",
    "objectives_from_dict",
    "read_config",
    "read_mapping",
    "register_section_check",
    "resolve_path",
    "resolve_paths",
    "resolve_tracking_uri",
    "validate",
]


def read_config(path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> ExperimentConfig:
    """The experiment config of a YAML file plus overrides, keys and types checked, with absolute paths; its values
    not validated yet (``distalign check`` reports the problems of ``validate`` beside those of the storage, ...)."""
    config = load_dataclass(ExperimentConfig, path, overrides)
    resolve_paths(config, base=Path(path).parent if path is not None else Path.cwd())
    return config


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> ExperimentConfig:
    """The experiment config of a YAML file plus overrides, with absolute paths, completely validated."""
    config = read_config(path, overrides)
    validate(config)
    return config
