"""The held-out sentences of the MLM validation loss, prepared as the corpus stream prepares its batches: the same
tokenisation (packing included) and the run's MLM masking, each row's mask seeded by (run seed, epoch 0, row), so
the targets stay fixed for the whole run and across resumes.

The sentences are stored once with the run's tables (``store_tables``); each worker tokenises and masks its own
share, rows r, r + W, ... (``worker_validation_rows``), and keeps it as int32 without padding (``RaggedRows``):
nothing of them is pickled into the workers, and a worker holds 1/W of them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from distalign.config import ExperimentConfig
from distalign.data.ragged import RaggedRows
from distalign.data.stream_plugins import CorpusSentencesStream
from distalign.eval.mlm_loss import held_out_rows
from distalign.preparation.prepared import PreparedData
from distalign.preparation.ray_streams import StreamBatchJob, build_stream_batch, stream_jobs
from distalign.preparation.table_rows import StoredTable


def validation_rows(rows: pa.Table, job: StreamBatchJob) -> RaggedRows:
    """Held-out sentences (text, lang, row, epoch) tokenised and masked by the corpus stream's ``job``."""
    columns = {name: rows[name].to_numpy(zero_copy_only=False) for name in rows.column_names}
    return held_out_rows(build_stream_batch(columns, job))


def worker_validation_rows(stored: StoredTable, job: StreamBatchJob, rank: int, workers: int) -> RaggedRows:
    """Worker ``rank``'s share of the stored held-out sentences: rows rank, rank + workers, ..."""
    table = stored.open()
    return validation_rows(table.take(np.arange(rank, len(table), workers)), job)


def mlm_validation_rows(prepared: PreparedData, config: ExperimentConfig) -> RaggedRows | None:
    """Every held-out row, in this process (tests, debugging), or None without held-out sentences
    (``data.validation_corpora``, ``data.synthetic.validation_sentences``)."""
    if prepared.validation is None:
        return None
    job = stream_jobs(prepared, config, (CorpusSentencesStream.name,))[CorpusSentencesStream.name]
    return validation_rows(prepared.validation, job)
