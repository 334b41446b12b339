"""Training corpora as streams: read where they lie, never whole on the driver, each byte by one worker.

A corpus source (``data.corpora[i]``) is a file, a directory or a glob of ``.txt`` (a sentence a
line), ``.jsonl`` (``{"text": ...}`` a line) or ``.parquet`` (column ``text``) files, local or
``s3://``, or a Hugging Face dataset (a ``save_to_disk`` directory, or a name for
``datasets.load_dataset``, streamed). The driver only lists the files, notes their sizes and checks
what it can cheaply (``list_corpus_files``: sizes from the listing, prefixes listed and parquet footers and
columns read in parallel, footers cached across runs). The listing is stored once for the run (``files_table``);
each worker cuts the corpus into units from it (``CorpusStream.units``, ``distalign.data.corpus_plan``) and reads
its units itself (``read_unit``: a byte range, a row group, a row range).

Each row leaves as ``text``, ``lang``, ``row`` and ``epoch``. ``row`` is a 63-bit hash of the row's
place in the corpus (language, source and file index, byte offset of its line or row index), not of
its text nor of where the file is stored: it
seeds the row's data-side randomness, so a sentence that occurs many times gets a mask of its own
each time, and nothing depends on which worker reads it. Malformed rows (a JSON line that does not
parse, an empty or non-string text) and files that vanished, became unreadable or changed size
since the listing are skipped and recorded in a ``SkipLedger`` (one per run, a named Ray actor when
read on the cluster), which the driver reports; a file that changed size is never cut anew, so no
row is read twice.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq

from distalign.data.corpus_plan import Unit, Units, cut_units, hf_units, unit_bytes
from distalign.data.readers import MAX_EXAMPLES, ReadReport, unreadable_parquet
from distalign.data.sources import CorpusSource
from distalign.errors import InputError, s3_refusal
from distalign.languages import language_code

SUFFIXES = {".txt": "text", ".jsonl": "jsonl", ".parquet": "parquet"}
READ_ATTEMPTS = 3  # tries of a remote unit read that failed after the storage's own retries
RETRY_WAIT_S = 2.0  # before the first of those retries (doubling)
READ_TAIL = 128  # bytes first read past a unit's end to finish its last line (doubled while no newline comes)
EXCERPT = 80
LISTING_THREADS = 32  # prefixes listed and parquet footers read at once on the driver (requests wait on storage)
log = logging.getLogger("distalign")
FooterCache = Callable[[str, Any, Callable[[], Any]], Any]  # (kind, key parts, build) -> build()'s value, kept


@dataclass(kw_only=True)
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
    sizes: list[int] = field(default_factory=list)  # each file's bytes when listed (a file of another size is skipped)
    pieces: list[list[int]] = field(default_factory=list)  # parquet: each file's row-group bytes (its units)
    rows: int | None = None  # a Hugging Face dataset saved to disk: its rows (None: streamed)
    version: str = ""  # a hash of the files' sizes and mtimes as listed ("" for a Hugging Face dataset)

    @property
    def name(self) -> str:
        return self.hf_dataset or (self.paths[0] if len(self.paths) == 1 else f"{len(self.paths)} {self.kind} files")


@dataclass
class CorpusStream:
    """Everything a worker needs to read its share of the corpora, epoch after epoch."""

    sources: list[CorpusFiles]
    filesystem: pyarrow.fs.FileSystem | None = None  # None: local paths, or S3 resolved by pyarrow
    ledger: str = ""  # name of the run's SkipLedger actor ("" = a local ledger)
    unit_bytes: int = 4 * 2**20  # largest file unit (``data.corpus_unit_bytes``)
    # where the listing is (``files_table``), when the sources' file lists were left out (``for_workers``)
    stored_files: Any = None

    def place(self, unit: Unit) -> str:
        """The name of a unit's file that row identities use: its source's and its own index, the same wherever
        the file is stored (staging copies the files under other names)."""
        return f"{unit.source}:{unit.file}"

    def files(self) -> pa.Table:
        """The listing: every file of every source (``files_table``), from storage when stored."""
        return self.stored_files.open().table() if self.stored_files is not None else files_table(self.sources)

    def units(self) -> Units:
        """The corpus cut into units (``distalign.data.corpus_plan``), the same on every worker and every epoch:
        a function of the listing alone, cut where it is needed (vectorised: ~0.1 s a million units)."""
        files = self.files()
        source, size = files["source"].to_numpy(), files["size"].to_numpy()
        step = unit_bytes(int(size.sum()), self.unit_bytes)
        parts = []
        for index, s in enumerate(self.sources):
            if s.kind == "hf":
                parts.append(hf_units(index, s.rows))
                continue
            mine = np.flatnonzero(source == index)
            pieces = files["pieces"].take(pa.array(mine)).to_pylist() if s.kind == "parquet" else []
            paths = files["path"].take(pa.array(mine)).to_pylist()
            parts.append(cut_units(index, s.kind, paths, size[mine].tolist(), pieces, step))
        return Units.concat(parts) if parts else Units.of([])

    def for_workers(self, stored_files: Any) -> CorpusStream:
        """This stream without the sources' file lists (O(files): not to be pickled into every worker), its
        listing read from ``stored_files`` (a ``StoredTable`` of ``files()``) instead."""
        bare = [dataclasses.replace(s, paths=[], sizes=[], pieces=[]) for s in self.sources]
        return dataclasses.replace(self, sources=bare, stored_files=stored_files)


def files_table(sources: list[CorpusFiles]) -> pa.Table:
    """Every file of the sources as listed, in order: its source's index, its own index there, path, bytes and
    (parquet) row groups' bytes. What the corpus is cut from; stored once per run for the workers."""
    entries = [(index, s) for index, s in enumerate(sources) if s.kind != "hf"]
    return pa.table(
        {
            "source": pa.array([index for index, s in entries for _ in s.paths], pa.int64()),
            "file": pa.array([i for _, s in entries for i in range(len(s.paths))], pa.int64()),
            "path": pa.array([p for _, s in entries for p in s.paths], pa.string()),
            "size": pa.array([n for _, s in entries for n in s.sizes], pa.int64()),
            "pieces": pa.array(
                [g for _, s in entries for g in (s.pieces or [[] for _ in s.paths])], pa.list_(pa.int64())
            ),
        }
    )


