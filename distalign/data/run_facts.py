"""``RunFacts``: the few values of a run, outside a plugin's own config section, that objective and stream plugins
read (their checks, their tokenisation, their draws).

A plugin sits below the experiment config (``distalign.config``) and never sees it whole: it gets its own typed
section and these facts, built once by the experiment config's ``run_facts()``. A plugin that needs another fact of the
run adds a field here, named after the key it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class RunFacts:
    seed: int  # train.seed
    static_batch_size: int  # train.static_batch_size
    max_seq_length: int  # data.max_seq_length
    pack_sequences: bool  # data.pack_sequences
    sampling_alpha: float  # data.sampling_alpha
    has_static_vectors: bool  # data.static_vectors is not empty
    has_parallel_data: bool  # data.parallel is not empty
    max_word_tokens: int  # model.max_word_tokens
    tiny_model_layers: int | None  # model.tiny.num_layers with model.name_or_path=tiny; None for any other model
