"""The run's schedule: how many optimizer steps, and how often to evaluate, computed once from the
config and the prepared data (``train.epochs`` and ``eval.every_epochs`` count passes over the main
training stream). The config is never rewritten with it: the driver, the streams and the workers all
read this one value."""

from __future__ import annotations

from dataclasses import dataclass

from distalign.config import ExperimentConfig
from distalign.data.stream_plugins import STREAMS, epoch_stream
from distalign.preparation.prepared import PreparedData


@dataclass(frozen=True)
class RunSchedule:
    max_steps: int  # optimizer steps of the run (``train.max_steps``, or ``train.epochs`` of the data)
    eval_every: int  # steps between evaluations (0 = only at the start and the end)

    def params(self) -> dict[str, int]:
        """As logged to MLflow beside the config's own params."""
        return {"schedule.max_steps": self.max_steps, "schedule.eval_every": self.eval_every}


def steps_per_epoch(config: ExperimentConfig, prepared: PreparedData) -> int:
    """Steps in one pass over the main training stream (``epoch_stream``: the constraint pairs if an
    objective reads them, else the corpus)."""
    t, stream = config.train, STREAMS[epoch_stream(config.objectives.streams())]
    return max(1, stream.rows(prepared) // (t.num_workers * stream.batch_size(t) * t.grad_accum_steps))


def run_schedule(config: ExperimentConfig, prepared: PreparedData) -> RunSchedule:
    """``train.max_steps``, or ``train.epochs`` > 0 of the data (the LR schedule spans them); evaluation
    every ``eval.every`` steps, or every ``eval.every_epochs`` of the main training stream."""
    t, e = config.train, config.eval
    max_steps = max(1, round(t.epochs * steps_per_epoch(config, prepared))) if t.epochs else t.max_steps
    eval_every = max(1, round(e.every_epochs * steps_per_epoch(config, prepared))) if e.every_epochs else e.every
    return RunSchedule(max_steps, eval_every)