# --------------------------------------------------------------------------------------------
# Listing and checking on the driver


def filesystem_for(path: str, filesystem: pyarrow.fs.FileSystem | None) -> tuple[pyarrow.fs.FileSystem, str]:
    """The filesystem holding ``path`` and the path inside it."""
    if filesystem is not None:
        return filesystem, path.split("://", 1)[-1]
    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), path


def expand(path: str, filesystem: pyarrow.fs.FileSystem | None) -> list[pyarrow.fs.FileInfo]:
    """A file, every corpus file under a directory, or every match of a local glob; sorted by path. Each with the
    size (and mtime) its listing returned: no request per file (on S3 a HEAD each, 3 ms, serial, was 1e5 of them)."""
    fs, inner = filesystem_for(path, filesystem)
    if "://" not in path and any(c in path for c in "*?["):
        return fs.get_file_info(sorted(p for p in glob.glob(path) if Path(p).suffix in SUFFIXES))  # local stats
    info = fs.get_file_info(inner)
    if info.type == pyarrow.fs.FileType.File:
        return [info]
    if info.type == pyarrow.fs.FileType.Directory:
        found = [f for f in listed_tree(fs, inner) if f.type == pyarrow.fs.FileType.File]
        return sorted((f for f in found if Path(f.path).suffix in SUFFIXES), key=lambda f: f.path)
    return []


