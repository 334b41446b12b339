"""What a Tune trial receives and who it is: typed payloads, and the one way a trial's config is built.

A trial's identity (run name, seed, what it stands for, the study's parent run) is a typed value,
applied as overrides to the trial's config *before* it is built and validated, in the trial's own
process: the config is never rewritten after validation, and grid trials and search trials are
built and checked the same way (``trial_config``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distalign.config import ExperimentConfig, TrainConfig, apply_override, from_dict, validate

TAG = "distalign.study."  # prefix of the tags that say what a trial stands for


@dataclass(frozen=True)
class TrialIdentity:
    name: str  # the trial's run.name (and MLflow run name)
    seed: int  # its train.seed (a search's repeats: base seed + repeat index)
    tags: dict[str, str] = field(default_factory=dict)  # what it stands for, as tracking.tags
    parent_run_id: str = ""  # the study's MLflow parent run

    def overrides(self) -> list[str]:
        return [
            f"run.name={json.dumps(self.name)}",
            f"train.seed={self.seed}",
            f"tracking.tags={json.dumps(self.tags)}",
            f"tracking.parent_run_id={json.dumps(self.parent_run_id)}",
        ]


def trial_config(config: dict[str, Any], identity: TrialIdentity, point: Sequence[str] = ()) -> ExperimentConfig:
    """The validated config of one trial: ``config`` (a config's ``to_dict()``, paths resolved), the
    overrides of its search ``point``, then its identity."""
    import distalign.transfer.training  # noqa: F401  (registers eval.transfer's check: validate runs it)

    data = copy.deepcopy(config)
    for override in [*point, *identity.overrides()]:
        apply_override(data, override, ExperimentConfig)
    built = from_dict(ExperimentConfig, data)
    validate(built)
    return built


@dataclass(frozen=True)
class GridTrial:
    """One grid trial, as Tune's ``grid_search`` hands it to the trial function."""

    identity: TrialIdentity
    stands_for: dict[str, Any]  # grid point and language sample, for the study's table
    config: dict[str, Any]  # the trial's config (validated on the driver), as plain data


@dataclass(frozen=True)
class SearchBase:
    """What every search trial starts from; Optuna's suggested point travels beside it (Tune resolves it)."""

    study: str
    config: dict[str, Any]  # the base config, as plain data
    parent_run_id: str = ""

    def seed(self, repeat: int) -> int:
        """The seed of a configuration's ``repeat``-th run (Tune's ``__trial_index__``)."""
        return self.config["train"]["seed"] + repeat

    def identity(self, trial_id: str, point: dict[str, Any], repeat: int) -> TrialIdentity:
        """A suggested trial's identity: named after its Tune trial, seed the base seed + its repeat index."""
        seed = self.seed(repeat)
        tags = {f"{TAG}{k}": json.dumps(v) for k, v in point.items()} | {f"{TAG}train.seed": str(seed)}
        return TrialIdentity(f"{self.study}-{trial_id}", seed, tags, self.parent_run_id)

    @staticmethod
    def point_overrides(point: dict[str, Any]) -> list[str]:
        return [f"{key}={json.dumps(value)}" for key, value in point.items()]


def describe_trial(tune_config: dict[str, Any], trial_id: str) -> tuple[str, dict[str, Any], int]:
    """A Tune trial's name, what it stands for (grid point and language sample, or the suggested point and
    seed) and its ``train.max_steps``, from the config Tune resolved for it."""
    trial = tune_config["trial"]
    if isinstance(trial, SearchBase):
        stands_for = {**tune_config["point"], "train.seed": trial.seed(tune_config.get("__trial_index__", 0))}
        return f"{trial.study}-{trial_id}", stands_for, trial.config["train"]["max_steps"]
    return trial.identity.name, trial.stands_for, trial.config["train"]["max_steps"]


def trial_train(tune_config: dict[str, Any]) -> TrainConfig:
    """The ``train`` section of the config a Tune trial runs (a search's point applied over its base)."""
    trial = tune_config["trial"]
    section = dict(trial.config["train"])
    if isinstance(trial, SearchBase):
        section |= {k.split(".", 1)[1]: v for k, v in tune_config["point"].items() if k.startswith("train.")}
    return from_dict(TrainConfig, section)
