"""The training plan: everything a worker needs, filled in by the driver (``run_training``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from distalign.config import ExperimentConfig
from distalign.data.streams import Stream
from distalign.eval.tasks import BLITask
from distalign.preparation.schedule import RunSchedule
from distalign.preparation.streams import CorpusFeed
from distalign.train.startup import StartupClock


@dataclass
class TrainingPlan:
    config: ExperimentConfig  # as the user wrote it (validated, never rewritten)
    schedule: RunSchedule  # steps and evaluation interval, derived once from the config and the data
    model_path: str  # the starting model (a resumed run loads its checkpoint's model instead)
    mlflow_run_id: str = ""  # "" = no MLflow logging (unit tests)
    languages: list[str] = field(default_factory=list)  # a language's id is its index here
    word_pairs: pa.Table | None = None  # the training word pairs, when an objective uses them in the worker
    bli_test_sets: list[BLITask] = field(default_factory=list)  # held-out pairs for model selection
    # held-out corpus rows, tokenised and masked (``distalign.preparation.validation``): the MLM validation loss
    mlm_validation: dict[str, np.ndarray] | None = None
    # the plugins of the streams the active objectives read, by name (workers need no registry)
    streams: dict[str, Stream] = field(default_factory=dict)
    corpus: CorpusFeed | None = None  # how workers stream the corpus, when an objective reads it
    clock: StartupClock = field(default_factory=StartupClock)  # the driver's start-up phases, the workers add theirs
