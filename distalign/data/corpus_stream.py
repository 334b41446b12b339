"""Training corpora as streams: read where they lie, never whole on the driver.

A corpus source (``data.corpora[i]``) is a file, a directory or a glob of ``.txt`` (a sentence a
line), ``.jsonl`` (``{"text": ...}`` a line) or ``.parquet`` (column ``text``) files, local or
``s3://``, or a Hugging Face dataset (a ``save_to_disk`` directory, or a name for
``datasets.load_dataset``, streamed). The driver only lists the files and checks what it can
cheaply (``list_corpus_files``: files exist, parquet footers and columns). The rows are read by
Ray Data's readers on the cluster, each epoch anew (``corpus_dataset``), or in this process for
tests and for the small samples the driver needs (``read_rows``).

Each row leaves as ``text``, ``lang``, ``row`` and ``epoch``. ``row`` is a 63-bit hash of the
language and the text: it picks the one worker that trains on the row (``row % workers``) and
seeds the row's data-side randomness, so neither depends on how files were split into blocks.
Files are read in a seeded order that changes every epoch; rows are mixed further by the
consumer's seeded local shuffle buffer. Malformed rows (a JSON line that does not parse, an empty
or non-string text) and files that vanished or became unreadable are skipped and recorded in a
``SkipLedger`` (one per run, a named Ray actor when read on the cluster), which the driver reports.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import io
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq

from distalign.data.readers import MAX_EXAMPLES, InputError, ReadReport
from distalign.data.sources import CorpusSource

SUFFIXES = {".txt": "text", ".jsonl": "jsonl", ".parquet": "parquet"}
READ_CHUNK = 4096  # rows per chunk when read in this process
EXCERPT = 80


@dataclass
class CorpusFiles:
    """One corpus source resolved on the driver: its language, kind and (for files) file list."""

    lang: str
    kind: str  # text | jsonl | parquet | hf
    paths: list[str] = field(default_factory=list)  # without scheme for S3 ("bucket/key")
    text_field: str = "text"
    hf_dataset: str = ""
    hf_config: str = ""
    hf_split: str = "train"
    keep: float = 1.0  # share of its sentences an epoch keeps (language sampling, ``with_language_sampling``)

    @property
    def name(self) -> str:
        return self.hf_dataset or (self.paths[0] if len(self.paths) == 1 else f"{len(self.paths)} {self.kind} files")


@dataclass
class CorpusStream:
    """Everything a worker needs to read its share of the corpora, epoch after epoch."""

    sources: list[CorpusFiles]
    filesystem: pyarrow.fs.FileSystem | None = None  # None: local paths, or S3 resolved by pyarrow
    ledger: str = ""  # name of the run's SkipLedger actor ("" = a local ledger)


# --------------------------------------------------------------------------------------------
# Listing and checking on the driver


def filesystem_for(path: str, filesystem: pyarrow.fs.FileSystem | None) -> tuple[pyarrow.fs.FileSystem, str]:
    """The filesystem holding ``path`` and the path inside it."""
    if filesystem is not None:
        return filesystem, path.split("://", 1)[-1]
    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), path


def expand(path: str, filesystem: pyarrow.fs.FileSystem | None) -> list[str]:
    """A file, every corpus file under a directory, or every match of a local glob; sorted."""
    fs, inner = filesystem_for(path, filesystem)
    if "://" not in path and any(c in path for c in "*?["):
        return sorted(p for p in glob.glob(path) if Path(p).suffix in SUFFIXES)
    info = fs.get_file_info(inner)
    if info.type == pyarrow.fs.FileType.File:
        return [inner]
    if info.type == pyarrow.fs.FileType.Directory:
        found = fs.get_file_info(pyarrow.fs.FileSelector(inner, recursive=True))
        return sorted(f.path for f in found if f.type == pyarrow.fs.FileType.File and Path(f.path).suffix in SUFFIXES)
    return []


def list_corpus_files(src: CorpusSource, key: str, filesystem: pyarrow.fs.FileSystem | None = None) -> CorpusFiles:
    """Resolve one ``data.corpora`` entry (``key`` names it in errors): files of one kind, parquet
    files checked for a readable footer and the text column."""
    if src.hf_dataset:
        return CorpusFiles(src.lang, "hf", [], src.text_field, src.hf_dataset, src.hf_config, src.hf_split)
    paths = expand(src.path, filesystem)
    if not paths:
        raise InputError(f"{key}.path: no .txt, .jsonl or .parquet files at {src.path!r}")
    kinds = {SUFFIXES[Path(p).suffix] for p in paths}
    if len(kinds) > 1:
        raise InputError(f"{key}.path: {src.path!r} mixes file kinds {sorted(kinds)}: give one source per kind")
    kind = kinds.pop()
    if kind == "parquet":
        fs, _ = filesystem_for(src.path, filesystem)
        for p in paths:
            check_parquet(fs, p, src.text_field)
    return CorpusFiles(src.lang, kind, paths, src.text_field)


def with_language_sampling(sources: list[CorpusFiles], alpha: float, filesystem: pyarrow.fs.FileSystem | None
                           ) -> list[CorpusFiles]:
    """Sources whose ``keep`` makes language l a share q_l ∝ p_l^alpha of each epoch's sentences (p_l: its
    share of the corpus bytes), by keeping every sentence of the language that gains most and a seeded
    share of the others' (a new share each epoch): the smoothing of mBERT and XLM-R, without repeating rows."""
    if alpha == 1:
        return sources
    if any(s.kind == "hf" for s in sources):
        raise InputError("data.corpus_sampling_alpha < 1 needs file corpora (it weighs languages by file size)")
    sizes: dict[str, int] = {}
    for source in sources:
        for p in source.paths:
            fs, inner = filesystem_for(p, filesystem)
            sizes[source.lang] = sizes.get(source.lang, 0) + fs.get_file_info(inner).size
    total = sum(sizes.values())
    p = {lang: size / total for lang, size in sizes.items()}
    z = sum(share ** alpha for share in p.values())
    gain = {lang: share ** alpha / z / share for lang, share in p.items()}  # q_l / p_l
    top = max(gain.values())
    return [dataclasses.replace(s, keep=gain[s.lang] / top) for s in sources]


