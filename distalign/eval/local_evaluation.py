"""Running evaluation tasks in this process: encode each distinct text set once, at every layer, then score
task x layer (``evaluate_locally``); ``distalign.eval.distributed`` runs the same two steps as Ray tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from distalign.eval.encoders import EncodingCache, sentence_vectors, word_vectors
from distalign.eval.tasks.base import WORDS, EvalTask, TextSet
from distalign.models.language_embeddings import input_language


@dataclass(frozen=True)
class EncodingSettings:
    max_word_tokens: int = 16
    max_sentence_length: int = 128
    word_batch_size: int = 256
    sentence_batch_size: int = 64


def encode_text_set(
    model,
    tokenizer,
    text_set: TextSet,
    settings: EncodingSettings = EncodingSettings(),
    cache: EncodingCache | None = None,
) -> torch.Tensor:
    """``[L+1, n, d]`` float32 vectors of a text set at every layer (through ``cache`` when given). A model with
    an input language table (DICT-MLM's) adds the set's language's row at the input, as at fine-tuning and test
    time (DICT-MLM §3.1); a language without a row gets none (``distalign eval`` warns of it first)."""
    with input_language(model, text_set.lang, strict=False):
        if text_set.kind == WORDS:
            return word_vectors(
                model,
                tokenizer,
                text_set.texts,
                text_set.lang,
                cache,
                settings.max_word_tokens,
                settings.word_batch_size,
            )
        return sentence_vectors(
            model,
            tokenizer,
            text_set.texts,
            text_set.lang,
            cache,
            settings.max_sentence_length,
            settings.sentence_batch_size,
        )


def score_layer(task: EvalTask, stacks: dict, layer: int) -> list[dict]:
    """Result rows of one task at one layer, from its text sets' ``[L+1, n, d]`` stacks (tensors or arrays)."""
    vectors = {role: task.at_layer(stack, layer) for role, stack in stacks.items()}
    if any(v is None for v in vectors.values()):
        return []
    # a copy: torch wants writable memory, and a Ray object-store array is read-only
    vectors = {
        role: torch.as_tensor(np.array(v)) if isinstance(v, np.ndarray) else v  # host-side: arrays
        for role, v in vectors.items()
    }
    return [
        {"task": task.task, "pair": task.pair, "layer": layer, "metric": metric, "value": float(value)}
        for metric, value in task.score(vectors).items()
    ]


def evaluate_locally(
    model,
    tokenizer,
    tasks: list[EvalTask],
    layers: list[int] | None = None,
    settings: EncodingSettings = EncodingSettings(),
    cache: EncodingCache | None = None,
) -> list[dict]:
    """Every task at every layer (or the given ones; negative counts from the last), in this process."""
    num_layers = model.masked_lm.config.num_hidden_layers + 1
    encoded: dict[str, torch.Tensor] = {}
    rows: list[dict] = []
    for task in tasks:
        sets = task.text_sets()
        for text_set in sets.values():
            if text_set.key not in encoded:
                encoded[text_set.key] = encode_text_set(model, tokenizer, text_set, settings, cache)
        for layer in layers if layers is not None else range(num_layers):
            layer = layer % num_layers
            rows += score_layer(task, {role: encoded[ts.key] for role, ts in sets.items()}, layer)
    return rows
