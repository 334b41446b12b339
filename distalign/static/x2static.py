"""Static word vectors distilled from a contextual encoder: X2Static.

Gupta & Jaggi (2021), "Obtaining Better Static Word Embeddings Using Contextual Embedding
Models", ACL; the static vectors Hämmerl et al. (2022) align XLM-R/mBERT to. A CBOW-like
objective in which the *context* side comes from a frozen teacher encoder:

* for an occurrence of target word ``w`` in a sentence, its subword tokens are replaced by the
  mask token and the sentence is encoded; the context vector ``c`` is the mean of the teacher's
  states at ``layer`` over the sentence's remaining real tokens (the target, special tokens and
  padding excluded);
* the static vector ``u_w`` (a row of a trainable ``[|V|, hidden]`` table; its dimension must
  be the teacher's hidden size for the dot product) is trained with negative sampling::

      loss = -log σ(u_w · c) - Σ_{n=1..K} log σ(-u_n · c),    K = 10 by default,

  negatives ``n ≠ w`` drawn with probability ∝ count(n)^0.5, loss averaged over the batch;
* frequent targets are subsampled as in word2vec: an occurrence of ``w`` (corpus frequency
  ``f``) is kept with probability ``min(1, sqrt(t/f) + t/f)``, drawn anew each epoch. Only
  targets are subsampled; the teacher always sees the whole sentence.

Scaling ``t`` for small corpora: ``t = 1e-5`` suits large corpora, but in a corpus of a few
thousand tokens every word has ``f > 1e-4`` and nearly all occurrences would be dropped. We use
``t_eff = max(t, 1/|V|)``: for a 100k-word vocabulary this is the usual 1e-5, and in general a
word no more frequent than a uniform share of the vocabulary is never subsampled.

Optimisation: Adam on the sparse table (SparseAdam) with the learning rate decaying linearly
towards 0 over the expected number of kept occurrences (word2vec's schedule); Adam makes the
step size independent of the scale of the teacher's states (it differs between layers/models).
Words are whitespace tokens, as everywhere in distalign (``encode_sentences``). The frozen teacher
gives the same context every epoch, so contexts are cached after their first use when they fit
in ``cache_bytes``.

Example
-------
>>> words, vectors = extract_static_vectors("xlm-roberta-base", sentences, layer=6)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import AutoConfig, AutoModel

from distalign.data.readers import ReadReport, read_corpus
from distalign.data.tokenize import encode_sentences
from distalign.device import use_tensor_cores
from distalign.errors import ConfigError, InputError
from distalign.models.attention import prepared_masks
from distalign.models.loading import load_tokenizer
from distalign.models.pooling import mean_pool
from distalign.static.word2vec_format import write_word2vec

log = logging.getLogger("distalign")

NEGATIVE_POWER = 0.5  # negatives ∝ count^0.5


def negative_sampling_loss(
    static_target: torch.Tensor, context: torch.Tensor, static_negatives: torch.Tensor
) -> torch.Tensor:
    """Batch mean of ``-log σ(u_w·c) - Σ_k log σ(-u_k·c)``: ``[B, d]``, ``[B, d]``, ``[B, K, d]`` -> scalar."""
    if static_target.dim() != 2 or static_target.shape != context.shape:
        raise ValueError(
            f"static_target and context must both be [B, d], got {tuple(static_target.shape)} "
            f"and {tuple(context.shape)}"
        )
    if static_negatives.dim() != 3 or static_negatives.shape[0::2] != context.shape:
        raise ValueError(
            f"static_negatives must be [B, K, d] = [{context.shape[0]}, K, {context.shape[1]}], "
            f"got {tuple(static_negatives.shape)}"
        )
    positive = (static_target * context).sum(-1)  # [B]
    negative = torch.einsum("bkd,bd->bk", static_negatives, context)  # [B, K]
    return -(F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1)).mean()


@dataclass
class WordVocab:
    """Whitespace words by descending count (ties alphabetical), with their corpus counts."""

    words: list[str]
    counts: np.ndarray  # int64 [|V|]


def build_word_vocab(sentences: Sequence[str], min_count: int = 1, max_words: int | None = None) -> WordVocab:
    """The words occurring at least ``min_count`` times, the ``max_words`` most frequent ones."""
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if max_words is not None and max_words < 1:
        raise ValueError(f"max_words must be >= 1 or None, got {max_words}")
    counts = Counter(word for sentence in sentences for word in sentence.split())
    kept = sorted((item for item in counts.items() if item[1] >= min_count), key=lambda kv: (-kv[1], kv[0]))
    kept = kept[:max_words]
    return WordVocab([w for w, _ in kept], np.array([c for _, c in kept], dtype=np.int64))


def effective_subsample_threshold(t: float, vocab_size: int) -> float:
    """``max(t, 1/|V|)`` (see the module docstring: small corpora are not wiped out)."""
    if not t > 0:
        raise ValueError(f"subsample threshold t must be > 0, got {t}")
    return max(t, 1.0 / vocab_size)


def keep_probabilities(counts: np.ndarray, t: float) -> np.ndarray:
    """word2vec subsampling: keep an occurrence of w with ``min(1, sqrt(t/f_w) + t/f_w)``, f = count/total."""
    ratio = t / (counts / counts.sum())
    return np.minimum(1.0, np.sqrt(ratio) + ratio)


def find_occurrences(sentences: Sequence[str], vocab: WordVocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sentence index, word position, vocabulary id) of every in-vocabulary word token."""
    index = {word: i for i, word in enumerate(vocab.words)}
    found = [
        (s, pos, index[word])
        for s, sentence in enumerate(sentences)
        for pos, word in enumerate(sentence.split())
        if word in index
    ]
    columns = np.array(found, dtype=np.int64).reshape(-1, 3)
    return columns[:, 0], columns[:, 1], columns[:, 2]