def row_uniforms(keys: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """A uniform in [0, 1) per row key, fixed by (key, seed, epoch): splitmix64 of the mixed integers."""
    x = keys.astype(np.uint64) ^ np.uint64((seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9) % 2**64)
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / 2.0**53


def check_parquet(fs: pyarrow.fs.FileSystem, path: str, text_field: str) -> None:
    """Raise ``InputError`` naming ``path`` unless its footer reads and it has the text column."""
    try:
        with fs.open_input_file(path) as f:
            names = pq.ParquetFile(f).schema_arrow.names
    except (OSError, pa.ArrowException) as err:
        raise InputError(f"{path}: unreadable parquet file ({err})") from err
    if text_field not in names:
        raise InputError(f"{path}: no '{text_field}' column (has {names})")


# --------------------------------------------------------------------------------------------
# Rows


def row_keys(langs: list[str], texts: list[str]) -> np.ndarray:
    """63-bit hashes of (language, text) pairs: a row's worker and the seed of its randomness."""
    return np.array([int.from_bytes(hashlib.blake2b(f"{lang}\t{t}".encode(), digest_size=8).digest(), "little") >> 1
                     for lang, t in zip(langs, texts)], dtype=np.int64)


class SkipLedger:
    """Malformed rows and skipped files, counted once each however often an epoch re-reads them."""

    def __init__(self):
        self.rows: dict[str, set[int]] = {}
        self.examples: dict[str, list[str]] = {}
        self.files: dict[str, str] = {}

    def record_rows(self, path: str, skipped: list[tuple[int, str]]) -> None:
        """``skipped``: (row key, reason) of each malformed row read from ``path``."""
        seen, examples = self.rows.setdefault(path, set()), self.examples.setdefault(path, [])
        for key, reason in skipped:
            if key not in seen:
                seen.add(key)
                if len(examples) < MAX_EXAMPLES:
                    examples.append(reason)

    def record_file(self, path: str, reason: str) -> None:
        self.files.setdefault(path, reason)

    def reports(self) -> list[ReadReport]:
        out = [ReadReport(path, malformed=len(keys), examples=[f"{path}: {e}" for e in self.examples[path]])
               for path, keys in sorted(self.rows.items()) if keys]
        return out + [ReadReport(path, malformed=1, examples=[f"{path}: {why} (file skipped)"])
                      for path, why in sorted(self.files.items())]


def parse_rows(batch: dict[str, np.ndarray], source: CorpusFiles, epoch: int, rank: int, workers: int,
               record: Callable[[str, list[tuple[int, str]]], None], seed: int = 0) -> dict[str, np.ndarray]:
    """Raw rows of ``source`` (``text``, or the text field, and ``path`` when files) -> this worker's
    well-formed rows that this epoch keeps (the source's ``keep`` share, drawn by (row, ``seed``, ``epoch``)).

    Bad rows are reported (by the worker that owns the raw row, so once per epoch) and dropped.
    """
    paths = batch["path"].tolist() if "path" in batch else [source.name] * len(next(iter(batch.values())))
    raw = batch[source.text_field if source.text_field in batch else "text"].tolist()
    texts, bad = [], {}
    for value, path in zip(raw, paths):
        text, why = value, ""
        if source.kind == "jsonl":
            try:
                text = json.loads(value)[source.text_field]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                why = f"not a JSON object with a '{source.text_field}' field ({type(err).__name__})"
        if not why and not (isinstance(text, str) and text.strip()):
            why = "empty or non-string text"
        if why:
            raw_key = int(row_keys([""], [str(value)])[0])
            if raw_key % workers == rank:
                bad.setdefault(path, []).append((raw_key, f"{why}: {str(value)[:EXCERPT]!r}"))
            continue
        texts.append(text.strip())
    for path, skipped in bad.items():
        record(path, skipped)
    keys = row_keys([source.lang] * len(texts), texts)
    mine = (keys % workers == rank) & (row_uniforms(keys, seed, epoch) < source.keep)
    count = int(mine.sum())
    return {"text": np.array(texts, dtype=object)[mine], "lang": np.array([source.lang] * count, dtype=object),
            "row": keys[mine], "epoch": np.full(count, epoch, dtype=np.int64)}


def present_paths(source: CorpusFiles, filesystem: pyarrow.fs.FileSystem | None, ledger_file: Callable[[str, str], None]
                  ) -> list[str]:
    """The source's files that still exist and (parquet) still read; the others go to the ledger."""
    kept = []
    for p in source.paths:
        fs, inner = filesystem_for(p, filesystem)
        if fs.get_file_info(inner).type != pyarrow.fs.FileType.File:
            ledger_file(p, "file vanished")
            continue
        if source.kind == "parquet":
            try:
                check_parquet(fs, inner, source.text_field)
            except InputError as err:
                ledger_file(p, str(err))
                continue
        kept.append(p)
    return kept


def epoch_order(paths: list[str], seed: int, epoch: int) -> list[str]:
    """The files in this epoch's seeded order."""
    return [paths[i] for i in np.random.default_rng([seed, epoch]).permutation(len(paths))]


# --------------------------------------------------------------------------------------------
# In this process (tests, the driver's samples)


def read_raw(source: CorpusFiles, paths: list[str], filesystem: pyarrow.fs.FileSystem | None
             ) -> Iterator[dict[str, np.ndarray]]:
    """Raw chunks of one source, as Ray Data's readers would give them (``path`` column for files)."""
    if source.kind == "hf":
        for chunk in load_hf_dataset(source).iter(batch_size=READ_CHUNK):
            yield {source.text_field: np.array(chunk[source.text_field], dtype=object)}
        return
    for p in paths:
        fs, inner = filesystem_for(p, filesystem)
        if source.kind == "parquet":
            with fs.open_input_file(inner) as f:
                for rb in pq.ParquetFile(f).iter_batches(batch_size=READ_CHUNK, columns=[source.text_field]):
                    values = rb.column(0).to_pylist()
                    yield {source.text_field: np.array(values, dtype=object), "path": np.array([p] * len(values))}
            continue
        with fs.open_input_stream(inner) as raw_stream, io.TextIOWrapper(raw_stream, encoding="utf-8",
                                                                         errors="replace") as lines:
            nonblank = (line.rstrip("\r\n") for line in lines if line.strip())
            while chunk := list(itertools.islice(nonblank, READ_CHUNK)):
                yield {"text": np.array(chunk, dtype=object), "path": np.array([p] * len(chunk))}


def read_rows(stream: CorpusStream, epoch: int = 0, rank: int = 0, workers: int = 1, seed: int = 0,
              ledger: SkipLedger | None = None) -> Iterator[dict[str, np.ndarray]]:
    """This worker's rows of one epoch, read in this process (same rows and keys as ``corpus_dataset``)."""
    ledger = ledger or SkipLedger()
    for source in stream.sources:
        paths = epoch_order(present_paths(source, stream.filesystem, ledger.record_file), seed, epoch)
        for raw in read_raw(source, paths, stream.filesystem):
            rows = parse_rows(raw, source, epoch, rank, workers, ledger.record_rows, seed)
            if len(rows["row"]):
                yield rows


def sample_texts(stream: CorpusStream, limit: int) -> list[str]:
    """The first ``limit`` sentences of every source (the tiny model's tokenizer is trained on them)."""
    texts: list[str] = []
    for source in stream.sources:
        taken = 0
        for rows in read_rows(CorpusStream([source], stream.filesystem)):
            texts.extend(rows["text"][: limit - taken].tolist())
            taken = min(limit, taken + len(rows["text"]))
            if taken >= limit:
                break
    return texts


def load_hf_dataset(source: CorpusFiles):
    """A ``save_to_disk`` directory (memory-mapped), or ``datasets.load_dataset`` streaming the split."""
    import datasets

    if Path(source.hf_dataset).is_dir():
        loaded = datasets.load_from_disk(source.hf_dataset)
        return loaded[source.hf_split] if isinstance(loaded, datasets.DatasetDict) else loaded
    return datasets.load_dataset(source.hf_dataset, source.hf_config or None, split=source.hf_split, streaming=True)


# --------------------------------------------------------------------------------------------
# On the cluster


@dataclass
class RemoteLedger:
    """Sends skips to the run's named ``SkipLedger`` actor (from Ray Data tasks)."""

    name: str

    def _actor(self):
        import ray

        return ray.get_actor(self.name)

    def record_rows(self, path: str, skipped: list[tuple[int, str]]) -> None:
        self._actor().record_rows.remote(path, skipped)

    def record_file(self, path: str, reason: str) -> None:
        self._actor().record_file.remote(path, reason)


def ledger_for(name: str) -> RemoteLedger | SkipLedger:
    """The run's ledger actor by name, or a throw-away local ledger when the run has none ("")."""
    return RemoteLedger(name) if name else SkipLedger()


def start_ledger(name: str):
    """The run's ledger actor (the driver owns it and reads ``reports`` at the end)."""
    import ray

    return ray.remote(num_cpus=0)(SkipLedger).options(name=name, get_if_exists=True).remote()


def _parse_ray_batch(batch: dict[str, np.ndarray], source: CorpusFiles, epoch: int, rank: int, workers: int,
                     ledger: str, seed: int) -> dict[str, np.ndarray]:
    return parse_rows(batch, source, epoch, rank, workers, ledger_for(ledger).record_rows, seed)


def corpus_dataset(stream: CorpusStream, epoch: int, rank: int, workers: int, seed: int, cpus: float):
    """This worker's rows of one epoch as a lazy Ray Dataset (read by Ray Data's readers on the cluster,
    ``cpus`` per task)."""
    import ray.data

    ledger = ledger_for(stream.ledger)
    parts = []
    for source in stream.sources:
        if source.kind == "hf":
            dataset = ray.data.from_huggingface(load_hf_dataset(source)).select_columns([source.text_field])
        else:
            paths = epoch_order(present_paths(source, stream.filesystem, ledger.record_file), seed, epoch)
            if not paths:
                continue
            if source.kind == "parquet":
                dataset = ray.data.read_parquet(paths, filesystem=stream.filesystem, include_paths=True,
                                                ignore_missing_paths=True, num_cpus=cpus
                                                ).select_columns([source.text_field, "path"])
            else:
                dataset = ray.data.read_text(paths, filesystem=stream.filesystem, include_paths=True,
                                             ignore_missing_paths=True, num_cpus=cpus)
        parts.append(dataset.map_batches(
            _parse_ray_batch, batch_format="numpy", num_cpus=cpus,
            fn_kwargs={"source": source, "epoch": epoch, "rank": rank, "workers": workers, "ledger": stream.ledger,
                       "seed": seed}))
    if not parts:
        raise InputError(f"epoch {epoch}: every corpus file is gone ({[s.name for s in stream.sources]})")
    return parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
