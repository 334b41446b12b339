"""The training plan: everything a worker needs, filled in by the driver (``run_training``). It carries where
the run's tables are in storage, not their rows: a worker reads the rows it needs itself."""

from __future__ import annotations

from dataclasses import dataclass, field

from distalign.config import ExperimentConfig
from distalign.data.stream_plugins import Stream
from distalign.eval.tasks import BLITask
from distalign.preparation.ray_streams import CorpusFeed, TableStream
from distalign.preparation.schedule import RunSchedule
from distalign.preparation.table_rows import StoredTable
from distalign.train.startup import StartupClock


@dataclass(kw_only=True)
class TrainingPlan:
    config: ExperimentConfig  # as the user wrote it (validated, never rewritten)
    schedule: RunSchedule  # steps and evaluation interval, derived once from the config and the data
    model_path: str  # the starting model (a resumed run loads its checkpoint's model instead)
    mlflow_run_id: str = ""  # "" = no MLflow logging (unit tests)
    languages: list[str] = field(default_factory=list)  # a language's id is its index here
    # where the training word pairs are (the stored constraint table), when an objective uses them in the worker
    word_pairs: StoredTable | None = None
    bli_test_sets: list[BLITask] = field(default_factory=list)  # held-out pairs for model selection
    # where the held-out corpus rows are: each worker tokenises and masks its share for the MLM validation loss
    # (``distalign.preparation.validation``) with the corpus stream's job
    mlm_validation: StoredTable | None = None
    # the plugins of the streams the active objectives read, by name (workers need no registry)
    streams: dict[str, Stream] = field(default_factory=dict)
    corpus: CorpusFeed | None = None  # how workers stream the corpus, when an objective reads it
    tables: dict[str, TableStream] = field(default_factory=dict)  # where each active table stream's rows are
    clock: StartupClock = field(default_factory=StartupClock)  # the driver's start-up phases, the workers add theirs
