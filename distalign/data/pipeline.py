"""Ray Data streams for training: constraint pairs and corpus sentences, tokenised in ``map_batches``.

Tables are shuffled with the run's seed on the driver and their order is preserved through the
pipeline, so every worker's shard is the same for the same seed. Ray Train splits each dataset
into equal shards, one per worker (``get_dataset_shard``).
"""

from __future__ import annotations

import ray
import ray.data

from distalign.config import ExperimentConfig
from distalign.data.prepare import PreparedData
from distalign.data.gloss_inputs import tokenize_sense_constraint_batch
from distalign.data.tokenize import tokenize_constraint_batch, tokenize_corpus_batch, tokenize_static_batch

TOKENIZE_BATCH = 256


def build_datasets(prepared: PreparedData, config: ExperimentConfig) -> dict[str, ray.data.Dataset]:
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    # The split restarts every epoch; its progress bars would drown the training progress lines.
    context.enable_progress_bars = False
    datasets, cpus = {}, config.data.tokenize_cpus
    streams = config.objectives.streams()
    if "constraints" in streams:
        lexical = config.objectives.lexical
        tokenize, max_tokens = ((tokenize_sense_constraint_batch, lexical.max_sense_tokens) if lexical.sense_level
                                else (tokenize_constraint_batch, config.model.max_word_tokens))
        datasets["constraints"] = ray.data.from_arrow(prepared.constraints).map_batches(
            tokenize, batch_size=TOKENIZE_BATCH, batch_format="numpy", num_cpus=cpus,
            fn_kwargs={"tokenizer_path": prepared.model_path, "max_tokens": max_tokens},
        )
    if "corpus" in streams:
        datasets["corpus"] = ray.data.from_arrow(prepared.corpus.select(["text", "lang"])).map_batches(
            tokenize_corpus_batch, batch_size=TOKENIZE_BATCH, batch_format="numpy", num_cpus=cpus,
            fn_kwargs={"tokenizer_path": prepared.model_path, "max_length": config.data.max_seq_length,
                       "languages": prepared.languages},
        )
    if "static" in streams:
        datasets["static"] = ray.data.from_arrow(prepared.static).map_batches(
            tokenize_static_batch, batch_size=TOKENIZE_BATCH, batch_format="numpy", num_cpus=cpus,
            fn_kwargs={"tokenizer_path": prepared.model_path, "max_tokens": config.model.max_word_tokens},
        )
    return datasets
