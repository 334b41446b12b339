"""Running a study: Ray Tune over the trials of a study file, each trial a full training run (Train V2
pattern: the trial function runs ``run_experiment``, training with a ``TuneReportCallback`` then ``eval.transfer``,
as ``distalign train`` does; a one-worker trial trains in
the trial's process, which Tune reuses for the next trial), one MLflow parent run for the study with a nested
run per trial. A study started again with the same name (and storage)
resumes: Tune restores it and runs only the trials that had not finished."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from distalign.config import ExperimentConfig
from distalign.studies.progress import TrialProgress
from distalign.studies.shared_inputs import SharedInputs, check_trials, share
from distalign.studies.study import load_study
from distalign.studies.study_results import child_runs, log_study_summary, tag_value
from distalign.studies.trials import (
    TAG,
    GridTrial,
    SearchBase,
    TrialIdentity,
    describe_trial,
    trial_config,
    trial_train,
)
from distalign.train.trial_resources import (
    concurrent_trials,
    largest_trial,
    trial_function_resources,
    trial_resources,
)

log = logging.getLogger("distalign")
STOPPED_EARLY_TAG = "distalign.stopped_early"  # on a trial's run: the step at which the scheduler stopped it


def _run_trial(config: ExperimentConfig, shared: SharedInputs) -> None:
    """One trial's training run on the inputs the study prepared for it (``shared``), every in-loop evaluation
    reported to Tune; with test pairs (``eval.test_languages``) and ``eval.transfer``, their scores (the selected
    checkpoint's, the transferred model's) are its last report."""
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback

    from distalign.logs import configure
    from distalign.studies.experiment import run_experiment
    from distalign.train.preflight import check_run

    configure()  # the lines below reach the terminal from the trial's first one on
    # its own checks (its storage, its checkpoints to resume), on the shared inputs: not read again
    checked = check_run(config, resources=False, prepared=shared.prepared(config))
    # a one-worker trial trains in this process and reports itself; a worker group reports through the callback
    outcome = run_experiment(config, checked=checked, callbacks=[TuneReportCallback()], trial_report=tune.report)
    if outcome.final_metrics:
        tune.report(outcome.final_metrics | {"step": outcome.training.metrics.get("step")})


def _trial(params: dict[str, Any], shared: SharedInputs) -> None:
    """A grid trial: its config, validated here as every trial is (``trial_config``)."""
    trial: GridTrial = params["trial"]
    _run_trial(trial_config(trial.config, trial.identity), shared)


def _search_trial(params: dict[str, Any], shared: SharedInputs) -> None:
    """A trial Optuna suggested: the base config with the suggested point, run ``__trial_index__`` of its
    configuration (seed train.seed + index), named after its Tune trial."""
    from ray import tune

    base: SearchBase = params["trial"]
    point = params["point"]
    identity = base.identity(tune.get_context().get_trial_id(), point, params.get("__trial_index__", 0))
    _run_trial(trial_config(base.config, identity, base.point_overrides(point)), shared)


def _trainable(study, function, shared: SharedInputs):
    """The trial function with the study's prepared inputs (their references) and what each trial holds itself
    (``trial_function_resources``), from its config."""
    from ray import tune

    def resources(tune_config: dict[str, Any]) -> tune.PlacementGroupFactory:
        return tune.PlacementGroupFactory([trial_function_resources(study, trial_train(tune_config))])

    return tune.with_resources(tune.with_parameters(function, shared=shared), resources)


def _search_tuner(study, base: ExperimentConfig, trainable, parent_id: str, run_config, limit):
    """Optuna over the study's space (each configuration ``seeds`` times), ASHA or first-in-first-out."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search import ConcurrencyLimiter, Repeater
    from ray.tune.search.optuna import OptunaSearch

    from distalign.studies.concurrency import ClusterLimit, ClusterSizedLimiter

    search = study.search
    kinds = {"loguniform": tune.loguniform, "uniform": tune.uniform, "randint": tune.randint}
    point = {
        key: tune.choice(values) if kind == "choice" else kinds[kind](*values)
        for key, spec in search.space.items()
        for kind, values in spec.items()
    }
    searcher = OptunaSearch(metric=study.metric, mode=study.mode, seed=search.seed)
    if search.seeds > 1:
        searcher = Repeater(searcher, repeat=search.seeds, set_index=True)
    searcher = (
        ClusterSizedLimiter(searcher, limit) if isinstance(limit, ClusterLimit) else ConcurrencyLimiter(searcher, limit)
    )
    # ASHA judges a trial at each in-loop evaluation (the recipe reports every one)
    scheduler = (
        ASHAScheduler(
            metric=study.metric,
            mode=study.mode,
            grace_period=search.grace_period,
            reduction_factor=search.reduction_factor,
            max_t=base.train.max_steps + 1,
        )
        if search.scheduler == "asha"
        else FIFOScheduler()
    )
    return tune.Tuner(
        trainable,
        param_space={"trial": SearchBase(study.study, base.to_dict(), parent_id), "point": point},
        tune_config=tune.TuneConfig(
            search_alg=searcher, scheduler=scheduler, num_samples=search.num_samples * search.seeds, reuse_actors=True
        ),
        run_config=run_config,
    )


