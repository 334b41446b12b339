"""Corpus streaming: listing and checks on the driver, units (byte ranges, row groups) read exactly once,
row identity by place (duplicates get keys of their own), bad input at scale (truncated JSON lines, null
texts, files that vanish, change size or become unreadable between epochs), Hugging Face datasets and S3.
Read in this process here; ``tests/preparation/test_corpus_streaming.py`` reads the same in Ray Data tasks."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_files import write_corpus

from distalign.data.corpus_stream import (
    CorpusStream,
    InputError,
    SkipLedger,
    list_corpus_files,
    read_rows,
    read_unit,
    row_keys,
    sample_texts,
    with_language_sampling,
)
from distalign.data.sources import CorpusSource


def stream_of(root, *sources):
    return CorpusStream([list_corpus_files(src, f"data.corpora[{i}]") for i, src in enumerate(sources)])


def all_rows(stream, epoch=0, ledger=None):
    return [
        (lang, text, key)
        for rows in read_rows(stream, epoch, ledger=ledger)
        for lang, text, key in zip(rows["lang"], rows["text"], rows["row"])
    ]


def test_directories_globs_and_kinds_are_listed_and_read(tmp_path):
    root = write_corpus(tmp_path)
    stream = stream_of(
        root,
        CorpusSource(str(root / "txt"), "en"),
        CorpusSource(str(root / "jsonl" / "*.jsonl"), "de"),
        CorpusSource(str(root / "pq"), "fr"),
    )
    assert [(s.kind, len(s.paths)) for s in stream.sources] == [("text", 2), ("jsonl", 1), ("parquet", 1)]
    ledger = SkipLedger()
    rows = all_rows(stream, ledger=ledger)
    assert sorted((lang, text) for lang, text, _ in rows) == sorted(
        [
            ("en", "the cat sleeps"),
            ("en", "the dog runs"),
            ("en", "a bird sings"),
            ("de", "ein hund"),
            ("de", "eine katze"),
            ("fr", "un chat"),
            ("fr", "un chien"),
        ]
    )
    # each row's key is the hash of its place: language, source 0's file 0, byte offset of its line (its mask seed)
    assert ("en", "the dog runs", row_keys("en", "0:0", [16])[0]) in rows
    reports = {r.path: r for r in ledger.reports()}
    jsonl, parquet = str(root / "jsonl" / "c.jsonl"), str(root / "pq" / "d.parquet")
    assert reports[jsonl].malformed == 2 and "abgeschnit" in reports[jsonl].examples[0]
    assert "'text' field" in reports[jsonl].examples[1]
    assert reports[parquet].malformed == 2  # a null and a blank text
    assert len(sample_texts(stream, 1)) == 3 and len(sample_texts(stream, 10)) == 7  # at most so many per source


@pytest.mark.parametrize("unit_bytes", [1, 7, 100, 10**6])
def test_byte_range_units_read_every_line_once_whatever_the_cut(tmp_path, unit_bytes):
    """A unit owns the lines that start in it: any cut reads every line exactly once, in order, and a bad row
    re-read by two epochs is counted once."""
    lines = [json.dumps({"text": f"sentence {i} " + "x" * (i * 7 % 53)}) for i in range(300)]
    lines[40] = '{"text": "cut sh'
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    stream = CorpusStream(
        [list_corpus_files(CorpusSource(str(tmp_path / "a.jsonl"), "en"), "k")], unit_bytes=unit_bytes
    )
    assert len(stream.units()) > (1 if unit_bytes < 10**6 else 0)
    ledger = SkipLedger()
    for epoch in (0, 1):
        texts = [t for _, t, _ in all_rows(stream, epoch=epoch, ledger=ledger)]
        assert texts == [json.loads(t)["text"].strip() for i, t in enumerate(lines) if i != 40]
    assert sum(r.malformed for r in ledger.reports()) == 1


def test_a_sentence_that_occurs_many_times_gets_a_key_and_a_mask_of_its_own_each_time(tmp_path):
    from distalign.data.row_random import RowRandom

    (tmp_path / "dup.txt").write_text("the same sentence\n" * 50 + "another one\n")
    stream = stream_of(tmp_path, CorpusSource(str(tmp_path / "dup.txt"), "en"))
    keys = [key for _, text, key in all_rows(stream) if text == "the same sentence"]
    assert len(keys) == len(set(keys)) == 50
    masks = RowRandom(0, 0, keys).rand(16) < 0.15
    assert len({tuple(m.tolist()) for m in masks}) > 40  # identical text, (nearly all) different masks


def test_a_file_that_changes_size_or_vanishes_between_epochs_is_reported_never_cut_anew(tmp_path):
    for name in ("grow", "shrink", "gone", "kept"):
        (tmp_path / f"{name}.txt").write_text("".join(f"{name} line {i}\n" for i in range(100)))
    stream = CorpusStream([list_corpus_files(CorpusSource(str(tmp_path), "en"), "k")], unit_bytes=256)
    units = stream.units()
    before = [t for u in units for t in read_unit(stream, u, 0, 0, SkipLedger())["text"].tolist()]
    assert len(before) == len(set(before)) == 400
    size = (tmp_path / "grow.txt").stat().st_size
    with open(tmp_path / "grow.txt", "a") as f:
        f.write("grow line 100\n")
    (tmp_path / "shrink.txt").write_text("".join(f"shrink line {i}\n" for i in range(50)))
    (tmp_path / "gone.txt").unlink()
    ledger = SkipLedger()
    after = [t for u in units for t in read_unit(stream, u, 1, 0, ledger)["text"].tolist()]
    assert after == [f"kept line {i}" for i in range(100)]  # the changed files' units are all skipped
    skipped = {r.path: r.examples[0] for r in ledger.reports()}
    assert f"changed size since the run listed it ({size} -> {size + 14} bytes)" in skipped[str(tmp_path / "grow.txt")]
    assert "changed size" in skipped[str(tmp_path / "shrink.txt")]
    assert "file vanished" in skipped[str(tmp_path / "gone.txt")]


def test_unreadable_parquet_is_named_before_the_run_and_skipped_if_it_breaks_later(tmp_path):
    root = write_corpus(tmp_path)
    broken = root / "pq" / "e.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="e.parquet: unreadable parquet"):
        list_corpus_files(CorpusSource(str(root / "pq"), "fr"), "data.corpora[0]")
    broken.unlink()
    stream = stream_of(root, CorpusSource(str(root / "pq"), "fr"), CorpusSource(str(root / "txt"), "en"))
    parquet = root / "pq" / "d.parquet"
    parquet.write_bytes(b"x" * parquet.stat().st_size)  # broken between listing and an epoch, same size
    (root / "txt" / "b.txt").unlink()  # and a file vanished
    ledger = SkipLedger()
    rows = all_rows(stream, ledger=ledger)
    assert sorted(text for _, text, _ in rows) == ["the cat sleeps", "the dog runs"]
    skipped = {r.path: r.examples[0] for r in ledger.reports()}
    assert "unreadable" in skipped[str(root / "pq" / "d.parquet")]
    assert "file vanished" in skipped[str(root / "txt" / "b.txt")]


def test_listing_errors_name_the_source(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"data.corpora\[2\].path: no .txt"):
        list_corpus_files(CorpusSource(str(tmp_path / "empty"), "en"), "data.corpora[2]")
    root = write_corpus(tmp_path / "c")
    with pytest.raises(InputError, match="mixes file kinds"):
        list_corpus_files(CorpusSource(str(root), "en"), "data.corpora[0]")
    pq.write_table(pa.table({"sentence": ["x"]}), tmp_path / "other.parquet")
    with pytest.raises(InputError, match="no 'text' column"):
        list_corpus_files(CorpusSource(str(tmp_path / "other.parquet"), "en"), "data.corpora[0]")


def test_hugging_face_dataset_saved_to_disk(tmp_path):
    import datasets

    datasets.Dataset.from_dict({"sentence": ["uno dos", "", "tres"]}).save_to_disk(str(tmp_path / "hf"))
    stream = stream_of(tmp_path, CorpusSource(lang="es", hf_dataset=str(tmp_path / "hf"), text_field="sentence"))
    ledger = SkipLedger()
    assert sorted(text for _, text, _ in all_rows(stream, ledger=ledger)) == ["tres", "uno dos"]
    assert sum(r.malformed for r in ledger.reports()) == 1


def test_corpus_on_s3(s3_endpoint, tmp_path):
    from distalign.storage import s3_filesystem

    url, s3 = s3_endpoint
    s3.put_object(Bucket="ckpt", Key="corpora/en/part-0.txt", Body=b"one two\nthree four\n")
    s3.put_object(Bucket="ckpt", Key="corpora/en/part-1.txt", Body=b"five six\n")
    fs = s3_filesystem(url)
    stream = CorpusStream([list_corpus_files(CorpusSource("s3://ckpt/corpora/en", "en"), "data.corpora[0]", fs)], fs)
    assert stream.sources[0].paths == ["ckpt/corpora/en/part-0.txt", "ckpt/corpora/en/part-1.txt"]
    assert sorted(text for _, text, _ in all_rows(stream)) == ["five six", "one two", "three four"]


def test_language_sampling_gives_each_language_q_proportional_to_p_to_the_alpha(tmp_path):
    """9:1 bytes and alpha 0.5: q = sqrt(.9), sqrt(.1) normalised = 0.75 / 0.25, so the larger language keeps
    a third of its sentences each epoch (0.75 / 0.9 over 0.25 / 0.1) and the smaller one all of them."""
    (tmp_path / "big.txt").write_text("".join(f"big sentence {i:05d}\n" for i in range(9000)))
    (tmp_path / "small.txt").write_text("".join(f"sml sentence {i:05d}\n" for i in range(1000)))
    sources = [
        list_corpus_files(CorpusSource(str(tmp_path / f"{name}.txt"), lang), "k")
        for name, lang in (("big", "xb"), ("small", "xs"))
    ]
    sampled = with_language_sampling(sources, 0.5)
    assert [round(s.keep, 4) for s in sampled] == [round((0.75 / 0.9) / (0.25 / 0.1), 4), 1.0]
    stream = CorpusStream(sampled)
    epochs = [[lang for lang, _, _ in all_rows(stream, epoch=e)] for e in (0, 1)]
    for langs in epochs:
        assert abs(langs.count("xb") / len(langs) - 0.75) < 0.02
        assert langs.count("xs") == 1000
    kept = [{t for lang, t, _ in all_rows(stream, epoch=e) if lang == "xb"} for e in (0, 1)]
    assert kept[0] != kept[1]  # a new share of the larger language every epoch
    assert with_language_sampling(sources, 1.0) == sources  # alpha 1: the corpus as it is


class CountingFileSystem:
    """The local filesystem, counting the bytes read through it."""

    def __init__(self):
        self.fs, self.read = pa.fs.LocalFileSystem(), 0

    def get_file_info(self, path):
        return self.fs.get_file_info(path)

    def open_input_file(self, path):
        counter, inner = self, self.fs.open_input_file(path)

        class Counted:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                inner.close()

            def seek(self, at):
                inner.seek(at)

            def read(self, size):
                data = inner.read(size)
                counter.read += len(data)
                return data

        return Counted()


def test_an_epoch_reads_each_byte_about_once(tmp_path, monkeypatch):
    """All units of an epoch (whatever worker reads each) read 1.0x the corpus bytes, plus the byte before each unit
    and the end of its last line; before the byte-range split every worker read every file."""
    import pyarrow.fs  # noqa: F401 (pa.fs)

    for name, lines in (("big", 20000), ("small", 200)):  # 100x apart
        (tmp_path / f"{name}.txt").write_text(
            "".join(f"{name} sentence number {i} " + "w " * (i % 30) + "\n" for i in range(lines))
        )
    counting = CountingFileSystem()
    monkeypatch.setattr("distalign.data.corpus_stream.filesystem_for", lambda path, fs: (counting, path))
    stream = CorpusStream([list_corpus_files(CorpusSource(str(tmp_path), "en"), "k")], unit_bytes=16384)
    total = sum(stream.sources[0].sizes)
    assert sum(len(rows["row"]) for rows in read_rows(stream)) == 20200
    assert len(stream.units()) > 60 and 1 <= counting.read / total < 1.05


def test_an_s3_listing_takes_sizes_from_the_listing_not_a_head_per_file(s3_endpoint):
    """40 files under two language prefixes: the sizes come from the listing (listed in parallel per prefix), a
    constant number of HEADs (the path itself, one file's read permission), not one per file."""
    from distalign.storage import s3_filesystem
    from distalign.tools.bench.s3_proxy import S3Proxy

    url, s3 = s3_endpoint
    bodies = {
        f"listing/{lang}/part-{i:02d}.txt": f"{lang} sentence {i}\n".encode() * (i + 1)
        for lang in ("de", "en")
        for i in range(20)
    }
    for key, body in bodies.items():
        s3.put_object(Bucket="ckpt", Key=key, Body=body)
    with S3Proxy(url) as proxy:
        files = list_corpus_files(CorpusSource("s3://ckpt/listing", "en"), "data.corpora[0]", s3_filesystem(proxy.url))
    assert files.paths == [f"ckpt/{key}" for key in sorted(bodies)]
    assert files.sizes == [len(bodies[key]) for key in sorted(bodies)]
    assert proxy.tally.requests["HEAD"] <= 3, proxy.tally.requests


def test_workers_cut_the_driver_s_units_from_the_stored_listing_and_their_stream_does_not_grow_with_files(tmp_path):
    """The plan's corpus stream carries where the listing is, not the file lists: each worker cuts the same units
    (paths, ranges, listed sizes) from the stored listing and reads the same rows; its pickle is as big for
    10,000 files as for 10."""
    import pickle

    from distalign.data.corpus_stream import CorpusFiles, count_share
    from distalign.preparation.table_rows import store_table

    (tmp_path / "txt").mkdir()
    for i in range(4):
        (tmp_path / "txt" / f"{i}.txt").write_text("".join(f"line {i}-{j}\n" for j in range(50 * (i + 1))))
    (tmp_path / "pq").mkdir()
    for i in range(2):
        pq.write_table(
            pa.table({"text": [f"row {i}-{j}" for j in range(30)]}), tmp_path / "pq" / f"{i}.parquet", row_group_size=7
        )
    sources = [CorpusSource(str(tmp_path / "txt"), "en"), CorpusSource(str(tmp_path / "pq"), "de")]
    driver = stream_of(tmp_path, *sources)
    driver.unit_bytes = 256
    stored = store_table(driver.files(), str(tmp_path / "storage"), "", "run", "corpus-files")
    worker = driver.for_workers(stored)
    assert worker.sources[0].paths == [] and len(worker.units()) == len(driver.units()) > 20
    assert [(u, u.file, u.listed) for u in worker.units()] == [(u, u.file, u.listed) for u in driver.units()]
    assert all_rows(worker) == all_rows(driver) and len(all_rows(driver)) == 560
    # the rows counted by shares of the units (the Ray tasks of ``count_rows``) are every row once
    assert sum(count_share(worker, share, 3) for share in range(3)) == 560

    def pickled(files: int) -> int:
        paths = [f"corpus/{i:06d}.txt" for i in range(files)]
        listing = CorpusFiles(lang="en", kind="text", paths=paths, sizes=[2**20] * files)
        return len(pickle.dumps(CorpusStream([listing]).for_workers(stored)))

    assert pickled(10_000) == pickled(10)


def test_an_s3_parquet_listing_reads_each_footer_once_across_runs(s3_endpoint, tmp_path):
    """Parquet on S3: sizes from the listing (a constant number of HEADs), each footer read once (in parallel),
    and a second listing of the same files (a restart, another trial) reads none."""
    import functools
    import io

    from distalign.preparation.cache import cached_json
    from distalign.storage import s3_filesystem
    from distalign.tools.bench.s3_proxy import S3Proxy

    url, s3 = s3_endpoint
    for i in range(12):
        body = io.BytesIO()
        pq.write_table(pa.table({"text": [f"row {i}-{j}" for j in range(20)]}), body, row_group_size=6)
        s3.put_object(Bucket="ckpt", Key=f"pq/{'de' if i % 2 else 'en'}/{i:02d}.parquet", Body=body.getvalue())
    footers = functools.partial(cached_json, tmp_path / "cache")
    with S3Proxy(url) as proxy:
        first = list_corpus_files(CorpusSource("s3://ckpt/pq", "en"), "c", s3_filesystem(proxy.url), footers)
        assert [len(p) for p in first.pieces] == [4] * 12
        footers_read = {key for key, n in proxy.tally.get_bytes.items() if key.endswith(".parquet") and n}
        # a HEAD per footer read (pyarrow opens an S3 file by its size), in parallel; none on a second listing
        assert len(footers_read) == 12 and proxy.tally.requests["HEAD"] <= 3 + 12, proxy.tally.requests
        proxy.reset()
        again = list_corpus_files(CorpusSource("s3://ckpt/pq", "en"), "c", s3_filesystem(proxy.url), footers)
        assert again == first
        assert not [key for key in proxy.tally.get_bytes if key.endswith(".parquet")], proxy.tally.get_bytes
        assert proxy.tally.requests["HEAD"] <= 3, proxy.tally.requests  # the path, one file's read permission
