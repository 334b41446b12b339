"""Evaluation fanned out over Ray: one task per distinct text set to encode, one per task x pair x layer to score.

Encoding tasks load the model, encode every layer at once (through the on-disk ``EncodingCache``,
so a 100K-word vocabulary is encoded once per checkpoint) and put ``[L+1, n, d]`` float32 arrays in
the object store; scoring tasks read the one layer they need (zero-copy on the same node). A text
set shared by several tasks (English sentences of every Tatoeba pair, a target vocabulary used by
several BLI pairs) is encoded once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import ray
import torch

from distalign.eval.local_evaluation import EncodingSettings, encode_text_set, score_layer
from distalign.eval.tasks import EvalTask, TextSet
from distalign.logs import say
from distalign.storage import node_local


@dataclass(frozen=True)
class Resources:
    encode_cpus: float = 1.0
    score_cpus: float = 1.0
    use_gpu: bool = False


def load_encoder(model_path: str):
    """The ``Encoder`` of a model directory (on the GPU when there is one, in eval mode) and its tokenizer; the
    adapters and input language table saved beside the model are attached."""
    from distalign.models.adapters import load_masked_lm_with_adapters
    from distalign.models.encoder import Encoder
    from distalign.models.language_embeddings import attach_input_languages
    from distalign.models.loading import load_tokenizer

    masked_lm = load_masked_lm_with_adapters(model_path)
    attach_input_languages(masked_lm, model_path)
    model = Encoder(masked_lm)
    if torch.cuda.is_available():
        model = model.cuda()
    return model.eval(), load_tokenizer(model_path)


def _encode(
    model_path: str, endpoint_url: str, text_set: TextSet, settings: EncodingSettings, cache_dir: str | None
) -> np.ndarray:
    from distalign.eval.encoders import EncodingCache

    model, tokenizer = load_encoder(node_local(model_path, endpoint_url))  # a stored model: staged once per node
    cache = EncodingCache.for_model(cache_dir, model, tokenizer) if cache_dir else None
    return encode_text_set(model, tokenizer, text_set, settings, cache).numpy()


def _score(task: EvalTask, layer: int, roles: list[str], *encoded: np.ndarray) -> list[dict]:
    return score_layer(task, dict(zip(roles, encoded)), layer)


def evaluate_distributed(
    model_path: str,
    tasks: list[EvalTask],
    num_layers: int,
    layers: list[int] | None = None,
    settings: EncodingSettings = EncodingSettings(),
    cache_dir: str | None = None,
    resources: Resources = Resources(),
    progress: Callable[[str], None] = say,
    endpoint_url: str = "",
) -> list[dict]:
    """Result rows of every task at every layer (or the given ones), computed by Ray tasks.

    ``model_path`` is read on every node: a shared directory, a hub name, or a storage URI (read through
    ``endpoint_url``), which each node's encoding tasks stage once (``node_local``).
    """
    encode = ray.remote(_encode).options(
        num_cpus=resources.encode_cpus, num_gpus=int(resources.use_gpu), name="distalign-eval-encode"
    )
    score = ray.remote(_score).options(num_cpus=resources.score_cpus, name="distalign-eval-score")
    layer_ids = sorted({layer % num_layers for layer in (layers if layers is not None else range(num_layers))})

    encodings: dict[str, ray.ObjectRef] = {}
    for task in tasks:
        for text_set in task.text_sets().values():
            if text_set.key not in encodings:
                encodings[text_set.key] = encode.remote(model_path, endpoint_url, text_set, settings, cache_dir)
    pending: dict[ray.ObjectRef, str] = {}
    for task in tasks:
        sets = task.text_sets()
        refs = [encodings[ts.key] for ts in sets.values()]
        task_ref = ray.put(task)  # once, not once per layer (a BLI task carries a 100K-word vocabulary)
        for layer in layer_ids:
            pending[score.remote(task_ref, layer, list(sets), *refs)] = f"{task.task} {task.pair} layer {layer}"
    progress(
        f"[distalign eval] {len(encodings)} text sets to encode, {len(pending)} scoring jobs "
        f"({len(tasks)} tasks x {len(layer_ids)} layers)"
    )

    rows: list[dict] = []
    started, total = time.time(), len(pending)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        label = pending.pop(done[0])
        result = ray.get(done[0])
        rows += result
        headline = ", ".join(f"{r['metric']}={r['value']:.3f}" for r in result[:2])
        progress(f"[distalign eval] {total - len(pending)}/{total} {label}: {headline} ({time.time() - started:.0f} s)")
    return rows
