"""Ray Tune studies: a grid over config keys, each trial a full TorchTrainer run (Train V2 pattern).

Study file (``jobs/configs/quickstart_tune.yaml``; its keys are the fields of ``StudyConfig``)::

    study: quickstart-tune          # MLflow parent run name; trials are <study>-000, <study>-001, ...
    base: quickstart.yaml           # experiment config, relative to this file
    overrides: [train.max_steps=60] # applied to every trial
    grid:                           # every combination is one trial
      train.lr: [1.0e-3, 3.0e-4]
    metric: eval/bli/avg/mrr
    mode: max
    max_concurrent_trials: 1

The file is read by the loader of experiment configs (``distalign.config.load_dataclass``): an
unknown key or a wrong type is an error naming the dotted key. Every trial's config is built and
validated on the driver before Ray starts. MLflow gets one parent run for the study and a nested
child run per trial; the parent holds the trial table (CSV) and a plot of the metric per trial.
"""

from __future__ import annotations

import dataclasses
import logging
import itertools
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from distalign.config import ConfigError, ExperimentConfig, from_dict, load_config, load_dataclass

log = logging.getLogger("distalign")


@dataclass
class StudyConfig:
    study: str = "study"  # MLflow parent run name; trials are <study>-000, <study>-001, ...
    base: str = ""  # experiment config (absolute, or relative to the study file)
    overrides: list[str] = field(default_factory=list)  # dotted key=value, applied to every trial
    grid: dict[str, list[Any]] = field(default_factory=dict)  # config key -> values; every combination is a trial
    metric: str = "eval/bli/avg/mrr"  # reported per trial; the best trial is tagged on the parent run
    mode: Literal["min", "max"] = "max"
    max_concurrent_trials: int = 1
    trial_cpus: float = 0.1  # the trial function only waits on its TorchTrainer
    # times Tune starts a failed trial again (its run resumes from its checkpoints); lost workers inside a
    # trial are train.max_failures' business
    max_failures: int = 1


STUDY_KEYS = {f.name for f in dataclasses.fields(StudyConfig)}


def _is_study_override(override: str) -> bool:
    return override.split("=", 1)[0].split(".", 1)[0].strip() in STUDY_KEYS


def load_study(path: str | Path,
               extra_overrides: list[str] | None = None) -> tuple[StudyConfig, dict[str, ExperimentConfig]]:
    """The study file and the validated experiment config of every trial, by trial name.

    An extra override whose first key is a study key (``grid.train.lr=[1e-3]``,
    ``max_concurrent_trials=2``) changes the study; any other applies to every trial (``train.max_steps=10``).
    """
    path = Path(path)
    extra_overrides = extra_overrides or []
    study = load_dataclass(StudyConfig, path, [o for o in extra_overrides if _is_study_override(o)])
    if not study.grid:
        raise ConfigError("grid: must map config keys to non-empty lists of values")
    for key, values in study.grid.items():
        if not values:
            raise ConfigError(f"grid.{key}: must be a non-empty list of values")
    if study.max_concurrent_trials < 1:
        raise ConfigError("max_concurrent_trials: must be >= 1")
    if study.trial_cpus <= 0:
        raise ConfigError("trial_cpus: must be > 0")
    base = path.parent / study.base
    if not study.base or not base.is_file():
        raise ConfigError(f"base: experiment config not found: {base if study.base else '(empty)'}")
    trial_overrides = study.overrides + [o for o in extra_overrides if not _is_study_override(o)]
    keys = list(study.grid)
    trials = {}
    for i, values in enumerate(itertools.product(*study.grid.values())):
        name = f"{study.study}-{i:03d}"
        point = [f"{k}={json.dumps(v)}" for k, v in zip(keys, values)]  # JSON is valid YAML
        trials[name] = load_config(base, trial_overrides + point + [f"run.name={name}"])
    return study, trials


