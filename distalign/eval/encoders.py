"""Word and sentence vectors at every layer of an ``TrainingModule``, with an on-disk cache.

Vectors come back as float32 CPU tensors ``[num_layers + 1, n, d]`` (index 0 = embeddings), so a
task scores all layers from one forward pass. Memory is ``(L+1) * n * d * 4`` bytes: a 100K-word
vocabulary with XLM-R base (13 x 768) takes 4 GB.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from distalign.data.tokenize import encode_words
from distalign.models.pooling import mean_pool


@torch.no_grad()
def _pooled_layers(model, input_ids, attention_mask, mask) -> torch.Tensor:
    """[L+1, B, d]: mean of the states under ``mask`` at every hidden layer."""
    device = next(model.parameters()).device
    out = model.masked_lm.base_model(
        input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), output_hidden_states=True
    )
    mask = mask.to(device)
    return torch.stack([mean_pool(h, mask) for h in out.hidden_states]).float().cpu()


def _in_eval_mode(fn: Callable[[], torch.Tensor], model, texts: list[str]) -> torch.Tensor:
    if not texts:
        raise ValueError("nothing to encode: empty list")
    was_training = model.training
    model.eval()
    try:
        return fn()
    finally:
        model.train(was_training)


def encode_words_all_layers(
    model, tokenizer, words: list[str], max_tokens: int = 16, batch_size: int = 256
) -> torch.Tensor:
    """[L+1, n, d]: each word encoded alone (``[CLS] word [SEP]``), mean of its subword states."""

    def run():
        chunks = []
        for start in range(0, len(words), batch_size):
            enc = {
                k: torch.from_numpy(v)  # host-side: _pooled_layers moves them
                for k, v in encode_words(tokenizer, words[start : start + batch_size], max_tokens).items()
            }
            chunks.append(_pooled_layers(model, enc["input_ids"], enc["attention_mask"], enc["word_mask"]))
        return torch.cat(chunks, dim=1)

    return _in_eval_mode(run, model, words)


def encode_sentences_all_layers(
    model, tokenizer, sentences: list[str], max_length: int = 128, batch_size: int = 64
) -> torch.Tensor:
    """[L+1, n, d]: mean over each sentence's non-special, non-padding tokens.

    ``max_length`` is capped at the tokenizer's ``model_max_length``. Sentences are batched in
    length order (less padding) and returned in input order.
    """
    max_length = min(max_length, tokenizer.model_max_length)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))

    def run():
        chunks = []
        for start in range(0, len(order), batch_size):
            batch = [sentences[i] for i in order[start : start + batch_size]]
            enc = tokenizer(
                batch,
                max_length=max_length,
                truncation=True,
                padding=True,
                return_special_tokens_mask=True,
                return_tensors="pt",
            )
            mask = enc["attention_mask"] * (1 - enc["special_tokens_mask"])
            chunks.append(_pooled_layers(model, enc["input_ids"], enc["attention_mask"], mask))
        return torch.cat(chunks, dim=1)

    vectors = _in_eval_mode(run, model, sentences)
    out = torch.empty_like(vectors)
    out[:, order] = vectors
    return out


def texts_hash(texts: list[str]) -> str:
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()


def model_identity(model, tokenizer) -> str:
    """Hash of the encoder's class, every parameter's bytes and the tokenizer's definition.

    Changes whenever a weight changes (a training step, another checkpoint), whatever the path.
    """
    h = hashlib.sha256()
    encoder = model.masked_lm.base_model
    h.update(type(encoder).__name__.encode())
    for name, param in encoder.named_parameters():
        h.update(f"{name}:{tuple(param.shape)}:{param.dtype}".encode())
        h.update(param.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    h.update(tokenizer.backend_tokenizer.to_str().encode())
    return h.hexdigest()


def cached(cache_dir: str | Path | None, key_parts, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``fn()``, stored as ``<cache_dir>/<sha256 of key_parts>.pt`` and loaded from there next time.

    ``key_parts`` must be JSON-serialisable and identify the result (model identity, task,
    language, texts hash, encoding settings). ``cache_dir=None`` disables the cache.
    """
    if cache_dir is None:
        return fn()
    key = hashlib.sha256(json.dumps(list(key_parts), ensure_ascii=False).encode()).hexdigest()
    path = Path(cache_dir) / f"{key}.pt"
    if path.is_file():
        return torch.load(path, weights_only=True)
    value = fn()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    torch.save(value, tmp)
    os.replace(tmp, path)  # concurrent writers never leave a half-written file under the final name
    return value


@dataclass(frozen=True)
class EncodingCache:
    """Where vectors of one model are cached; build with :meth:`for_model` (hashes the weights once)."""

    directory: Path
    model_id: str

    @classmethod
    def for_model(cls, directory: str | Path, model, tokenizer) -> EncodingCache:
        return cls(Path(directory), model_identity(model, tokenizer))


def _through_cache(
    cache: EncodingCache | None, kind: str, lang: str, texts: list[str], length: int, run: Callable[[], torch.Tensor]
) -> torch.Tensor:
    """``run()``, through ``cache`` when given, keyed by the model, the kind and language, the texts and
    the length limit (the batch size does not change the vectors)."""
    if cache is None:
        return run()
    return cached(cache.directory, (cache.model_id, kind, lang, texts_hash(texts), length), run)


def word_vectors(
    model,
    tokenizer,
    words: list[str],
    lang: str,
    cache: EncodingCache | None = None,
    max_tokens: int = 16,
    batch_size: int = 256,
) -> torch.Tensor:
    """:func:`encode_words_all_layers`, through ``cache`` when given."""
    return _through_cache(
        cache,
        "words",
        lang,
        words,
        max_tokens,
        lambda: encode_words_all_layers(model, tokenizer, words, max_tokens, batch_size),
    )


def sentence_vectors(
    model,
    tokenizer,
    sentences: list[str],
    lang: str,
    cache: EncodingCache | None = None,
    max_length: int = 128,
    batch_size: int = 64,
) -> torch.Tensor:
    """:func:`encode_sentences_all_layers`, through ``cache`` when given."""
    return _through_cache(
        cache,
        "sentences",
        lang,
        sentences,
        max_length,
        lambda: encode_sentences_all_layers(model, tokenizer, sentences, max_length, batch_size),
    )