def _grid_tuner(trainable, trials: dict[str, ExperimentConfig], parent_id: str, run_config, limit):
    """One Tune trial per grid trial, each handed a ``GridTrial``: its config as plain data and its identity."""
    from ray import tune
    from ray.tune.search import BasicVariantGenerator

    from distalign.studies.concurrency import ClusterLimit, ClusterSizedVariants

    space = [
        GridTrial(
            TrialIdentity(name, config.train.seed, dict(config.tracking.tags), parent_id),
            {k.removeprefix(TAG): tag_value(v) for k, v in config.tracking.tags.items()},
            config.to_dict(),
        )
        for name, config in trials.items()
    ]
    variants = (
        ClusterSizedVariants(limit) if isinstance(limit, ClusterLimit) else BasicVariantGenerator(max_concurrent=limit)
    )
    return tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(space)},
        tune_config=tune.TuneConfig(search_alg=variants, reuse_actors=True),
        run_config=run_config,
    )


def close_stopped_trials(client, parent_id: str, metric: str, rows: list[dict[str, Any]]) -> None:
    """Trials the scheduler stopped early (ASHA) end without closing their MLflow runs: mark those runs KILLED
    at their last evaluation, tagged ``distalign.stopped_early`` with the step."""
    runs = child_runs(client, parent_id)
    for row in rows:
        run = runs.get(row["trial"])
        if run is None or row["error"] or run.info.status == "FINISHED":
            continue
        history = client.get_metric_history(run.info.run_id, metric)
        client.set_tag(run.info.run_id, STOPPED_EARLY_TAG, str(row["step"]))
        client.set_terminated(run.info.run_id, "KILLED", end_time=max((m.timestamp for m in history), default=None))


def register_best_trial(client, parent_id: str, config: ExperimentConfig) -> None:
    """The best trial's checkpoint (the study run's ``distalign.best_checkpoint``, set by ``log_study_summary``)
    logged into the trial's run and registered as ``tracking.registered_model_name`` (trials register none)."""
    from distalign.train.model_registry import register_checkpoint

    tags = client.get_run(parent_id).data.tags
    if "distalign.best_checkpoint" not in tags:
        log.warning(
            "no trial has a score and a checkpoint: no model registered as %s", config.tracking.registered_model_name
        )
        return
    trial = child_runs(client, parent_id)[tags["distalign.best_trial"]]
    register_checkpoint(
        config.tracking.uri,
        trial.info.run_id,
        tags["distalign.best_checkpoint"],
        config.storage.endpoint_url,
        config.tracking.registered_model_name,
    )


def trials_at_once(study, trials: dict[str, ExperimentConfig]):
    """``max_concurrent_trials`` when the study sets it (fixed), else a ``ClusterLimit``: what the cluster or its
    autoscaler holds, read again as the study runs (``distalign.studies.concurrency``). Needs Ray up."""
    import ray

    from distalign.studies.concurrency import REREAD_S, ClusterLimit

    first = next(iter(trials.values()))
    if study.max_concurrent_trials:
        limit = concurrent_trials(study, list(trials.values()), ray.cluster_resources())
        log.info(
            "study %s: up to %d trials at once (max_concurrent_trials), each holding %s",
            study.study,
            limit,
            trial_resources(study, first),
        )
        return limit
    count = study.search.num_samples * study.search.seeds if study.search.space else len(trials)
    log.info(
        "study %s: each trial holds %s; as many at once as the cluster (or its autoscaler) holds, read again "
        "every %g s",
        study.study,
        trial_resources(study, first),
        REREAD_S,
    )
    return ClusterLimit(largest_trial(study, list(trials.values())), count)


