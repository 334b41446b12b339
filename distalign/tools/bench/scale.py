"""How each driver- and plan-side stage grows with the data and the worker count (issue 47's growth laws), on
CPU, with the project's own functions on synthetic inputs:

    distalign bench scale --files 100,1000,10000 --pairs 100000,1000000 --units 10000,100000,1000000

- ``listing``: ``list_corpus_files`` of F small text files under 10 language prefixes, on the local filesystem
  (moto's S3 server takes ~3 ms to create an object, so 1e4 objects would take the bench longer than the listing;
  ``tests/data/test_corpus_stream.py`` counts the S3 requests instead: a constant number of HEADs);
- ``constraints``: constraint preparation as ``prepare_data`` runs it on N pairs of 10 languages (parquet read,
  evaluation words excluded, languages restricted, a nested subset of N/2 drawn, the languages listed);
- ``deal``: one worker's deal of an epoch, U units among the largest W (``corpus_plan.fresh_items``; every worker
  runs it every epoch), and of the middle U among each W;
- ``corpus handoff``: what the driver does to hand a corpus of U units (100 files) to the workers: its listing
  written once to the run's storage (``stored_corpus``, O(files)); and ``corpus units cut``: what each worker then
  does once, the units cut from that listing (O(U), vectorised);
- ``table streams``: what the driver does to hand a table stream of N pairs to the workers: the table written once
  to the run's storage (``store_table``; the workers then draw their own rows from it), its peak memory on the head
  node (before issue 47 it materialised epochs × N rows, and a copy per worker, in the head node's object store);
- ``plan``: the pickled bytes of the ``TrainingPlan`` each worker receives, against N and U: where the word pairs
  and the constraint stream's table are (``StoredTable``), not their rows, and where the corpus listing is;
- ``negatives``: one rank's peak InfoNCE memory against W (``distalign.tools.bench.negatives``, B = 64, d = 768).

Time is wall-clock of one call; memory is the process's peak RSS above its RSS before the call (Linux
``clear_refs``), or bytes for ``plan`` and ``negatives``. Each stage's slope is the exponent k of a least-squares fit
of log(cost) = k·log(size) + c: k ≈ 0 flat, 1 linear. Writes ``scale.md`` and ``scale.png`` to the output folder.
"""

from __future__ import annotations

import math
import pickle
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MB = 2**20
LANGUAGES = ("de", "en", "es", "fi", "fr", "hr", "it", "ja", "ru", "zh")
EVAL_WORDS = 500  # per language: the evaluation dictionary words excluded from the constraints
UNIT_BYTES = 4 * MB


@dataclass
class Point:
    stage: str
    axis: str  # what ``size`` counts: F files, N pairs, U units, W workers
    size: int
    seconds: float | None  # None: not a timing row (a size in bytes)
    bytes: int

    @property
    def series(self) -> str:
        return f"{self.stage} vs {self.axis}"


def peak_rss_during(call: Callable[[], object]) -> tuple[float, int, object]:
    """(seconds, peak RSS above the RSS before, result) of ``call()``: the kernel's high-water mark is reset first."""
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = rss_field("VmRSS")
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, max(0, rss_field("VmHWM") - before), result