def _trial(params: dict[str, Any]) -> None:
    from ray.tune.integration.ray_train import TuneReportCallback

    from distalign.train.trainer import run_training

    run_training(from_dict(ExperimentConfig, params["trial"]["config"]), callbacks=[TuneReportCallback()])


def run_study(path: str | Path, extra_overrides: list[str] | None = None) -> list[dict[str, Any]]:
    """Run a Tune study (see the module docstring) on a local Ray cluster or the one in RAY_ADDRESS.

    Every trial's config is loaded and validated first (``load_study``), then an MLflow parent run is
    opened for the study and Tune runs the grid, each trial a TorchTrainer run logged as a child run.
    Returns one row per trial (name, grid point, the study metric, error); the table and a plot go to
    the parent run. Raises ``RuntimeError`` naming the failed trials, after logging the summary.
    """
    from ray import tune

    from distalign.ray_session import ensure_ray
    from distalign.storage import ray_storage_path, storage_filesystem
    from distalign.tracking import check_reachable, client_for, tracked_run

    study, trials = load_study(path, extra_overrides)
    first = next(iter(trials.values()))
    check_reachable(first.tracking.uri)
    log.info("study %s: %d trials over %s", study.study, len(trials), list(study.grid))
    ensure_ray()
    with tracked_run(first.tracking.uri, first.tracking.experiment, study.study, first.storage.path,
                     {f"grid.{k}": v for k, v in study.grid.items()} | {"metric": study.metric},
                     dataclasses.asdict(study)) as parent_id:
        space = []
        for name, config in trials.items():
            config.tracking.parent_run_id = parent_id
            point = {k: v for k, v in config.flat().items() if k in study.grid}
            space.append({"name": name, "point": point, "config": config.to_dict()})
        tuner = tune.Tuner(
            tune.with_resources(_trial, {"cpu": study.trial_cpus}),
            param_space={"trial": tune.grid_search(space)},
            tune_config=tune.TuneConfig(max_concurrent_trials=study.max_concurrent_trials),
            run_config=tune.RunConfig(
                name=study.study, storage_path=ray_storage_path(first.storage.path, first.storage.endpoint_url),
                storage_filesystem=storage_filesystem(first.storage.endpoint_url),
                failure_config=tune.FailureConfig(max_failures=study.max_failures)),
        )
        results = tuner.fit()
        rows = []
        for result in results:
            trial = result.config["trial"]
            value = (result.metrics or {}).get(study.metric)
            rows.append({"trial": trial["name"], **trial["point"], study.metric: value,
                         "error": str(result.error) if result.error else ""})
        _log_study_summary(client_for(first.tracking.uri), parent_id, study, rows)
        failed = [r["trial"] for r in rows if r["error"]]
        if failed:
            raise RuntimeError(f"study {study.study}: trials failed: {failed}")
    return rows


def _log_study_summary(client, parent_id: str, study: StudyConfig, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    table = pd.DataFrame(rows)
    scored = table.dropna(subset=[study.metric])
    print(table.to_string(index=False), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        table.to_csv(Path(tmp) / "trials.csv", index=False)
        client.log_artifact(parent_id, str(Path(tmp) / "trials.csv"))
        if len(scored):
            best = scored.sort_values(study.metric, ascending=study.mode == "min").iloc[0]
            client.log_metric(parent_id, f"best/{study.metric}", float(best[study.metric]))
            client.set_tag(parent_id, "distalign.best_trial", best["trial"])
            fig, ax = plt.subplots(figsize=(max(4, 0.8 * len(scored)), 3))
            labels = [", ".join(f"{k}={row[k]}" for k in study.grid) for _, row in scored.iterrows()]
            ax.bar(range(len(scored)), scored[study.metric])
            ax.set_xticks(range(len(scored)), labels, rotation=30, ha="right", fontsize=7)
            ax.set_ylabel(study.metric)
            ax.set_title(study.study)
            fig.tight_layout()
            fig.savefig(Path(tmp) / "trials.png", dpi=120)
            plt.close(fig)
            client.log_artifact(parent_id, str(Path(tmp) / "trials.png"))
