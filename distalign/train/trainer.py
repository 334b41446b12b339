"""The driver side of a training run: prepare the inputs, open the MLflow run, run the TorchTrainer.

    run_training(load_config("jobs/configs/quickstart.yaml"))

Everything that can fail on bad input (config, files, rows, storage, tracking, the cluster's size) fails in
``distalign.train.preflight`` before any Ray resources are taken, all problems reported at once. A run started again
with the same ``run.name`` and storage resumes from its last checkpoint and continues its step count and its MLflow run.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import ray
import ray.train
from ray.train.torch import TorchTrainer

from distalign.config import ExperimentConfig
from distalign.data.corpus_stream import start_ledger
from distalign.data.stream_plugins import STREAMS
from distalign.eval.selection import selection_score
from distalign.logs import configure
from distalign.preparation.prepared import PreparedData
from distalign.preparation.ray_streams import corpus_feed, reserve_corpus_cpus, store_tables, table_streams
from distalign.preparation.resume_checks import kept_schedule
from distalign.preparation.schedule import RunSchedule, run_schedule
from distalign.preparation.staging import stage_inputs
from distalign.ray_session import ensure_ray
from distalign.storage import checkpoint_uri, ray_storage_path, storage_filesystem
from distalign.tracking import (
    BEST_CHECKPOINT_TAG,
    CHECKPOINT_TAG,
    START_MODEL_TAG,
    client_for,
    open_store_in_background,
    tracked_run,
)
from distalign.train.failures import FailFast, raising_worker_exceptions
from distalign.train.final_scores import TEST_STEP, bli_test_sets, score_test_pairs
from distalign.train.in_process import fit_in_process
from distalign.train.loop import train_loop_per_worker
from distalign.train.model_registry import register_checkpoint
from distalign.train.plan import TrainingPlan
from distalign.train.preflight import Checked, check_run
from distalign.train.startup import StartupClock

log = logging.getLogger("distalign")


@dataclass
class TrainingOutcome:
    run_id: str
    checkpoint: str  # URI or local path of the last checkpoint ("" if none)
    metrics: dict
    best_checkpoint: str = ""  # best by eval.select_by's score ("" without validation data)
    test_metrics: dict = field(default_factory=dict)  # test/bli/... of the selected checkpoint (eval.test_languages)


def plan_training(
    config: ExperimentConfig,
    prepared: PreparedData,
    mlflow_run_id: str,
    ledger: str = "",
    clock: StartupClock | None = None,
    schedule: RunSchedule | None = None,
) -> TrainingPlan:
    """The workers' plan: model, languages, held-out pairs for model selection, where the run's tables are (written
    to its storage here, once: ``store_tables``), the corpus stream (``ledger``: the actor that counts the corpus
    rows skipped on the cluster); ``schedule``: the run's (default: the config's, ``run_schedule``)."""
    test_sets = bli_test_sets(config, prepared.eval_pairs)
    stored = store_tables(prepared, config)
    word_pairs = stored["constraints"] if config.objectives.uses_word_pairs else None  # evaluation words removed
    streams = {name: STREAMS[name] for name in sorted(config.objectives.streams())}
    return TrainingPlan(
        config=config,
        schedule=schedule or run_schedule(config, prepared),
        model_path=prepared.model_path,
        mlflow_run_id=mlflow_run_id,
        languages=prepared.languages,
        word_pairs=word_pairs,
        bli_test_sets=test_sets,
        mlm_validation=stored.get("validation"),
        streams=streams,
        corpus=corpus_feed(prepared, config, ledger),
        tables=table_streams(prepared, config, stored),
        clock=clock or StartupClock(),
    )


@contextlib.contextmanager
def reporting_skips(ledger, run_id: str, tracking_uri: str):
    """On the way out (finished or failed): log the corpus rows and files skipped on the cluster, as
    warnings and as the run's ``data/skipped_corpus_rows``, and the corpus reads retried
    (``data/corpus_read_retries``); then stop the ledger actor."""
    try:
        yield
    finally:
        try:
            reports, retried = ray.get([ledger.reports.remote(), ledger.retried.remote()], timeout=30)
            for report in reports:
                log.warning(
                    "skipped while streaming the corpus: %d from %s%s",
                    report.malformed,
                    report.path,
                    "".join(f"\n  {e}" for e in report.examples),
                )
            if retried:
                log.warning("corpus reads retried after storage errors: %d", retried)
            client = client_for(tracking_uri)
            client.log_metric(run_id, "data/skipped_corpus_rows", sum(r.malformed for r in reports))
            client.log_metric(run_id, "data/corpus_read_retries", retried)
        finally:
            ray.kill(ledger)


def build_trainer(config: ExperimentConfig, plan: TrainingPlan, score: dict, callbacks: list | None) -> TorchTrainer:
    """The ``TorchTrainer`` of a run: its workers, storage and checkpoints."""
    t = config.train
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config=plan,
        scaling_config=ray.train.ScalingConfig(
            # a (min, max) range lets Ray Train restart on the workers that fit when the cluster shrinks
            num_workers=(t.min_workers, t.num_workers) if 0 < t.min_workers < t.num_workers else t.num_workers,
            use_gpu=t.use_gpu,
            resources_per_worker={"CPU": t.cpus_per_worker},
            placement_strategy=t.placement_strategy,
        ),
        run_config=ray.train.RunConfig(
            name=config.run.name,
            storage_path=ray_storage_path(config.storage.path, config.storage.endpoint_url),
            storage_filesystem=storage_filesystem(config.storage.path, config.storage.endpoint_url),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=config.storage.keep_checkpoints, **score),
            failure_config=ray.train.FailureConfig(max_failures=t.max_failures),
            # a deterministic error of the training code is retried once, not max_failures times
            callbacks=[FailFast(), *(callbacks or [])],
        ),
    )


@dataclass
class Fitted:
    """What training left: the last checkpoint, the best by the selection score, the last report's metrics."""

    checkpoint: ray.train.Checkpoint | None
    best: ray.train.Checkpoint | None
    metrics: dict


