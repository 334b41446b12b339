"""Parquet footers read once per set of files (paths, sizes, mtimes) across runs and trials: a second listing of
the same files reads no footer, a changed file is read again."""

from __future__ import annotations

import functools
import os

import pyarrow as pa
import pyarrow.parquet as pq

from distalign.data import corpus_stream
from distalign.data.corpus_stream import list_corpus_files
from distalign.data.sources import CorpusSource
from distalign.preparation.cache import cached_json


def test_parquet_footers_are_read_once_for_the_same_files(tmp_path, monkeypatch):
    corpus = tmp_path / "pq"
    corpus.mkdir()
    for i in range(3):
        pq.write_table(
            pa.table({"text": [f"row {j}" for j in range(10 * (i + 1))]}), corpus / f"{i}.parquet", row_group_size=7
        )
    reads = []
    real = corpus_stream.check_parquet
    monkeypatch.setattr(corpus_stream, "check_parquet", lambda *args: reads.append(args[1]) or real(*args))
    footers = functools.partial(cached_json, tmp_path / "cache")
    first = list_corpus_files(CorpusSource(str(corpus), "en"), "data.corpora[0]", cached=footers)
    assert len(reads) == 3 and [len(p) for p in first.pieces] == [2, 3, 5]
    again = list_corpus_files(CorpusSource(str(corpus), "en"), "data.corpora[0]", cached=footers)
    assert len(reads) == 3 and again == first  # from the cache: no footer read
    stat = os.stat(corpus / "1.parquet")
    os.utime(corpus / "1.parquet", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same size, touched
    list_corpus_files(CorpusSource(str(corpus), "en"), "data.corpora[0]", cached=footers)
    assert len(reads) == 6


def test_the_corpus_count_is_read_once_for_the_same_files(tmp_path, monkeypatch):
    """``corpus_rows`` (an O(bytes) read) is kept by the files' sizes and mtimes: a restart or another trial on the
    same corpus reads nothing; a changed file is counted again."""
    from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
    from distalign.data.corpus_stream import CorpusStream
    from distalign.preparation import prepared as prepared_module
    from distalign.preparation.prepared import PreparedData

    corpus = tmp_path / "txt"
    corpus.mkdir()
    (corpus / "a.txt").write_text("one\n\ntwo\nthree\n")
    (corpus / "b.txt").write_text("four\n")
    reads = []
    real = prepared_module.count_rows
    monkeypatch.setattr(prepared_module, "count_rows", lambda stream: reads.append(1) or real(stream))

    def rows() -> int:
        stream = CorpusStream([list_corpus_files(CorpusSource(str(corpus), "en"), "data.corpora[0]")])
        prepared = PreparedData(
            model_path="",
            constraints=CONSTRAINT_SCHEMA.empty_table(),
            corpus=stream,
            eval_pairs=[],
            cache_dir=str(tmp_path / "cache"),
        )
        return prepared.corpus_rows

    assert rows() == 4 and len(reads) == 1
    assert rows() == 4 and len(reads) == 1  # a second run: from the cache
    (corpus / "b.txt").write_text("four\nfive\n")
    assert rows() == 5 and len(reads) == 2
