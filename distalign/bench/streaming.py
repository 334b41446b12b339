"""Streaming benchmark: the driver's memory and the time to the first step do not grow with the corpus.

    distalign bench streaming                 # 20 MB vs 2 GB corpora, 100 MLM steps each
    distalign bench streaming --sizes-mb 20,200 --steps 30

For each size, one corpus of many ``.txt`` shards is written (sentences of the synthetic world's
first language, repeated to the size), then ``distalign train`` runs as a subprocess (MLM only, 2
workers, local Ray) while this process samples the driver's resident memory every 0.2 s and
watches its output for the first training step. The table goes to stdout and ``results.md``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SHARD_MB = 32


@dataclass
class StreamingResult:
    corpus_mb: float
    files: int
    first_step_s: float  # command start to the first logged step
    total_s: float
    driver_peak_rss_mb: float
    returncode: int


def write_corpus(directory: Path, size_mb: float, seed_sentences: list[str]) -> int:
    """Shards of ``SHARD_MB`` (the last one smaller) holding ``seed_sentences`` over and over; returns the count."""
    directory.mkdir(parents=True, exist_ok=True)
    block = ("\n".join(seed_sentences) + "\n").encode()
    remaining, shard = int(size_mb * 2**20), 0
    while remaining > 0:
        size = min(remaining, SHARD_MB * 2**20)
        with open(directory / f"part-{shard:05d}.txt", "wb") as f:
            written = 0
            while written < size:
                piece = block[: size - written]
                f.write(piece)
                written += len(piece)
            f.write(b"\n")
        remaining -= size
        shard += 1
    return shard


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_one(config: Path, corpus: Path, size_mb: float, files: int, steps: int, home: Path,
            extra: list[str]) -> StreamingResult:
    """One ``distalign train`` on ``corpus``: driver peak RSS and time to the first step."""
    command = [sys.executable, "-m", "distalign.cli", "train", str(config), f"run.name=stream-{int(size_mb)}mb-{int(time.time())}",  # a new run, never a resume
               "data.source=files", f"data.corpora=[{{path: {corpus}, lang: xa}}]", "objectives.lexical.weight=0",
               "objectives.mlm.weight=1", f"train.max_steps={steps}", "train.log_every=1", "eval.every=0",
               f"train.checkpoint_every={steps}", *extra]
    env = {**os.environ, "DISTALIGN_HOME": str(home), "PYTHONUNBUFFERED": "1"}  # its lines as they come
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RAY_ADDRESS", None)
    started = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak, first_step, done = 0.0, 0.0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, rss_mb(process.pid))
            except OSError:
                return
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    tail: list[str] = []
    for line in process.stdout:
        tail = (tail + [line])[-40:]
        if not first_step and f"step 1/{steps}" in line:
            first_step = time.time() - started
            print(f"  {size_mb:.0f} MB: first step after {first_step:.1f} s", flush=True)
    process.wait()
    done.set()
    sampler.join()
    if process.returncode:
        print("".join(tail), file=sys.stderr)
    return StreamingResult(size_mb, files, first_step, time.time() - started, peak, process.returncode)


def run_streaming_bench(config: Path, sizes_mb: list[float], steps: int, out_dir: Path,
                        extra: list[str] | None = None) -> list[StreamingResult]:
    from distalign.config import load_config
    from distalign.data.synthetic import generate_world

    out_dir.mkdir(parents=True, exist_ok=True)
    world = generate_world(load_config(config).data.synthetic, out_dir / "world", seed=0)
    sentences = Path(next(iter(world.corpora.values()))).read_text().splitlines()
    results = []
    for size in sizes_mb:
        corpus = out_dir / f"corpus-{int(size)}mb"
        files = write_corpus(corpus, size, sentences) if not corpus.is_dir() else len(list(corpus.glob("*.txt")))
        print(f"corpus {corpus}: {size:.0f} MB in {files} files; training {steps} steps", flush=True)
        results.append(run_one(config, corpus, size, files, steps, out_dir / "home", extra or []))
    table = format_table(results)
    print(table)
    (out_dir / "results.md").write_text(table + "\n")
    return results


def format_table(results: list[StreamingResult]) -> str:
    rows = ["| corpus | files | time to first step | whole run | driver peak RSS | exit |",
            "|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        size = f"{r.corpus_mb / 1024:.1f} GB" if r.corpus_mb >= 1024 else f"{r.corpus_mb:.0f} MB"
        rows.append(f"| {size} | {r.files} | {r.first_step_s:.1f} s | {r.total_s:.1f} s | "
                    f"{r.driver_peak_rss_mb:.0f} MB | {r.returncode} |")
    return "\n".join(rows)
