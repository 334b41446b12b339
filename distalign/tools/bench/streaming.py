"""Streaming benchmark: each corpus byte is read once, the workers' shares are even, and the driver's memory
and the time to the first step do not grow with the corpus.

    distalign bench streaming                 # both parts, defaults below
    distalign bench streaming --parts io --io-sizes-mb 16,64 --workers 1,2,4,8 --nodes 2
    distalign bench streaming --parts train --sizes-mb 20,200 --steps 30

For each size, one corpus of many ``.txt`` shards is written (sentences of the synthetic world's first
language, repeated to the size). Then:

- ``io``: on ``--nodes`` ``ray start`` nodes on loopback, for each number of workers W, one Ray task per
  worker (spread over the nodes) reads its share of one epoch as training deals it (``fresh_items``,
  ``read_unit``), from the corpus on S3 (moto's server, behind a proxy that counts the GET bytes it
  serves, ranged reads included) and from local files (through a filesystem that counts the bytes its
  files hand out, in each worker). Bytes read ÷ corpus bytes, rows per worker (max ÷ mean), each worker's
  rows/s and the time to its first rows.
- ``train``: ``distalign train`` runs as a subprocess (MLM only, 2 workers, local Ray) while this process
  samples the driver's resident memory every 0.2 s and watches its output for the first training step.

The tables go to stdout and ``results.md``; with ``--plot``, the I/O figures to a PNG.
"""

from __future__ import annotations

import io
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


def run_one(
    config: Path, corpus: Path, size_mb: float, files: int, steps: int, home: Path, extra: list[str]
) -> StreamingResult:
    """One ``distalign train`` on ``corpus``: driver peak RSS and time to the first step."""
    command = [
        sys.executable,
        "-m",
        "distalign.cli",
        "train",
        str(config),
        f"run.name=stream-{int(size_mb)}mb-{int(time.time())}",  # a new run, never a resume
        "data.source=files",
        f"data.corpora=[{{path: {corpus}, lang: xa}}]",
        "objectives.lexical.weight=0",
        "objectives.mlm.weight=1",
        f"train.max_steps={steps}",
        "train.log_every=1",
        "eval.every=0",
        f"train.checkpoint_every={steps}",
        *extra,
    ]
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


def write_corpora(config: Path, sizes_mb: list[float], out_dir: Path) -> dict[float, Path]:
    """A corpus directory per size under ``out_dir`` (one already there is reused)."""
    from distalign.config import load_config
    from distalign.data.synthetic import generate_world

    out_dir.mkdir(parents=True, exist_ok=True)
    world = generate_world(load_config(config).data.synthetic, out_dir / "world", seed=0)
    sentences = Path(next(iter(world.corpora.values()))).read_text().splitlines()
    corpora = {}
    for size in sizes_mb:
        corpus = out_dir / f"corpus-{int(size)}mb"
        files = write_corpus(corpus, size, sentences) if not corpus.is_dir() else len(list(corpus.glob("*.txt")))
        print(f"corpus {corpus}: {size:.0f} MB in {files} files", flush=True)
        corpora[size] = corpus
    return corpora


def run_streaming_bench(
    config: Path, sizes_mb: list[float], steps: int, out_dir: Path, extra: list[str] | None = None
) -> list[StreamingResult]:
    results = []
    for size, corpus in write_corpora(config, sizes_mb, out_dir).items():
        print(f"training {steps} steps on {corpus}", flush=True)
        results.append(
            run_one(config, corpus, size, len(list(corpus.glob("*.txt"))), steps, out_dir / "home", extra or [])
        )
    table = format_table(results)
    print(table)
    (out_dir / "results.md").write_text(table + "\n")
    return results