def listed_tree(fs: pyarrow.fs.FileSystem, directory: str) -> list[pyarrow.fs.FileInfo]:
    """Everything under ``directory``: its own entries, then each subdirectory listed whole in a thread of its own
    (a corpus of 100 language prefixes is listed 100 at a time, not page after page of one listing)."""
    top = fs.get_file_info(pyarrow.fs.FileSelector(directory))
    below = [f.path for f in top if f.type == pyarrow.fs.FileType.Directory]
    with ThreadPoolExecutor(LISTING_THREADS) as pool:
        parts = pool.map(lambda d: fs.get_file_info(pyarrow.fs.FileSelector(d, recursive=True)), below)
        return top + [f for part in parts for f in part]


def list_corpus_files(
    src: CorpusSource, key: str, filesystem: pyarrow.fs.FileSystem | None = None, cached: FooterCache | None = None
) -> CorpusFiles:
    """Resolve one ``data.corpora`` entry (``key`` names it in errors): files of one kind with their listed sizes,
    the first file checked readable, parquet files checked for a readable footer and the text column (footers read
    in parallel; with ``cached``, kept by the listing's paths, sizes and mtimes for the next run or trial)."""
    lang = language_code(src.lang, f"{key}.lang")
    if src.hf_dataset:
        files = CorpusFiles(
            lang=lang,
            kind="hf",
            paths=[],
            text_field=src.text_field,
            hf_dataset=src.hf_dataset,
            hf_config=src.hf_config,
            hf_split=src.hf_split,
        )
        files.rows = len(load_hf_dataset(files)) if Path(src.hf_dataset).is_dir() else None
        return files
    try:
        infos = expand(src.path, filesystem)
        fs, _ = filesystem_for(src.path, filesystem)
        if infos:
            fs.get_file_info(infos[0].path)  # S3: one HEAD, refused unless this principal may read the files
    except OSError as err:
        refused = s3_refusal(err, f"{key}.path {src.path}", "list and read it")
        if refused is None:
            raise
        raise refused from None
    if not infos:
        raise InputError(f"{key}.path: no .txt, .jsonl or .parquet files at {src.path!r}")
    paths, sizes = [f.path for f in infos], [f.size for f in infos]
    kinds = {SUFFIXES[Path(p).suffix] for p in paths}
    if len(kinds) > 1:
        raise InputError(f"{key}.path: {src.path!r} mixes file kinds {sorted(kinds)}: give one source per kind")
    kind = kinds.pop()
    if kind != "parquet" and not any(sizes):
        raise InputError(
            f"{key}.path: {src.path} is empty (0 bytes): give a corpus with a sentence a line (.txt) or "
            "a 'text' field a line (.jsonl)"
        )
    version = hashlib.blake2b(repr([(f.size, str(f.mtime)) for f in infos]).encode(), digest_size=8).hexdigest()
    pieces = parquet_pieces(fs, paths, version, src.text_field, cached) if kind == "parquet" else []
    return CorpusFiles(
        lang=lang, kind=kind, paths=paths, text_field=src.text_field, sizes=sizes, pieces=pieces, version=version
    )


def parquet_pieces(
    fs: pyarrow.fs.FileSystem, paths: list[str], version: str, text_field: str, cached: FooterCache | None
) -> list[list[int]]:
    """Each parquet file's row-group bytes (``check_parquet``), footers read ``LISTING_THREADS`` at a time (the
    first bad file in listing order raises, as a serial read would). ``cached(kind, key_parts, read)``: ``read()``
    unless an earlier run stored its result under the same parts (paths and ``version``: the same files)."""

    def read_all() -> list[list[int]]:
        with ThreadPoolExecutor(LISTING_THREADS) as pool:
            return list(pool.map(lambda path: check_parquet(fs, path, text_field), paths))

    if cached is None:
        return read_all()
    return cached("parquet-footers", [text_field, paths, version], read_all)