@torch.no_grad()
def context_vectors(
    model: torch.nn.Module,
    tokenizer,
    sentences: Sequence[str],
    target_positions: Sequence[int],
    layer: int,
    max_length: int = 128,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher context vectors of targets: ``[B, d]`` means and a ``[B]`` validity mask.

    ``target_positions[i]`` is the index of the target among ``sentences[i].split()``. Its
    subwords become the mask token; ``c`` is the mean of the layer-``layer`` states of the other
    real tokens. A row is invalid when truncation dropped the target or it has no context token.
    """
    if len(sentences) != len(target_positions):
        raise ValueError(f"{len(sentences)} sentences but {len(target_positions)} target_positions")
    enc = encode_sentences(tokenizer, list(sentences), max_length)
    width = int(enc["attention_mask"].sum(1).max())  # trim the padding encode_sentences adds
    device = next(model.parameters()).device
    input_ids, attention, word_ids = (
        torch.from_numpy(enc[k][:, :width]).to(device) for k in ("input_ids", "attention_mask", "word_ids")
    )
    target = word_ids == torch.as_tensor(np.asarray(target_positions), device=device)[:, None]
    input_ids = input_ids.masked_fill(target, tokenizer.mask_token_id)
    hidden = model(input_ids=input_ids, attention_mask=attention, output_hidden_states=True).hidden_states[layer]
    context = (word_ids >= 0) & ~target  # word_ids is -1 at special tokens and padding
    return mean_pool(hidden, context), target.any(1) & context.any(1)


def load_teacher(model_name_or_path: str, layer: int) -> tuple[torch.nn.Module, object, int]:
    """Frozen encoder cut after ``layer`` (layers above it are never needed), its tokenizer, the absolute layer.

    ``layer`` indexes ``hidden_states``: 0 = embeddings, L = last, negative counts from the end.
    """
    num_layers = AutoConfig.from_pretrained(model_name_or_path).num_hidden_layers
    if not -(num_layers + 1) <= layer <= num_layers:
        raise ConfigError(
            f"layer {layer} is outside [{-(num_layers + 1)}, {num_layers}], the layers of "
            f"{model_name_or_path} (0 = embeddings, negative from the end): give one in that range"
        )
    layer %= num_layers + 1
    # The cut-off layers (and the unused MLM head/pooler) would be reported as unexpected/missing weights.
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        model = prepared_masks(AutoModel.from_pretrained(model_name_or_path, num_hidden_layers=max(layer, 1)))
    finally:
        transformers.logging.set_verbosity(verbosity)
    model.requires_grad_(False).eval()
    return model, load_tokenizer(model_name_or_path), layer


def negative_distribution(counts: np.ndarray) -> np.ndarray:
    """Noise distribution of the negatives: ``count^0.5`` normalised."""
    weights = counts.astype(np.float64) ** NEGATIVE_POWER
    return weights / weights.sum()


def sample_negatives(
    probabilities: torch.Tensor, targets: torch.Tensor, k: int, generator: torch.Generator
) -> torch.Tensor:
    """``[B, k]`` word ids drawn from ``probabilities``, redrawn where equal to the row's target."""
    negatives = torch.multinomial(probabilities, targets.numel() * k, replacement=True, generator=generator).view(-1, k)
    clash = negatives == targets[:, None]
    while clash.any():
        negatives[clash] = torch.multinomial(probabilities, int(clash.sum()), replacement=True, generator=generator)
        clash = negatives == targets[:, None]
    return negatives


class OccurrenceContexts:
    """Teacher context vectors of occurrence ``i`` (``sentences[i]``, ``positions[i]``), on demand.

    The teacher is frozen and deterministic (eval mode), so every epoch would recompute the same
    vectors; when ``[n, hidden]`` float32 fits in ``cache_bytes`` each is computed once and kept.
    """

    def __init__(
        self,
        teacher,
        tokenizer,
        sentences: Sequence[str],
        positions: np.ndarray,
        layer: int,
        max_length: int,
        cache_bytes: int,
    ):
        self.compute = lambda rows: context_vectors(
            teacher, tokenizer, [sentences[i] for i in rows], positions[rows], layer, max_length
        )
        n, dim = len(sentences), teacher.config.hidden_size
        device = next(teacher.parameters()).device
        fits = n * dim * 4 <= cache_bytes
        self.vectors = torch.empty(n, dim, device=device) if fits else None
        self.valid = torch.zeros(n, dtype=torch.bool, device=device)
        self.known = np.zeros(n, dtype=bool)

    def __call__(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, hidden]`` contexts and ``[B]`` validity (see :func:`context_vectors`) of occurrences ``rows``."""
        if self.vectors is None:
            return self.compute(rows)
        todo = rows[~self.known[rows]]
        if len(todo):
            todo_tensor = torch.as_tensor(todo, device=self.valid.device)
            self.vectors[todo_tensor], self.valid[todo_tensor] = self.compute(todo)
            self.known[todo] = True
        rows_tensor = torch.as_tensor(rows, device=self.valid.device)
        return self.vectors[rows_tensor], self.valid[rows_tensor]


def log_progress(info: dict) -> None:
    log.info(
        "x2static epoch %d step %d: loss %.4f  lr %.2e  %.0f words/s",
        info["epoch"],
        info["step"],
        info["loss"],
        info["lr"],
        info["words_per_s"],
    )


def extract_static_vectors(
    model_name_or_path: str,
    sentences: Sequence[str],
    layer: int = 6,
    epochs: int = 1,
    lr: float = 1e-3,
    negatives: int = 10,
    batch_size: int = 64,
    min_count: int = 1,
    max_words: int | None = None,
    subsample_t: float = 1e-5,
    max_length: int = 128,
    seed: int = 0,
    device: str | None = None,
    log_every: int = 100,
    progress: Callable[[dict], None] | None = log_progress,
    cache_bytes: int = 2 * 1024**3,
) -> tuple[list[str], np.ndarray]:
    """Train X2Static vectors (module docstring) for the corpus' words; returns words and float32 vectors.

    ``progress`` gets ``{epoch, step, loss, lr, words_per_s}`` every ``log_every`` batches (loss and
    speed over those batches); ``None`` is silent. Context vectors are kept after their first
    computation when all of them fit in ``cache_bytes`` (later epochs then skip the teacher).
    """
    for name, value in (
        ("epochs", epochs),
        ("negatives", negatives),
        ("batch_size", batch_size),
        ("log_every", log_every),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    vocab = build_word_vocab(sentences, min_count, max_words)
    if len(vocab.words) < 2:
        raise InputError(
            f"the corpus ({len(sentences)} sentences) gives {len(vocab.words)} words seen at least "
            f"min_count={min_count} times (--min-count): at least 2 are needed, so no vectors were "
            "written; give a larger corpus or a lower --min-count"
        )
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    use_tensor_cores(device)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    generator = torch.Generator(device=device).manual_seed(seed)

    teacher, tokenizer, layer = load_teacher(model_name_or_path, layer)
    teacher.to(device)
    dim = teacher.config.hidden_size
    table = torch.nn.Embedding(len(vocab.words), dim, sparse=True, device=device)
    torch.nn.init.uniform_(table.weight, -0.5 / dim, 0.5 / dim)  # word2vec's initialisation
    optimizer = torch.optim.SparseAdam(table.parameters(), lr=lr)

    sentence_ids, positions, word_ids = find_occurrences(sentences, vocab)
    contexts = OccurrenceContexts(
        teacher, tokenizer, [sentences[i] for i in sentence_ids], positions, layer, max_length, cache_bytes
    )
    keep = keep_probabilities(vocab.counts, effective_subsample_threshold(subsample_t, len(vocab.words)))[word_ids]
    expected_words = max(epochs * keep.sum(), 1.0)
    weights = torch.as_tensor(negative_distribution(vocab.counts), dtype=torch.float, device=device)

    done, step, window_loss, window_words, window_start = 0, 0, 0.0, 0, time.perf_counter()
    for epoch in range(epochs):
        kept = rng.permutation(np.flatnonzero(rng.random(len(keep)) < keep))
        for start in range(0, len(kept), batch_size):
            batch = kept[start : start + batch_size]
            context, valid = contexts(batch)
            done += len(batch)
            if not valid.any():
                continue
            targets = torch.as_tensor(word_ids[batch], device=device)[valid]
            noise = sample_negatives(weights, targets, negatives, generator)
            loss = negative_sampling_loss(table(targets), context[valid], table(noise))
            optimizer.param_groups[0]["lr"] = lr * max(1.0 - done / expected_words, 1e-4)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            window_loss += loss.item()
            window_words += len(batch)
            if progress is not None and step % log_every == 0:
                elapsed = time.perf_counter() - window_start
                progress(
                    {
                        "epoch": epoch,
                        "step": step,
                        "loss": window_loss / log_every,
                        "lr": optimizer.param_groups[0]["lr"],
                        "words_per_s": window_words / elapsed,
                    }
                )
                window_loss, window_words, window_start = 0.0, 0, time.perf_counter()
    return vocab.words, table.weight.detach().cpu().numpy()


def extract_to_file(
    model_name_or_path: str, corpus_paths: Sequence[str | Path], out_path: str | Path, layer: int = 6, **options
) -> dict:
    """Read corpora (``.txt`` one sentence a line, ``.jsonl``, ``.parquet``), extract, write word2vec text.

    ``options`` go to :func:`extract_static_vectors`. Returns ``{"sentences", "words", "path", "reports"}``
    with one :class:`ReadReport` per corpus.
    """
    if not corpus_paths:
        raise ValueError("corpus_paths is empty")
    sentences: list[str] = []
    reports: list[ReadReport] = []
    for path in corpus_paths:
        table, report = read_corpus(path, lang="")
        sentences.extend(table["text"].to_pylist())
        reports.append(report)
    if not sentences:
        raise InputError(
            f"{', '.join(map(str, corpus_paths))}: no sentences: give a corpus with a sentence a line "
            "(.txt), or a 'text' field (.jsonl, .parquet)"
        )
    words, vectors = extract_static_vectors(model_name_or_path, sentences, layer=layer, **options)
    path = write_word2vec(out_path, words, vectors)
    return {"sentences": len(sentences), "words": len(words), "path": path, "reports": reports}
