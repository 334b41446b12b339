"""Tokens a CPU core feeds a GPU: the corpus stream's item path (``item_blocks``: read, shuffle, tokenise, pack,
mask, unpadded int32 blocks) timed in this process on one core, against the tokens per second one GPU trains on.

    distalign bench streaming --parts tokenize                               # the synthetic world's sentences
    distalign bench streaming --parts tokenize --text corpus.txt --seq-length 512 --tokenize-mb 8

The tokenizer is a SentencePiece Unigram (XLM-R's kind) trained on the text with ``--vocab-size`` pieces, the
model's masking is the MLM's (whole words, 15 %). The Rust tokenizer runs on one thread (``RAYON_NUM_THREADS=1``,
set before its first encoding), and the figure is tokens per CPU second of this process: real tokens (attention
mask ones), the specials included, as the GPU's tokens/s count them. ``cores per GPU`` is the GPU's rate over it.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

# One GPU's consumption at XLM-R-base size (bf16, 64 x 512 tokens a step, DDP): the H200 bench row of
# docs/benchmarks.md (first run, 2026-11-28, 12.5 % MFU). An H100 SXM has the same dense bf16 peak (989 TFLOPS),
# so a step bound by its matrix products consumes about as many tokens a second.
GPU_TOKENS_PER_S = 170_355
GPU_MFU = 0.125  # of that row: the rate scaled to the project's 40 % MFU goal is GPU_TOKENS_PER_S * 0.40 / GPU_MFU
MFU_GOAL = 0.40


@dataclass(kw_only=True)
class FeedResult:
    packed: bool
    seq_length: int
    text_bytes: int
    sequences: int
    tokens: int  # attention-mask ones of the blocks
    cpu_s: float  # this process's CPU time over the item path
    wall_s: float
    stored_bytes: int  # the blocks as they go through the object store (``RaggedRows.nbytes``)
    padded_bytes: int  # the same blocks' B,T tensors padded to seq_length as int64 (before)

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.tokens / self.cpu_s

    def cores_per_gpu(self, gpu_tokens_per_s: float) -> float:
        return gpu_tokens_per_s / self.tokens_per_cpu_s


def feed_texts(text: Path | None, config: Path, out_dir: Path) -> list[str]:
    """The sentences to feed: ``text``'s lines, or the synthetic world's first language of ``config``."""
    if text is not None:
        return [line for line in text.read_text().splitlines() if line.strip()]
    from distalign.config import load_config
    from distalign.data.synthetic import generate_world

    world = generate_world(load_config(config).data.synthetic, out_dir / "world", seed=0)
    return Path(next(iter(world.corpora.values()))).read_text().splitlines()


def measure_feed(
    texts: list[str],
    out_dir: Path,
    size_mb: float,
    seq_length: int,
    vocab_size: int,
    packs: tuple[bool, ...] = (True, False),
) -> list[FeedResult]:
    """The item path over ``size_mb`` of ``texts`` (repeated to the size), once per packing setting."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before the tokenizer's thread pool starts: one core
    from distalign.config import TinyModelConfig
    from distalign.data.batches import padded_names
    from distalign.data.corpus_plan import grouped
    from distalign.data.corpus_stream import CorpusStream, list_corpus_files
    from distalign.data.sources import CorpusSource
    from distalign.data.stream_plugins import STREAMS, SentenceTokens
    from distalign.languages import LanguageCode
    from distalign.models.loading import build_tiny_model
    from distalign.objectives.mlm import MLMMasking, MLMObjective
    from distalign.preparation.ray_streams import StreamBatchJob, item_blocks

    text_key = hashlib.blake2b("\n".join(texts).encode(), digest_size=4).hexdigest()
    model = out_dir / f"feed-model-{vocab_size}-{text_key}"  # reused by a later invocation on the same text
    if not model.is_dir():
        build_tiny_model(
            model,
            texts,
            TinyModelConfig(
                vocab_size=vocab_size,
                hidden_size=16,
                num_layers=1,
                num_heads=2,
                intermediate_size=16,
                max_length=seq_length,
            ),
        )
    corpus = out_dir / "feed-corpus.txt"
    block = ("\n".join(texts) + "\n").encode()
    corpus.write_bytes(block * max(1, round(size_mb * 2**20 / len(block))))
    stream = CorpusStream([list_corpus_files(CorpusSource(str(corpus), LanguageCode("xa")), "feed")])
    corpus_stream = STREAMS["corpus"]
    padded = padded_names(corpus_stream.tensors + MLMObjective.prepares)
    masking = MLMMasking.for_tokenizer(str(model), 0.15, "word")
    results = []
    for pack in packs:
        job = StreamBatchJob(
            corpus_stream, str(model), SentenceTokens(seq_length, ("xa",), pack), masking, 0, "", padded
        )
        items = grouped(stream.units(), 0, 4)
        list(item_blocks(items[0], 0, stream, job))  # warm: the tokenizer loaded, its pool started
        started, cpu = time.perf_counter(), time.process_time()
        sequences = tokens = stored = padded_bytes = 0
        for index, item in enumerate(items):
            for rows in item_blocks(item, index, stream, job):
                sequences += len(rows)
                tokens += int(rows.tokens["attention_mask"].sum())
                stored += rows.nbytes
                padded_bytes += len(rows) * seq_length * 8 * len(rows.tokens) + sum(
                    column.nbytes for column in rows.columns.values()
                )
        results.append(
            FeedResult(
                packed=pack,
                seq_length=seq_length,
                text_bytes=corpus.stat().st_size,
                sequences=sequences,
                tokens=tokens,
                cpu_s=time.process_time() - cpu,
                wall_s=time.perf_counter() - started,
                stored_bytes=stored,
                padded_bytes=padded_bytes,
            )
        )
    return results


def format_feed_table(results: list[FeedResult], gpu_tokens_per_s: float = GPU_TOKENS_PER_S) -> str:
    goal = gpu_tokens_per_s * MFU_GOAL / GPU_MFU
    rows = [
        f"| sequences | T | text | tokens / CPU s | text / CPU s | object store / token (before: padded int64) | "
        f"cores per GPU at {gpu_tokens_per_s:,.0f} tokens/s | at {goal:,.0f} tokens/s (40 % MFU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {'packed' if r.packed else 'one sentence each'} | {r.seq_length} | "
            f"{r.text_bytes / 2**20:.1f} MB | {r.tokens_per_cpu_s:,.0f} | "
            f"{r.text_bytes / r.cpu_s / 1e3:,.0f} KB/s | {r.stored_bytes / r.tokens:.1f} B "
            f"({r.padded_bytes / r.tokens:.0f} B) | {r.cores_per_gpu(gpu_tokens_per_s):.2f} | "
            f"{r.cores_per_gpu(goal):.2f} |"
        )
    return "\n".join(rows)