def rss_field(name: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{name}:\s+(\d+) kB", text, re.M).group(1)) * 1024


# --------------------------------------------------------------------------------------------
# Synthetic inputs


def synthetic_pairs(count: int, seed: int = 0) -> pa.Table:
    """``count`` constraint pairs between ``LANGUAGES`` (words ``w<k>``, a vocabulary of count/5 a language)."""
    from distalign.data.constraint_schema import CONSTRAINT_SCHEMA

    rng = np.random.default_rng(seed)
    vocabulary = max(1000, count // 5)
    langs = pa.array(LANGUAGES)

    def words() -> pa.Array:
        return pc.binary_join_element_wise("w", pa.array(rng.integers(0, vocabulary, count)).cast(pa.string()), "")

    def languages() -> pa.Array:
        return langs.take(pa.array(rng.integers(0, len(LANGUAGES), count)))

    synsets = pc.binary_join_element_wise("bn:", pa.array(rng.integers(0, count, count)).cast(pa.string()), "")
    nulls = pa.nulls(count, pa.string())
    return pa.table([words(), languages(), words(), languages(), synsets, nulls, nulls], schema=CONSTRAINT_SCHEMA)


def synthetic_units(count: int, seed: int = 0):
    """``count`` corpus units of 100 files, sized as the byte ranges of files of 1-8 units (``Units`` columns)."""
    from distalign.data.corpus_plan import Units

    sizes = np.random.default_rng(seed).integers(UNIT_BYTES // 8, UNIT_BYTES, count)
    starts = np.arange(count, dtype=np.int64) * UNIT_BYTES
    files = np.arange(count, dtype=np.int64) % 100
    names = np.array([f"corpus/{i:03d}.txt" for i in range(100)], dtype=object)
    listed = np.full(count, UNIT_BYTES * count // 100, dtype=np.int64)
    return Units(np.zeros(count, dtype=np.int64), files, names[files], starts, starts + sizes, sizes, listed)


def synthetic_corpus(units: int):
    """A listing of 100 text files cut into ``units`` units of ``UNIT_BYTES`` (a corpus of units × 4 MiB; one of
    fewer than ``corpus_plan.MIN_UNITS`` units is cut finer)."""
    from distalign.data.corpus_stream import CorpusFiles, CorpusStream

    paths = [f"corpus/{i:03d}.txt" for i in range(100)]
    return CorpusStream([CorpusFiles(lang="en", kind="text", paths=paths, sizes=[UNIT_BYTES * units // 100] * 100)])


def write_text_files(root: Path, count: int) -> Path:
    """``count`` small .txt files under 10 language prefixes."""
    for i in range(count):
        folder = root / LANGUAGES[i % len(LANGUAGES)]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"part-{i:07d}.txt").write_text(f"sentence {i}\n" * (1 + i % 5))
    return root


# --------------------------------------------------------------------------------------------
# Stages


def measure_listing(files: int, scratch: Path) -> Point:
    from distalign.data.corpus_stream import list_corpus_files
    from distalign.data.sources import CorpusSource

    root = write_text_files(scratch / f"listing-{files}", files)
    seconds, peak, listed = peak_rss_during(lambda: list_corpus_files(CorpusSource(str(root), "en"), "corpus"))
    assert len(listed.paths) == files
    return Point("listing", "F files", files, seconds, peak)


def prepare_constraints(path: Path, banned: set[tuple[str, str]], seed: int = 0) -> list[str]:
    """Constraint preparation in ``prepare_data``'s order; the run's languages (the ``PreparedData.languages`` of a
    constraints-only run)."""
    from distalign.data.readers import read_constraints
    from distalign.data.sampling import exclude_words, restrict_to_languages, subsample_constraints

    table, _ = read_constraints(path)
    table, _ = exclude_words(table, banned)
    table = restrict_to_languages(table, list(LANGUAGES[:8]))
    table = subsample_constraints(table, len(table) // 2, seed)
    return sorted(set(pc.unique(table["lang1"]).to_pylist()) | set(pc.unique(table["lang2"]).to_pylist()))


def measure_constraints(pairs: int, scratch: Path) -> Point:
    path = scratch / f"constraints-{pairs}.parquet"
    pq.write_table(synthetic_pairs(pairs), path)
    banned = {(lang, f"w{k}") for lang in LANGUAGES for k in range(EVAL_WORDS)}
    seconds, peak, _ = peak_rss_during(lambda: prepare_constraints(path, banned))
    return Point("constraints", "N pairs", pairs, seconds, peak)


def measure_deal(units: int, workers: int, axis: str) -> Point:
    """One worker's deal of an epoch: every unit dealt, its own items made (``fresh_items``, as each worker does)."""
    from distalign.data.corpus_plan import fresh_items

    dealt = synthetic_units(units)
    seconds, peak, _ = peak_rss_during(lambda: fresh_items(dealt, 0, 1, workers, 0, 4))
    return Point("deal", axis, units if axis == "U units" else workers, seconds, peak)


def measure_corpus_handoff(units: int, scratch: Path) -> list[Point]:
    """What the driver does to hand a corpus of ``units`` units (100 files) to the workers: its listing stored once
    (``stored_corpus``), and what each worker then does once: cut the units from the stored listing."""
    from distalign.preparation.ray_streams import stored_corpus

    corpus = synthetic_corpus(units)
    seconds, peak, stored = peak_rss_during(lambda: stored_corpus(corpus, str(scratch / "storage"), "", f"u{units}"))
    cut_seconds, cut_peak, _ = peak_rss_during(stored.units)
    return [
        Point("corpus handoff (driver)", "U units", units, seconds, peak),
        Point("corpus units cut (each worker)", "U units", units, cut_seconds, cut_peak),
    ]


def store_pairs(pairs: int, scratch: Path):
    """``pairs`` synthetic constraint pairs written to a run's storage under ``scratch`` as a run writes its table
    streams' tables; the ``StoredTable``."""
    from distalign.preparation.table_rows import store_table

    return store_table(synthetic_pairs(pairs), str(scratch / "storage"), "", f"pairs-{pairs}", "constraints")


def measure_table_streams(pairs: int, scratch: Path) -> Point:
    from distalign.preparation.inputs import with_row_index, with_synset_index
    from distalign.preparation.table_rows import store_table

    table = with_row_index(with_synset_index(synthetic_pairs(pairs)))  # as prepare_data hands it over
    storage = str(scratch / "storage")
    seconds, peak, _ = peak_rss_during(lambda: store_table(table, storage, "", f"streams-{pairs}", "constraints"))
    return Point("table streams", "N pairs", pairs, seconds, peak)


def pickled_plan_bytes(pairs: int, units: int, scratch: Path) -> int:
    """Bytes of the ``TrainingPlan`` pickled into each worker, with ``pairs`` stored word pairs (read by an
    objective and by the constraint stream) and ``units`` corpus units of 100 files (the tokenising jobs left out:
    they do not grow with the data)."""
    from distalign.config import ExperimentConfig
    from distalign.preparation.ray_streams import CorpusFeed, TableStream, stored_corpus
    from distalign.preparation.schedule import RunSchedule
    from distalign.train.plan import TrainingPlan

    corpus = stored_corpus(synthetic_corpus(units), str(scratch / "storage"), "", f"plan-{units}")
    feed = CorpusFeed(corpus, None, 0, 4, 0.25)
    stored, config = store_pairs(pairs, scratch), ExperimentConfig()
    plan = TrainingPlan(
        config=config,
        schedule=RunSchedule(1000, 100),
        model_path="model",
        languages=list(LANGUAGES),
        word_pairs=stored,
        corpus=feed,
        tables={"constraints": TableStream(stored, None, config.run_facts(), 0.25)},
    )
    return len(pickle.dumps(plan, protocol=5))


def measure_plan(pairs: int, units: int, axis: str, scratch: Path) -> Point:
    return Point("plan", axis, pairs if axis == "N pairs" else units, None, pickled_plan_bytes(pairs, units, scratch))


def measure_negatives(worlds: list[int], pairs: int = 64, dim: int = 768) -> list[Point]:
    from distalign.tools.bench.negatives import measure

    return [Point("negatives", "W workers", row.world, None, row.after) for row in measure(worlds, pairs, dim)]


# --------------------------------------------------------------------------------------------
# The bench


@dataclass
class Sizes:
    files: list[int]
    pairs: list[int]
    units: list[int]
    workers: list[int]


def run_scale_bench(sizes: Sizes, out: Path, progress: Callable[[str], None] = print) -> list[Point]:
    """Every stage at every size; ``scale.md`` (table and slopes) and ``scale.png`` written to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        measure_listing(10, Path(scratch))  # warm-up, not reported: first imports (wordfreq, ...) and caches
        measure_constraints(1000, Path(scratch))
        steps: list[Callable[[], Point | list[Point]]] = (
            [lambda f=f: measure_listing(f, Path(scratch)) for f in sizes.files]
            + [lambda n=n: measure_constraints(n, Path(scratch)) for n in sizes.pairs]
            + [lambda u=u: measure_deal(u, max(sizes.workers), "U units") for u in sizes.units]
            + [lambda w=w: measure_deal(sizes.units[len(sizes.units) // 2], w, "W workers") for w in sizes.workers]
            + [lambda u=u: measure_corpus_handoff(u, Path(scratch)) for u in sizes.units]
            + [lambda n=n: measure_table_streams(n, Path(scratch)) for n in sizes.pairs]
            + [lambda n=n: measure_plan(n, sizes.units[0], "N pairs", Path(scratch)) for n in sizes.pairs]
            + [lambda u=u: measure_plan(sizes.pairs[0], u, "U units", Path(scratch)) for u in sizes.units]
            + [lambda: measure_negatives(sizes.workers)]
        )
        for step in steps:
            measured = step()
            for point in measured if isinstance(measured, list) else [measured]:
                progress(
                    f"{point.series} = {point.size:,}: "
                    f"{'' if point.seconds is None else f'{point.seconds:.3f} s, '}{point.bytes / MB:,.1f} MiB"
                )
                points.append(point)
    (out / "scale.md").write_text(format_table(points) + "\n")
    plot(points, out / "scale.png")
    return points


def slope(xs: list[float], ys: list[float]) -> float | None:
    """k of the least-squares fit log y = k log x + c (None with fewer than two sizes or a zero cost)."""
    if len(xs) < 2 or min(ys) <= 0:
        return None
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def series(points: list[Point]) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = {}
    for point in points:
        out.setdefault(point.series, []).append(point)
    return out


def format_table(points: list[Point]) -> str:
    lines = ["| stage | size | time (s) | memory (MiB) |", "|---|---:|---:|---:|"]
    for point in points:
        seconds = "—" if point.seconds is None else f"{point.seconds:.3f}"
        lines.append(f"| {point.series} | {point.size:,} | {seconds} | {point.bytes / MB:,.2f} |")
    lines += ["", "| stage | slope of time | slope of memory |", "|---|---:|---:|"]
    for name, rows in series(points).items():
        xs = [p.size for p in rows]
        k_time = None if rows[0].seconds is None else slope(xs, [p.seconds for p in rows])
        k_memory = slope(xs, [p.bytes for p in rows])
        lines.append(f"| {name} | {fmt_slope(k_time)} | {fmt_slope(k_memory)} |")
    lines.append(
        "\nslope k: cost ∝ size^k (least squares on log-log); memory is peak RSS above the start, or bytes "
        "(plan: pickled, negatives: one rank's peak)"
    )
    return "\n".join(lines)


def fmt_slope(k: float | None) -> str:
    return "—" if k is None or math.isnan(k) else f"{k:.2f}"


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, rows in series(points).items():
        xs = [p.size for p in rows]
        if rows[0].seconds is not None:
            time_axis.plot(xs, [max(p.seconds, 1e-6) for p in rows], marker="o", label=name)
        memory_axis.plot(xs, [max(p.bytes / MB, 1e-3) for p in rows], marker="o", label=name)
    for axis, label in ((time_axis, "seconds"), (memory_axis, "MiB (peak RSS above start, or bytes)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("size (files, pairs, units or workers: see the legend)")
        axis.set_ylabel(label)
        axis.legend(fontsize=7)
        axis.grid(True, which="both", alpha=0.3)
    time_axis.set_title("time per stage")
    memory_axis.set_title("memory per stage")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
