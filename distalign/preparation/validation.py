"""The held-out sentences of the MLM validation loss, prepared once on the driver as the corpus stream
prepares its batches: the same tokenisation (packing included) and the run's MLM masking, each row's mask
seeded by (run seed, epoch 0, row), so the targets stay fixed for the whole run and across resumes."""

from __future__ import annotations

import numpy as np

from distalign.config import ExperimentConfig
from distalign.data.streams import CorpusSentencesStream
from distalign.preparation.prepared import PreparedData
from distalign.preparation.streams import build_stream_batch, stream_jobs


def mlm_validation_batch(prepared: PreparedData, config: ExperimentConfig) -> dict[str, np.ndarray] | None:
    """The corpus stream's tensors plus ``masked_ids`` and ``labels`` for every held-out row, or None
    without held-out sentences (``data.validation_corpora``, ``data.synthetic.validation_sentences``)."""
    if prepared.validation is None:
        return None
    job = stream_jobs(prepared, config, (CorpusSentencesStream.name,))[CorpusSentencesStream.name]
    rows = {name: prepared.validation[name].to_numpy(zero_copy_only=False) for name in prepared.validation.column_names}
    return build_stream_batch(rows, job)