def fit(
    config: ExperimentConfig,
    plan: TrainingPlan,
    score: dict,
    callbacks: list | None,
    trial_report: Callable[[dict], None] | None,
) -> Fitted:
    """Train ``plan``: in this process for a one-worker Tune trial (``train.in_trial_process``), else on a Ray
    Train worker group."""
    selection, order = score.get("checkpoint_score_attribute", ""), score.get("checkpoint_score_order", "max")
    if trial_report is not None and config.train.in_trial_process:
        worker = fit_in_process(plan, selection, order, trial_report)
        return Fitted(worker.store.latest, worker.store.best, worker.metrics)
    with raising_worker_exceptions():  # a worker's own error, not Ray Train's wrapper of it
        result = build_trainer(config, plan, score, callbacks).fit()
    best = result.get_best_checkpoint(selection, order) if selection and result.best_checkpoints else None
    return Fitted(result.checkpoint, best, dict(result.metrics or {}))


def run_training(
    config: ExperimentConfig,
    callbacks: list | None = None,
    clock: StartupClock | None = None,
    trial_report: Callable[[dict], None] | None = None,
    checked: Checked | None = None,
) -> TrainingOutcome:
    """Train one run as ``config`` says, end to end; returns its MLflow run id and checkpoints.

    Inputs are prepared (and every bad input reported) on the driver first; then a Ray cluster is
    joined or started, the MLflow run opened (or reopened on resume), and a ``TorchTrainer`` runs
    ``train_loop_per_worker`` on ``train.num_workers`` workers, each drawing its own rows of the run's streams.
    In a Tune trial (``trial_report``: its ``ray.tune.report``; ``callbacks``: Ray Train's, for a worker group) a
    one-worker run trains in this process instead (``distalign.train.in_process``).
    ``checked``: the config's checks already run by the caller (``distalign.train.preflight``), else run here.
    """
    configure()
    clock = clock or StartupClock()  # the start-up phases (``distalign.train.startup``) from here on
    # every bad input reported, all at once, before Ray (a Tune trial's share of the cluster is Tune's to check)
    checked = checked or check_run(config, resources=trial_report is None)
    prepared = stage_inputs(checked.prepared, config)
    clock.mark("prepare")
    t = config.train
    log.info(
        "data: %d constraint pairs (%d excluded as evaluation words), %d malformed rows skipped; corpora %s "
        "(streamed); model %s",
        len(prepared.constraints),
        prepared.excluded_constraints,
        prepared.malformed_rows,
        ", ".join(f"{s.lang}: {s.name}" for s in prepared.corpus.sources) or "none",
        prepared.model_path,
    )
    store = open_store_in_background(config.tracking.uri)
    ensure_ray()  # before the schedule: a corpus-only run's epoch is counted on the cluster (``corpus_rows``)
    store.join()
    clock.mark("ray")
    schedule = kept_schedule(config, run_schedule(config, prepared))  # a resume keeps its first start's
    if config.train.epochs:
        log.info("train.epochs=%s: %d steps", config.train.epochs, schedule.max_steps)
    if config.eval.every_epochs:
        log.info(
            "evaluating and checkpointing every %d steps (%s epochs)", schedule.eval_every, config.eval.every_epochs
        )
    selection, order = selection_score(config.eval.select_by)
    has_validation = (
        prepared.validation is not None if config.eval.select_by == "mlm_loss" else bool(prepared.eval_pairs)
    )
    # Ray keeps the best checkpoints by the selection score (and always the latest, for resuming)
    score = {"checkpoint_score_attribute": selection, "checkpoint_score_order": order} if has_validation else {}

    ledger_name = f"distalign-skips-{config.run.name}-{uuid.uuid4().hex[:8]}"
    ledger = start_ledger(ledger_name)
    # the config as written, and what the run derived from it: each active stream's batch size, its default included
    params = config.flat() | schedule.params()
    params |= {
        STREAMS[name].batch_size_key: STREAMS[name].batch_size(config.train) for name in config.objectives.streams()
    }
    with (
        tracked_run(
            config.tracking.uri,
            config.tracking.experiment,
            config.run.name,
            config.storage.path,
            params,
            config.to_dict(),
            config.tracking.parent_run_id,
            config.tracking.tags,
        ) as run_id,
        reporting_skips(ledger, run_id, config.tracking.uri),
    ):
        client = client_for(config.tracking.uri)
        client.set_tag(run_id, START_MODEL_TAG, prepared.model_path)
        plan = plan_training(config, prepared, run_id, ledger_name, clock, schedule)
        with reserve_corpus_cpus(plan.corpus, t.num_workers):  # before the trainer takes the plan
            clock.mark("trainer")
            fitted = fit(config, plan, score, callbacks, trial_report)
        checkpoint = checkpoint_uri(fitted.checkpoint) if fitted.checkpoint is not None else ""
        best_checkpoint = checkpoint_uri(fitted.best) if fitted.best is not None else ""
        if checkpoint:
            client.set_tag(run_id, CHECKPOINT_TAG, checkpoint)
        if best_checkpoint:
            client.set_tag(run_id, BEST_CHECKPOINT_TAG, best_checkpoint)
        selected = fitted.best if fitted.best is not None else fitted.checkpoint
        test_metrics = {}
        if prepared.test_pairs and selected is not None:
            test_metrics = score_test_pairs(config, bli_test_sets(config, prepared.test_pairs), selected)
            step = int(test_metrics[TEST_STEP])
            for key, value in test_metrics.items():
                client.log_metric(run_id, key, value, step=step)
            log.info(
                "test pairs at step %d (the %s checkpoint): %s",
                step,
                "best" if fitted.best is not None else "last",
                " ".join(f"{k}={v:.4f}" for k, v in test_metrics.items() if k != TEST_STEP),
            )
        # a trial's model is not registered: its study registers the best trial's
        if config.tracking.registered_model_name and selected is not None and trial_report is None:
            register_checkpoint(
                config.tracking.uri,
                run_id,
                selected,
                config.storage.endpoint_url,
                config.tracking.registered_model_name,
            )
    return TrainingOutcome(run_id, checkpoint, fitted.metrics, best_checkpoint, test_metrics)
