"""What a Tune trial of a training run holds, and how many such trials a cluster runs at once: shared by the
studies of training runs (``distalign.studies``) and of the synthetic-language benchmark
(``distalign.synthetic_languages``), each of whose study settings give the two limits of ``TrialLimits``."""

from __future__ import annotations

import logging
import math
import sys
from typing import Protocol

from distalign.config import ExperimentConfig, TrainConfig
from distalign.data.stream_plugins import worker_data_cpus

log = logging.getLogger("distalign")


class TrialLimits(Protocol):
    """A study's settings this module reads."""

    trial_cpus: float  # the trial function's own CPUs
    max_concurrent_trials: int  # 0: as many as the cluster holds


def trial_resources(study: TrialLimits, config: ExperimentConfig) -> dict[str, float]:
    """What one trial holds while it runs: its trial function, and per Train worker the worker, one
    tokenising Ray Data task of the table streams and the corpus stream's reservation (a GPU per worker
    with ``train.use_gpu``)."""
    t = config.train
    per_worker = t.cpus_per_worker + worker_data_cpus(config.objectives.streams(), config.data)
    return {"CPU": study.trial_cpus + t.num_workers * per_worker} | ({"GPU": float(t.num_workers)} if t.use_gpu else {})


def trial_function_resources(study: TrialLimits, train: TrainConfig) -> dict[str, float]:
    """What the trial function itself holds (Tune's ``with_resources``): ``trial_cpus``, and the worker's GPU when
    the run trains in the trial's process (its CPUs it reserves once its datasets are built:
    ``distalign.train.in_process``)."""
    return {"CPU": study.trial_cpus} | ({"GPU": 1.0} if train.in_trial_process and train.use_gpu else {})


def largest_trial(study: TrialLimits, configs: list[ExperimentConfig]) -> dict[str, float]:
    """What the largest of ``configs`` holds while it runs (``trial_resources``), per resource."""
    needs = [trial_resources(study, config) for config in configs]
    return {kind: max(n.get(kind, 0.0) for n in needs) for kind in set().union(*needs)}


def trials_that_fit(need: dict[str, float], capacity: dict[str, float], trials: int) -> int:
    """Trials of ``need`` each that ``capacity`` holds at once: at least one (an autoscaler may add nodes), at most
    ``trials`` (an unbounded autoscaler holds them all)."""
    fits = min(capacity.get(kind, 0.0) / amount for kind, amount in need.items() if amount)
    return max(1, min(trials, int(fits) if math.isfinite(fits) else trials))


def concurrent_trials(
    study: TrialLimits, configs: list[ExperimentConfig], cluster: dict[str, float], trials: int | None = None
) -> int:
    """Trials to run at once: as many of the largest of ``configs`` as ``cluster`` (``ray.cluster_resources()``)
    holds, at least one and at most ``trials`` (default: unbounded); ``max_concurrent_trials`` if set. A larger
    explicit value than the cluster holds is kept (an autoscaling cluster grows to it) with a warning: the trials
    beyond it wait for resources."""
    need = largest_trial(study, configs)
    fits = trials_that_fit(need, cluster, trials or sys.maxsize)
    if study.max_concurrent_trials > fits:
        log.warning(
            "max_concurrent_trials=%d, but the cluster holds %d trials of %s now: the others wait for "
            "resources (or the autoscaler)",
            study.max_concurrent_trials,
            fits,
            need,
        )
    return study.max_concurrent_trials or fits
