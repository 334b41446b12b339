"""``run_experiment``: one run of an experiment config, as ``distalign train`` and every trial of a study run it:
training (``distalign.train.trainer.run_training``), then the zero-shot transfer evaluation of ``eval.transfer``
(``distalign.transfer.training``), which starts once the training workers have given their resources back.

    outcome = run_experiment(load_config("jobs/configs/quickstart.yaml"))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from distalign.config import ExperimentConfig
from distalign.train import trainer
from distalign.train.preflight import Checked
from distalign.train.startup import StartupClock
from distalign.transfer.training import check, transfer_after_training


@dataclass(frozen=True)
class ExperimentOutcome:
    training: trainer.TrainingOutcome
    transfer_metrics: dict[str, float]  # the final model's transfer/<task>/<lang>/<metric> ({} with eval.transfer off)

    @property
    def final_metrics(self) -> dict[str, float]:
        """What the run scores once, after training: the selected checkpoint's test/ metrics and the transfer's."""
        return self.training.test_metrics | self.transfer_metrics


def run_experiment(
    config: ExperimentConfig,
    *,
    checked: Checked | None = None,
    clock: StartupClock | None = None,
    callbacks: list | None = None,
    trial_report: Callable[[dict], None] | None = None,
    progress: Callable[[str], None] = print,
) -> ExperimentOutcome:
    """Train as ``config`` says, then transfer its models (``eval.transfer``). ``checked``, ``clock``, ``callbacks``
    and ``trial_report`` go to ``run_training``; ``progress`` gets the transfer's lines."""
    # load_config ran it if this module was imported by then; else (a config loaded first) it runs here, before
    # training, not after hours of it
    check(config)
    training = trainer.run_training(
        config, callbacks=callbacks, clock=clock, trial_report=trial_report, checked=checked
    )
    return ExperimentOutcome(training, transfer_after_training(config, training, progress=progress))