def run_study(path: str | Path, extra_overrides: list[str] | None = None) -> list[dict[str, Any]]:
    """Run a Tune study (``distalign.studies.study``) on a local Ray cluster or the one in RAY_ADDRESS.

    Every trial's config is loaded and validated first (``load_study``), each distinct input read, checked and
    prepared once (``check_trials``) and shared with its trials through the object store (``share``); trials
    start while fewer than the cluster holds run (``trials_at_once``). An MLflow parent run is opened for the
    study and Tune runs the trials, each a TorchTrainer run logged as a child run.
    Returns one row per trial (name, what it stands for, the study metric, error); tables and plots go
    to the parent run. Raises ``RuntimeError`` naming the failed trials, after logging the summary.
    """
    from ray import tune

    from distalign.logs import configure
    from distalign.ray_session import ensure_ray
    from distalign.storage import ray_storage_path, storage_filesystem
    from distalign.tracking import client_for, run_url, tracked_run

    configure()
    study, trials = load_study(path, extra_overrides)
    first = next(iter(trials.values()))
    # the storage and tracking of the study, which its trials share, with their inputs, prepared once each
    prepared = check_trials(trials)
    log.info(
        "study %s: %d trials over %s%s",
        study.study,
        len(trials),
        list(study.grid),
        " and language samples" if study.language_samples.size else "",
    )
    ensure_ray()
    shared = share(study.study, prepared, trials)
    limit = trials_at_once(study, trials)
    storage_path = ray_storage_path(first.storage.path, first.storage.endpoint_url)
    filesystem = storage_filesystem(first.storage.path, first.storage.endpoint_url)
    with tracked_run(
        first.tracking.uri,
        first.tracking.experiment,
        study.study,
        first.storage.path,
        {f"grid.{k}": v for k, v in study.grid.items()} | {"metric": study.metric},
        dataclasses.asdict(study),
    ) as parent_id:
        searching = bool(study.search.space)
        trainable = _trainable(study, _search_trial if searching else _trial, shared)
        # verbose=0: Tune's own tables (every trial's whole config) give way to one line per trial event
        run_config = tune.RunConfig(
            name=study.study,
            storage_path=storage_path,
            storage_filesystem=filesystem,
            failure_config=tune.FailureConfig(max_failures=study.max_failures),
            verbose=0,
            callbacks=[TrialProgress(study.metric)],
        )
        experiment = f"{storage_path.rstrip('/')}/{study.study}"
        if tune.Tuner.can_restore(experiment, storage_filesystem=filesystem):
            log.info("study %s: resuming; finished trials are not run again", study.study)
            tuner = tune.Tuner.restore(experiment, trainable, resume_errored=True, storage_filesystem=filesystem)
        elif searching:
            tuner = _search_tuner(study, first, trainable, parent_id, run_config, limit)
        else:
            tuner = _grid_tuner(trainable, trials, parent_id, run_config, limit)
        results = tuner.fit()
        rows = []
        for result in results:
            name, stands_for, _ = describe_trial(result.config, (result.metrics or {}).get("trial_id", ""))
            rows.append(
                {
                    "trial": name,
                    **stands_for,
                    study.metric: (result.metrics or {}).get(study.metric),
                    "step": (result.metrics or {}).get("step"),
                    "error": str(result.error) if result.error else "",
                }
            )
        rows.sort(key=lambda row: row["trial"])
        client = client_for(first.tracking.uri)
        close_stopped_trials(client, parent_id, study.metric, rows)
        log_study_summary(client, parent_id, study, rows)
        if first.tracking.registered_model_name:
            register_best_trial(client, parent_id, first)
        log.info(
            "study %s in the MLflow UI: %s",
            study.study,
            run_url(first.tracking.uri, client.get_run(parent_id).info.experiment_id, parent_id),
        )
        failed = [r["trial"] for r in rows if r["error"]]
        if failed:
            raise RuntimeError(f"study {study.study}: trials failed: {failed}")
    return rows