def with_language_sampling(sources: list[CorpusFiles], alpha: float) -> list[CorpusFiles]:
    """Sources whose ``keep`` makes language l a share q_l ∝ p_l^alpha of each epoch's sentences (p_l: its
    share of the corpus bytes), by keeping every sentence of the language that gains most and a seeded
    share of the others' (a new share each epoch): the smoothing of mBERT and XLM-R, without repeating rows."""
    if alpha == 1:
        return sources
    if any(s.kind == "hf" for s in sources):
        raise InputError("data.corpus_sampling_alpha < 1 needs file corpora (it weighs languages by file size)")
    sizes: dict[str, int] = {}
    for source in sources:
        sizes[source.lang] = sizes.get(source.lang, 0) + sum(source.sizes)
    total = sum(sizes.values())
    p = {lang: size / total for lang, size in sizes.items()}
    z = sum(share**alpha for share in p.values())
    gain = {lang: share**alpha / z / share for lang, share in p.items()}  # q_l / p_l
    top = max(gain.values())
    return [dataclasses.replace(s, keep=gain[s.lang] / top) for s in sources]


def row_uniforms(keys: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """A uniform in [0, 1) per row key, fixed by (key, seed, epoch): splitmix64 of the mixed integers."""
    x = keys.astype(np.uint64) ^ np.uint64((seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9) % 2**64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / 2.0**53


def check_parquet(fs: pyarrow.fs.FileSystem, path: str, text_field: str) -> list[int]:
    """Its row groups' bytes on storage; raise ``InputError`` naming ``path`` unless its footer reads and it has
    the text column."""
    try:
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            names, meta = parquet.schema_arrow.names, parquet.metadata
    except (OSError, pa.ArrowException) as err:
        raise unreadable_parquet(path, err) from None
    if text_field not in names:
        raise InputError(f"{path}: no '{text_field}' column (has {names})")
    return [
        sum(meta.row_group(g).column(c).total_compressed_size for c in range(meta.num_columns))
        for g in range(meta.num_row_groups)
    ]


# --------------------------------------------------------------------------------------------
# Rows


def row_keys(lang: str, place: str, positions: list[int]) -> np.ndarray:
    """63-bit hashes of rows' places in the corpus (language, file's ``CorpusStream.place``, byte offset or row
    index): the seed of a row's randomness, and what the ledger counts a bad row by."""
    return np.array(
        [
            int.from_bytes(hashlib.blake2b(f"{lang}\t{place}\t{at}".encode(), digest_size=8).digest(), "little") >> 1
            for at in positions
        ],
        dtype=np.int64,
    )


class SkipLedger:
    """Malformed rows and skipped files, counted once each however often an epoch re-reads them."""

    def __init__(self):
        self.rows: dict[str, set[int]] = {}
        self.examples: dict[str, list[str]] = {}
        self.files: dict[str, str] = {}
        self.retries = 0  # remote unit reads begun again after a failure (``read_unit``)

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

    def record_retry(self) -> None:
        self.retries += 1

    def retried(self) -> int:
        return self.retries

    def reports(self) -> list[ReadReport]:
        out = [
            ReadReport(path, malformed=len(keys), examples=[f"{path}: {e}" for e in self.examples[path]])
            for path, keys in sorted(self.rows.items())
            if keys
        ]
        return out + [
            ReadReport(path, malformed=1, examples=[f"{path}: {why} (file skipped)"])
            for path, why in sorted(self.files.items())
        ]


def parse_rows(
    raw: list,
    keys: np.ndarray,
    source: CorpusFiles,
    path: str,
    epoch: int,
    record: Callable[[str, list[tuple[int, str]]], None],
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Raw values of ``source`` (lines, or texts) and their row keys -> the well-formed rows that this epoch
    keeps (the source's ``keep`` share, drawn by (row, ``seed``, ``epoch``)); bad rows go to ``record``."""
    texts, kept_keys, bad = [], [], []
    for value, key in zip(raw, keys.tolist()):
        text, why = value, ""
        if source.kind == "jsonl":
            try:
                text = json.loads(value)[source.text_field]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                why = f"not a JSON object with a '{source.text_field}' field ({type(err).__name__})"
        if not why and not (isinstance(text, str) and text.strip()):
            why = "empty or non-string text"
        if why:
            bad.append((key, f"{why}: {str(value)[:EXCERPT]!r}"))
            continue
        texts.append(text.strip())
        kept_keys.append(key)
    if bad:
        record(path, bad)
    keys = np.array(kept_keys, dtype=np.int64)
    mine = row_uniforms(keys, seed, epoch) < source.keep
    count = int(mine.sum())
    return {
        "text": np.array(texts, dtype=object)[mine],
        "lang": np.array([source.lang] * count, dtype=object),
        "row": keys[mine],
        "epoch": np.full(count, epoch, dtype=np.int64),
    }


def unit_lines(f, start: int, end: int, size: int) -> tuple[list[int], list[str]]:
    """The non-blank lines of an open file that start in bytes [start, end), with their byte offsets. A line
    that begins before ``start`` belongs to the unit before; one that begins before ``end`` is read to its end."""
    begin = max(start - 1, 0)  # the byte before: a line starts at ``start`` if it is a newline
    f.seek(begin)
    data = f.read(end - begin)
    tail = READ_TAIL
    while end < size and not data.endswith(b"\n"):  # the unit's last line, up to its newline
        more = f.read(tail)
        if not more:
            break
        cut = more.find(b"\n")
        data += more if cut < 0 else more[: cut + 1]
        tail *= 2
    at = 0 if start == 0 else data.find(b"\n") + 1
    if start > 0 and at == 0:  # no newline in the unit: every byte belongs to a line begun before it
        return [], []
    offsets, lines = [], []
    while at < len(data) and begin + at < end:
        stop = data.find(b"\n", at)
        stop = len(data) if stop < 0 else stop
        line = data[at:stop].decode("utf-8", errors="replace").rstrip("\r")
        if line.strip():
            offsets.append(begin + at)
            lines.append(line)
        at = stop + 1
    return offsets, lines


def file_changed(fs: pyarrow.fs.FileSystem, inner: str, listed: int) -> str:
    """Why a file listed at ``listed`` bytes can no longer be read as cut ("" if it can)."""
    info = fs.get_file_info(inner)
    if info.type != pyarrow.fs.FileType.File:
        return "file vanished"
    if info.size != listed:
        return f"file changed size since the run listed it ({listed} -> {info.size} bytes)"
    return ""


def read_unit(stream: CorpusStream, unit: Unit, epoch: int, seed: int, ledger) -> dict[str, np.ndarray]:
    """The rows of one unit that ``epoch`` keeps (see ``parse_rows``). A file that vanished, became unreadable
    or changed size is skipped and recorded in ``ledger``: its units are never cut anew. On remote storage a
    read that fails after the storage's own retries (``distalign.storage.S3_RETRIES``) is begun again, up to
    ``READ_ATTEMPTS`` times, each retry logged and counted in ``ledger``: an outage is not a skipped file."""
    source = stream.sources[unit.source]
    if source.kind == "hf":
        data = load_hf_dataset(source)
        if unit.end >= 0:
            data = data.select(range(unit.start, unit.end))
        raw = [row[source.text_field] for row in data]
        positions = list(range(unit.start, unit.start + len(raw)))
        return parse_rows(
            raw,
            row_keys(source.lang, stream.place(unit), positions),
            source,
            source.hf_dataset,
            epoch,
            ledger.record_rows,
            seed,
        )
    fs, inner = filesystem_for(unit.path, stream.filesystem)
    listed = unit.listed
    attempts = 1 if isinstance(fs, pyarrow.fs.LocalFileSystem) else READ_ATTEMPTS  # a local error is no outage
    for attempt in range(1, attempts + 1):
        try:
            why = file_changed(fs, inner, listed)
            if not why:
                positions, raw = unit_raw(fs, inner, unit, source, listed)
            break
        except (OSError, pa.ArrowException) as err:
            why = f"unreadable ({err})"
            if attempt < attempts:
                wait = RETRY_WAIT_S * 2 ** (attempt - 1)
                log.warning(
                    "reading %s [%d, %d) failed (%s); retry %d of %d in %.0f s",
                    unit.path,
                    unit.start,
                    unit.end,
                    err,
                    attempt,
                    attempts - 1,
                    wait,
                )
                ledger.record_retry()
                time.sleep(wait)
    if why:
        ledger.record_file(unit.path, why)
        return parse_rows([], np.zeros(0, dtype=np.int64), source, unit.path, epoch, ledger.record_rows, seed)
    return parse_rows(
        raw, row_keys(source.lang, stream.place(unit), positions), source, unit.path, epoch, ledger.record_rows, seed
    )


def unit_raw(
    fs: pyarrow.fs.FileSystem, inner: str, unit: Unit, source: CorpusFiles, listed: int
) -> tuple[list[int], list]:
    """A file unit's raw values (lines, or texts of its row groups) and their positions (byte offsets, row indices)."""
    with fs.open_input_file(inner) as f:
        if source.kind != "parquet":
            return unit_lines(f, unit.start, unit.end, listed)
        parquet = pq.ParquetFile(f)
        first = sum(parquet.metadata.row_group(g).num_rows for g in range(unit.start))
        raw = parquet.read_row_groups(range(unit.start, unit.end), columns=[source.text_field]).column(0).to_pylist()
    return list(range(first, first + len(raw))), raw


# --------------------------------------------------------------------------------------------
# In this process (tests, the driver's samples)


def read_rows(
    stream: CorpusStream, epoch: int = 0, seed: int = 0, ledger: SkipLedger | None = None
) -> Iterator[dict[str, np.ndarray]]:
    """Every row of one epoch, unit after unit in listing order, read in this process."""
    ledger = ledger or SkipLedger()
    for unit in stream.units():
        rows = read_unit(stream, unit, epoch, seed, ledger)
        if len(rows["row"]):
            yield rows


def count_share(stream: CorpusStream, share: int, shares: int) -> int:
    """Rows that epoch 0 keeps (``read_rows``'s) in every ``shares``-th unit from ``share`` on: strided, so that a
    share mixes files and sources of every size."""
    units, ledger = stream.units(), SkipLedger()
    return sum(len(read_unit(stream, u, 0, 0, ledger)["row"]) for u in units.take(range(share, len(units), shares)))


def sample_texts(stream: CorpusStream, limit: int) -> list[str]:
    """The first ``limit`` sentences of every source (the tiny model's tokenizer is trained on them)."""
    texts: list[str] = []
    for source in stream.sources:
        taken = 0
        for rows in read_rows(dataclasses.replace(stream, sources=[source])):
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

    def record_retry(self) -> None:
        self._actor().record_retry.remote()


COUNT_SHARES_PER_CPU = 4  # counting tasks per CPU of the cluster: uneven shares still end about together


def count_rows(stream: CorpusStream) -> int:
    """The rows of the corpus that epoch 0 keeps (``read_rows``'s). With Ray up: Ray tasks read a share of the
    units each (``count_share``), spread over the cluster's CPUs (O(bytes / CPUs)); the driver holds the stream
    once in the object store and sums a number per task. Without Ray (tests, tools): read in this process."""
    import ray

    if not ray.is_initialized():
        return sum(len(rows["row"]) for rows in read_rows(stream))
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    shares = max(1, int(ray.cluster_resources().get("CPU", 1))) * COUNT_SHARES_PER_CPU
    # the cluster's CPUs, not the caller's placement group (None: Ray's way out of it): a Tune trial's holds none
    anywhere = PlacementGroupSchedulingStrategy(placement_group=None)  # type: ignore[arg-type]
    count = ray.remote(count_share).options(num_cpus=1, scheduling_strategy=anywhere)
    shared = ray.put(stream)
    return sum(ray.get([count.remote(shared, share, shares) for share in range(shares)]))


def ledger_for(name: str) -> RemoteLedger | SkipLedger:
    """The run's ledger actor by name, or a throw-away local ledger when the run has none ("")."""
    return RemoteLedger(name) if name else SkipLedger()


def start_ledger(name: str):
    """The run's ledger actor (the driver owns it and reads ``reports`` at the end), on the driver's node: a run
    that loses another node keeps it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(SkipLedger).options(name=name, get_if_exists=True, scheduling_strategy=here).remote()
