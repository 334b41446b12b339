"""Running a study: Ray Tune over the trials of a study file, each trial a full TorchTrainer run (Train V2
pattern: the trial function runs ``run_training`` with a ``TuneReportCallback``), one MLflow parent run
for the study with a nested run per trial. A study started again with the same name (and storage)
resumes: Tune restores it and runs only the trials that had not finished."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from distalign.config import ExperimentConfig, from_dict
from distalign.tuning.report import log_study_summary, tag_value
from distalign.tuning.study import TAG, load_study

log = logging.getLogger("distalign")


def _trial(params: dict[str, Any]) -> None:
    from ray.tune.integration.ray_train import TuneReportCallback

    from distalign.train.trainer import run_training

    run_training(from_dict(ExperimentConfig, params["trial"]["config"]), callbacks=[TuneReportCallback()])


def run_study(path: str | Path, extra_overrides: list[str] | None = None) -> list[dict[str, Any]]:
    """Run a Tune study (``distalign.tuning.study``) on a local Ray cluster or the one in RAY_ADDRESS.

    Every trial's config is loaded and validated first (``load_study``), then an MLflow parent run is
    opened for the study and Tune runs the trials, each a TorchTrainer run logged as a child run.
    Returns one row per trial (name, what it stands for, the study metric, error); tables and plots go
    to the parent run. Raises ``RuntimeError`` naming the failed trials, after logging the summary.
    """
    from ray import tune

    from distalign.logs import configure
    from distalign.ray_session import ensure_ray
    from distalign.storage import ray_storage_path, storage_filesystem
    from distalign.tracking import check_reachable, client_for, tracked_run

    configure()
    study, trials = load_study(path, extra_overrides)
    first = next(iter(trials.values()))
    check_reachable(first.tracking.uri)
    log.info("study %s: %d trials over %s%s", study.study, len(trials), list(study.grid),
             " and language samples" if study.language_samples.size else "")
    ensure_ray()
    storage_path = ray_storage_path(first.storage.path, first.storage.endpoint_url)
    filesystem = storage_filesystem(first.storage.endpoint_url)
    with tracked_run(first.tracking.uri, first.tracking.experiment, study.study, first.storage.path,
                     {f"grid.{k}": v for k, v in study.grid.items()} | {"metric": study.metric},
                     dataclasses.asdict(study)) as parent_id:
        space = []
        for name, config in trials.items():
            config.tracking.parent_run_id = parent_id
            stands_for = {k.removeprefix(TAG): tag_value(v) for k, v in config.tracking.tags.items()}
            space.append({"name": name, "stands_for": stands_for, "config": config.to_dict()})
        trainable = tune.with_resources(_trial, {"cpu": study.trial_cpus})
        experiment = f"{storage_path.rstrip('/')}/{study.study}"
        if tune.Tuner.can_restore(experiment, storage_filesystem=filesystem):
            log.info("study %s: resuming; finished trials are not run again", study.study)
            tuner = tune.Tuner.restore(experiment, trainable, resume_errored=True, storage_filesystem=filesystem)
        else:
            tuner = tune.Tuner(
                trainable,
                param_space={"trial": tune.grid_search(space)},
                tune_config=tune.TuneConfig(max_concurrent_trials=study.max_concurrent_trials),
                run_config=tune.RunConfig(name=study.study, storage_path=storage_path, storage_filesystem=filesystem,
                                          failure_config=tune.FailureConfig(max_failures=study.max_failures)),
            )
        results = tuner.fit()
        rows = []
        for result in results:
            trial = result.config["trial"]
            rows.append({"trial": trial["name"], **trial["stands_for"],
                         study.metric: (result.metrics or {}).get(study.metric),
                         "error": str(result.error) if result.error else ""})
        rows.sort(key=lambda row: row["trial"])
        log_study_summary(client_for(first.tracking.uri), parent_id, study, rows)
        failed = [r["trial"] for r in rows if r["error"]]
        if failed:
            raise RuntimeError(f"study {study.study}: trials failed: {failed}")
    return rows
