"""A run's checkpoints kept by distalign itself, for a run trained in the calling process (a one-worker Tune
trial: ``distalign.train.in_process``), where Ray Train keeps none.

The layout is Ray Train's, ``<storage.path>/<run.name>/checkpoint_<date>_<time>/``, so a run resumes from what the
other way of running wrote: the store lists the run's checkpoint directories, and a Ray Train worker falls back to
the same listing when Ray Train has no checkpoint of the run (``distalign.train.loop``). The retention is Ray
Train's too: the latest checkpoint always, and ``storage.keep_checkpoints`` more, the best by the selection score
(the newest without one). Each checkpoint carries the metrics reported with it (``REPORTED_FILE``, written after
its files), so a restarted trial knows which of its kept checkpoints is best.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow.fs
import ray.train

from distalign.checkpoint import CHECKPOINT_DIR_PREFIX
from distalign.storage import run_location

REPORTED_FILE = "reported_metrics.json"


@dataclass
class Stored:
    name: str  # checkpoint_<date>_<time>: names sort by time
    metrics: dict[str, float]


@dataclass
class CheckpointStore:
    storage_path: str
    endpoint_url: str
    run_name: str
    keep: int  # besides the latest; 0 keeps all
    score: str = ""  # the selection metric ("" without validation data: the newest are kept)
    order: str = "max"
    stored: list[Stored] = field(default_factory=list)  # oldest first

    def __post_init__(self):
        self.fs, self.root, _ = run_location(self.storage_path, self.endpoint_url, self.run_name)
        self.stored = [Stored(name, self._read_metrics(name)) for name in self._listed()]

    def _listed(self) -> list[str]:
        infos = self.fs.get_file_info(pyarrow.fs.FileSelector(self.root, allow_not_found=True))
        return sorted(
            i.base_name
            for i in infos
            if i.type == pyarrow.fs.FileType.Directory and i.base_name.startswith(CHECKPOINT_DIR_PREFIX)
        )

    def _read_metrics(self, name: str) -> dict[str, float]:
        """A checkpoint's reported metrics; {} for one Ray Train wrote (it keeps them in its own record)."""
        path = f"{self.root}/{name}/{REPORTED_FILE}"
        if self.fs.get_file_info(path).type != pyarrow.fs.FileType.File:
            return {}
        with self.fs.open_input_stream(path) as stream:
            return json.loads(stream.read().decode())

    def checkpoint(self, stored: Stored) -> ray.train.Checkpoint:
        return ray.train.Checkpoint(f"{self.root}/{stored.name}", self.fs)

    def newest_first(self) -> list[ray.train.Checkpoint]:
        return [self.checkpoint(s) for s in reversed(self.stored)]

    @property
    def latest(self) -> ray.train.Checkpoint | None:
        return self.checkpoint(self.stored[-1]) if self.stored else None

    @property
    def best(self) -> ray.train.Checkpoint | None:
        """The kept checkpoint with the best selection score (the latest among equals); None without a score."""
        ranked = self._ranked()
        return self.checkpoint(ranked[-1]) if self.score and ranked else None

    def _ranked(self) -> list[Stored]:
        """Worst first, as Ray Train ranks them: a missing or NaN score below every number, then the score
        (negated for ``min``), then age."""
        if not self.score:
            return list(self.stored)
        sign = 1.0 if self.order == "max" else -1.0

        def rank(item: tuple[int, Stored]):
            value = item[1].metrics.get(self.score)
            if isinstance(value, (int, float)) and not math.isnan(value):
                return True, sign * value, item[0]
            return False, 0.0, item[0]

        return [s for _, s in sorted(enumerate(self.stored), key=rank)]

    def save(self, directory: Path, metrics: dict[str, float]) -> ray.train.Checkpoint:
        """Upload a saved checkpoint directory with the metrics reported with it, then drop the checkpoints
        retention no longer keeps."""
        name = f"{CHECKPOINT_DIR_PREFIX}{datetime.now():%Y-%m-%d_%H-%M-%S.%f}"
        if self.stored and name <= self.stored[-1].name:  # a clock set back: names must keep their order
            name = f"{self.stored[-1].name}0"
        self.fs.create_dir(f"{self.root}/{name}")
        pyarrow.fs.copy_files(str(directory), f"{self.root}/{name}", pyarrow.fs.LocalFileSystem(), self.fs)
        # last: an upload cut short has no metrics, so it ranks below every complete checkpoint
        with self.fs.open_output_stream(f"{self.root}/{name}/{REPORTED_FILE}") as out:
            out.write(json.dumps(metrics).encode())
        self.stored.append(Stored(name, metrics))
        self._prune()
        return self.checkpoint(self.stored[-1])

    def _prune(self) -> None:
        if not self.keep:
            return
        latest = self.stored[-1]
        dropped = [s for s in self._ranked()[: -self.keep] if s is not latest]
        for stored in dropped:
            self.fs.delete_dir(f"{self.root}/{stored.name}")
        self.stored = [s for s in self.stored if s not in dropped]
