"""Ray Tune studies: a grid over config keys, each trial a full TorchTrainer run (Train V2 pattern).

Study file (``jobs/configs/quickstart_tune.yaml``)::

    study: quickstart-tune          # MLflow parent run name; trials are <study>-000, <study>-001, ...
    base: quickstart.yaml           # experiment config, relative to this file
    overrides: [train.max_steps=60] # applied to every trial
    grid:                           # every combination is one trial
      train.lr: [1.0e-3, 3.0e-4]
    metric: eval/bli/avg/mrr
    mode: max
    max_concurrent_trials: 1

Every trial's config is built and validated on the driver before Ray starts. MLflow gets one
parent run for the study and a nested child run per trial; the parent holds the trial table (CSV)
and a plot of the metric per trial.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distalign.config import ConfigError, ExperimentConfig, from_dict, load_config


@dataclass
class StudyConfig:
    study: str = "study"
    base: str = ""
    overrides: list[str] = field(default_factory=list)
    grid: dict[str, list] = field(default_factory=dict)
    metric: str = "eval/bli/avg/mrr"
    mode: str = "max"
    max_concurrent_trials: int = 1
    trial_cpus: float = 0.1  # the trial function only waits on its TorchTrainer


def load_study(path: str | Path, extra_overrides: list[str] | None = None) -> tuple[StudyConfig, dict[str, ExperimentConfig]]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"study file not found: {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    unknown = set(raw) - set(StudyConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"{path}: unknown study keys {sorted(unknown)}")
    study = StudyConfig(**raw)
    if study.mode not in ("min", "max"):
        raise ConfigError(f"{path}: mode must be min or max")
    if not study.grid or not all(isinstance(v, list) and v for v in study.grid.values()):
        raise ConfigError(f"{path}: grid must map config keys to non-empty lists")
    base = (path.parent / study.base) if study.base else None
    if base is None or not base.is_file():
        raise ConfigError(f"{path}: base config not found: {base}")
    keys = list(study.grid)
    trials = {}
    for i, values in enumerate(itertools.product(*study.grid.values())):
        name = f"{study.study}-{i:03d}"
        point = [f"{k}={json.dumps(v)}" for k, v in zip(keys, values)]  # JSON is valid YAML
        trials[name] = load_config(base, study.overrides + (extra_overrides or []) + point + [f"run.name={name}"])
    return study, trials


def _trial(params: dict[str, Any]) -> None:
    from ray.tune.integration.ray_train import TuneReportCallback

    from distalign.train.trainer import run_training

    run_training(from_dict(ExperimentConfig, params["trial"]["config"]), callbacks=[TuneReportCallback()])


def run_study(path: str | Path, extra_overrides: list[str] | None = None):
    import ray
    from ray import tune

    from distalign.ray_session import ensure_ray
    from distalign.tracking import client_for, tracked_run
    from distalign.train.trainer import ray_storage_path, storage_filesystem

    study, trials = load_study(path, extra_overrides)
    first = next(iter(trials.values()))
    print(f"[distalign] study {study.study}: {len(trials)} trials over {list(study.grid)}", flush=True)
    ensure_ray()
    with tracked_run(first.tracking.uri, first.tracking.experiment, study.study, first.storage.path,
                     {f"grid.{k}": v for k, v in study.grid.items()} | {"metric": study.metric},
                     yaml.safe_load(Path(path).read_text())) as parent_id:
        space = []
        for name, config in trials.items():
            config.tracking.parent_run_id = parent_id
            point = {k: v for k, v in config.flat().items() if k in study.grid}
            space.append({"name": name, "point": point, "config": config.to_dict()})
        tuner = tune.Tuner(
            tune.with_resources(_trial, {"cpu": study.trial_cpus}),
            param_space={"trial": tune.grid_search(space)},
            tune_config=tune.TuneConfig(max_concurrent_trials=study.max_concurrent_trials),
            run_config=tune.RunConfig(name=study.study, storage_path=ray_storage_path(first),
                                      storage_filesystem=storage_filesystem(first)),
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