def format_table(results: list[StreamingResult]) -> str:
    rows = [
        "| corpus | files | time to first step | whole run | driver peak RSS | exit |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        size = f"{r.corpus_mb / 1024:.1f} GB" if r.corpus_mb >= 1024 else f"{r.corpus_mb:.0f} MB"
        rows.append(
            f"| {size} | {r.files} | {r.first_step_s:.1f} s | {r.total_s:.1f} s | "
            f"{r.driver_peak_rss_mb:.0f} MB | {r.returncode} |"
        )
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------
# I/O: bytes read from storage and each worker's share, W = 1, 2, 4, 8 on loopback nodes


@dataclass(kw_only=True)
class ReadResult:
    storage: str  # s3 | local
    corpus_mb: float
    units: int
    workers: int
    corpus_bytes: int
    bytes_read: int  # as storage counted them: GET bodies served (S3), bytes the files handed out (local)
    rows: list[int]  # per worker
    seconds: list[float]  # per worker: reading its share
    first_rows_s: list[float]  # per worker: to the rows of its first unit
    nodes: int  # nodes the workers ran on

    @property
    def amplification(self) -> float:
        return self.bytes_read / self.corpus_bytes

    @property
    def rows_spread(self) -> float:
        """The most rows a worker read over the mean (1: even)."""
        return max(self.rows) / (sum(self.rows) / len(self.rows))

    @property
    def rows_per_s(self) -> list[float]:
        return [r / s for r, s in zip(self.rows, self.seconds)]


class CountingFile(io.FileIO):
    """A local file that adds what it hands out to ``COUNTED`` (this process's bytes read)."""

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        COUNTED[0] += len(data)
        return data


COUNTED = [0]


def counting_local_filesystem():
    """A pyarrow filesystem of local files whose input files count their bytes (``CountingFile``)."""
    import fsspec
    import pyarrow as pa
    import pyarrow.fs

    class Handler(pyarrow.fs.FSSpecHandler):
        def open_input_file(self, path):
            return pa.PythonFile(CountingFile(path), mode="r")

    return pyarrow.fs.PyFileSystem(Handler(fsspec.filesystem("file")))


def read_share(stream, units: list, workers: int, rank: int, seed: int, mix_units: int) -> dict:
    """One worker's share of epoch 0, read as training deals and reads it; its rows, time and bytes counted."""
    import ray

    from distalign.data.corpus_plan import fresh_items
    from distalign.data.corpus_stream import SkipLedger, read_unit

    ledger, counted, rows, first = SkipLedger(), COUNTED[0], 0, 0.0
    started = time.perf_counter()
    for item in fresh_items(units, seed, 0, workers, rank, mix_units):
        for unit in item.units:
            rows += len(read_unit(stream, unit, 0, seed, ledger)["row"])
            first = first or time.perf_counter() - started
    if ledger.files:
        raise RuntimeError(f"worker {rank} skipped files: {ledger.files}")
    return {
        "rows": rows,
        "seconds": time.perf_counter() - started,
        "first_s": first,
        "counted": COUNTED[0] - counted,
        "node": ray.get_runtime_context().get_node_id() if ray.is_initialized() else "",
    }


def read_epoch(stream, storage: str, size_mb: float, workers: int, unit_bytes: int, bytes_read) -> ReadResult:
    """Epoch 0 read by ``workers`` Ray tasks spread over the nodes; ``bytes_read(shares)``: what storage served."""
    import dataclasses

    import ray

    stream = dataclasses.replace(stream, unit_bytes=unit_bytes)
    units = stream.units()
    task = ray.remote(read_share).options(num_cpus=1, scheduling_strategy="SPREAD")
    shares = ray.get([task.remote(stream, units, workers, rank, 0, 4) for rank in range(workers)])
    corpus_bytes = sum(sum(s.sizes) for s in stream.sources)
    return ReadResult(
        storage=storage,
        corpus_mb=size_mb,
        units=len(units),
        workers=workers,
        corpus_bytes=corpus_bytes,
        bytes_read=bytes_read(shares),
        rows=[s["rows"] for s in shares],
        seconds=[s["seconds"] for s in shares],
        first_rows_s=[s["first_s"] for s in shares],
        nodes=len({s["node"] for s in shares}),
    )


def run_io_bench(
    corpora: dict[float, Path], workers: list[int], nodes: int, unit_bytes: int, out_dir: Path
) -> list[ReadResult]:
    """Every corpus read on S3 (moto behind a counting proxy) and locally, by each number of workers; each result
    merged into ``out_dir/results-io.json`` as it comes (an invocation cut short keeps what it measured)."""
    import boto3
    import ray

    from distalign.data.corpus_stream import CorpusStream, list_corpus_files
    from distalign.data.sources import CorpusSource
    from distalign.storage import s3_filesystem
    from distalign.tools.bench.loopback import moto_server, ray_nodes
    from distalign.tools.bench.s3_proxy import S3Proxy

    results = []
    cpus = max(1, -(-max(workers) // nodes))  # per node: the most workers fit, one CPU each
    with moto_server() as url, S3Proxy(url) as proxy, ray_nodes(nodes, cpus, out_dir / "ray-logs") as address:
        s3 = boto3.client("s3", endpoint_url=url)
        s3.create_bucket(Bucket="corpus")
        ray.init(address=address, logging_level="WARNING")
        try:
            for size, directory in corpora.items():
                prefix = f"{int(size)}mb"
                for path in sorted(directory.glob("*.txt")):
                    s3.upload_file(str(path), "corpus", f"{prefix}/{path.name}")
                listings = {
                    "s3": CorpusStream(
                        [list_corpus_files(CorpusSource(f"s3://corpus/{prefix}/", "xa"), "corpus", s3_filesystem(url))],
                        s3_filesystem(proxy.url),
                    ),
                    "local": CorpusStream(
                        [list_corpus_files(CorpusSource(str(directory), "xa"), "corpus")], counting_local_filesystem()
                    ),
                }
                for w in workers:
                    for storage, stream in listings.items():
                        proxy.reset()
                        count = (
                            (lambda shares, under=f"corpus/{prefix}/": proxy.tally.bytes_under(under))
                            if storage == "s3"
                            else (lambda shares: sum(s["counted"] for s in shares))
                        )
                        result = read_epoch(stream, storage, size, w, unit_bytes, count)
                        print(
                            f"  {storage} {size:.0f} MB, {w} workers: read {result.amplification:.3f}x, rows "
                            f"max/mean {result.rows_spread:.3f}, {min(result.rows_per_s):.0f}-"
                            f"{max(result.rows_per_s):.0f} rows/s per worker",
                            flush=True,
                        )
                        results.append(result)
                        merge_io_results(out_dir / "results-io.json", [result])
        finally:
            ray.shutdown()
    return merge_io_results(out_dir / "results-io.json", [])


def merge_io_results(path: Path, results: list[ReadResult]) -> list[ReadResult]:
    """``results`` over those saved at ``path`` by earlier invocations (one corpus size each, under the Ray lock's
    10 minutes), a later one replacing an earlier of the same storage, size and workers; saved back, sorted."""
    import json
    from dataclasses import asdict

    saved = [ReadResult(**r) for r in json.loads(path.read_text())] if path.is_file() else []
    key = lambda r: (r.storage, r.corpus_mb, r.workers)  # noqa: E731
    merged = sorted({key(r): r for r in saved + results}.values(), key=key)
    path.write_text(json.dumps([asdict(r) for r in merged], indent=1))
    return merged


def format_io_table(results: list[ReadResult]) -> str:
    rows = [
        "| storage | corpus | units | workers | nodes | bytes read ÷ corpus | rows per worker, max ÷ mean | "
        "rows/s per worker (min–max) | first rows (slowest worker) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r.storage} | {r.corpus_mb:.0f} MB | {r.units} | {r.workers} | {r.nodes} | "
            f"{r.amplification:.3f} | {r.rows_spread:.3f} | {min(r.rows_per_s):,.0f}–{max(r.rows_per_s):,.0f} | "
            f"{max(r.first_rows_s):.2f} s |"
        )
    return "\n".join(rows)


def plot_io(results: list[ReadResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(13, 3.8))
    workers = sorted({r.workers for r in results})
    left.plot(workers, workers, "k:", label="every worker reads all (before)")
    for storage, size in sorted({(r.storage, r.corpus_mb) for r in results}):
        mine = sorted((r for r in results if (r.storage, r.corpus_mb) == (storage, size)), key=lambda r: r.workers)
        label = f"{storage}, {size:.0f} MB"
        w = [r.workers for r in mine]
        left.plot(w, [r.amplification for r in mine], "o-", label=label)
        mid.plot(w, [r.rows_spread for r in mine], "o-", label=label)
        right.plot(w, [sum(r.rows_per_s) / len(r.rows_per_s) for r in mine], "o-", label=label)
    left.set(xlabel="workers", ylabel="bytes read ÷ corpus bytes", title="read amplification", xticks=workers)
    mid.axhline(1.05, color="k", ls=":", label="goal 1.05")
    mid.set(xlabel="workers", ylabel="max ÷ mean", title="rows per worker", xticks=workers)
    right.set(xlabel="workers", ylabel="rows/s", title="mean rows/s per worker", xticks=workers)
    for ax in (left, mid, right):
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
