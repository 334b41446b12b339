"""Corpus streaming: listing and checks on the driver, each worker's share of the rows, bad input at scale
(truncated JSON lines, null texts, files that vanish or become unreadable between epochs), Hugging Face
datasets and S3. Read in this process here; ``tests/preparation/test_corpus_streaming.py`` reads the same
with Ray Data's readers."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distalign.data.corpus_stream import (
    CorpusStream,
    InputError,
    SkipLedger,
    epoch_order,
    list_corpus_files,
    read_rows,
    row_keys,
    sample_texts,
    with_language_sampling,
)
from corpus_files import write_corpus
from distalign.data.sources import CorpusSource


def stream_of(root, *sources):
    return CorpusStream([list_corpus_files(src, f"data.corpora[{i}]") for i, src in enumerate(sources)])


def all_rows(stream, workers=1, rank=0, epoch=0, ledger=None):
    return [(lang, text, key) for rows in read_rows(stream, epoch, rank, workers, ledger=ledger)
            for lang, text, key in zip(rows["lang"], rows["text"], rows["row"])]


def test_directories_globs_and_kinds_are_listed_and_read(tmp_path):
    root = write_corpus(tmp_path)
    stream = stream_of(root, CorpusSource(str(root / "txt"), "en"), CorpusSource(str(root / "jsonl" / "*.jsonl"), "de"),
                       CorpusSource(str(root / "pq"), "fr"))
    assert [(s.kind, len(s.paths)) for s in stream.sources] == [("text", 2), ("jsonl", 1), ("parquet", 1)]
    ledger = SkipLedger()
    rows = all_rows(stream, ledger=ledger)
    assert sorted((lang, text) for lang, text, _ in rows) == sorted([
        ("en", "the cat sleeps"), ("en", "the dog runs"), ("en", "a bird sings"), ("de", "ein hund"),
        ("de", "eine katze"), ("fr", "un chat"), ("fr", "un chien")])
    # each row's key is the hash of its language and text (the worker that trains on it, its mask seed)
    assert all(key == row_keys([lang], [text])[0] for lang, text, key in rows)
    reports = {r.path: r for r in ledger.reports()}
    jsonl, parquet = str(root / "jsonl" / "c.jsonl"), str(root / "pq" / "d.parquet")
    assert reports[jsonl].malformed == 2 and "abgeschnit" in reports[jsonl].examples[0]
    assert "'text' field" in reports[jsonl].examples[1]
    assert reports[parquet].malformed == 2  # a null and a blank text
    assert len(sample_texts(stream, 1)) == 3 and len(sample_texts(stream, 10)) == 7  # at most so many per source


def test_workers_share_the_rows_without_overlap_and_skips_count_once(tmp_path):
    root = write_corpus(tmp_path)
    stream = stream_of(root, CorpusSource(str(root / "txt"), "en"), CorpusSource(str(root / "jsonl"), "de"),
                       CorpusSource(str(root / "pq"), "fr"))
    ledger = SkipLedger()
    shares = [set(all_rows(stream, workers=3, rank=r, epoch=e, ledger=ledger)) for r in range(3) for e in (0, 1)]
    everything = set(all_rows(stream))
    by_rank = [shares[2 * r] for r in range(3)]
    assert set.union(*by_rank) == everything and sum(map(len, by_rank)) == len(everything)
    assert all(shares[2 * r] == shares[2 * r + 1] for r in range(3))  # a worker's rows are the same every epoch
    # two epochs on three workers re-read every bad row six times: each is counted once
    assert sum(r.malformed for r in ledger.reports()) == 4


def test_file_order_is_seeded_per_epoch():
    paths = [f"f{i}" for i in range(20)]
    assert epoch_order(paths, 0, 0) == epoch_order(paths, 0, 0)
    assert epoch_order(paths, 0, 0) != epoch_order(paths, 0, 1)
    assert epoch_order(paths, 1, 0) != epoch_order(paths, 0, 0)
    assert sorted(epoch_order(paths, 3, 7)) == sorted(paths)


def test_unreadable_parquet_is_named_before_the_run_and_skipped_if_it_breaks_later(tmp_path):
    root = write_corpus(tmp_path)
    broken = root / "pq" / "e.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="e.parquet: unreadable parquet"):
        list_corpus_files(CorpusSource(str(root / "pq"), "fr"), "data.corpora[0]")
    broken.unlink()
    stream = stream_of(root, CorpusSource(str(root / "pq"), "fr"), CorpusSource(str(root / "txt"), "en"))
    (root / "pq" / "d.parquet").write_bytes(b"garbage")  # broken between listing and an epoch
    (root / "txt" / "b.txt").unlink()  # and a file vanished
    ledger = SkipLedger()
    rows = all_rows(stream, ledger=ledger)
    assert sorted(text for _, text, _ in rows) == ["the cat sleeps", "the dog runs"]
    skipped = {r.path: r.examples[0] for r in ledger.reports()}
    assert "unreadable parquet" in skipped[str(root / "pq" / "d.parquet")]
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
    from distalign.storage import storage_filesystem

    url, s3 = s3_endpoint
    s3.put_object(Bucket="ckpt", Key="corpora/en/part-0.txt", Body=b"one two\nthree four\n")
    s3.put_object(Bucket="ckpt", Key="corpora/en/part-1.txt", Body=b"five six\n")
    fs = storage_filesystem(url)
    stream = CorpusStream([list_corpus_files(CorpusSource("s3://ckpt/corpora/en", "en"), "data.corpora[0]", fs)], fs)
    assert stream.sources[0].paths == ["ckpt/corpora/en/part-0.txt", "ckpt/corpora/en/part-1.txt"]
    assert sorted(text for _, text, _ in all_rows(stream)) == ["five six", "one two", "three four"]


def test_language_sampling_gives_each_language_q_proportional_to_p_to_the_alpha(tmp_path):
    """9:1 bytes and alpha 0.5: q = sqrt(.9), sqrt(.1) normalised = 0.75 / 0.25, so the larger language keeps
    a third of its sentences each epoch (0.75 / 0.9 over 0.25 / 0.1) and the smaller one all of them."""
    (tmp_path / "big.txt").write_text("".join(f"big sentence {i:05d}\n" for i in range(9000)))
    (tmp_path / "small.txt").write_text("".join(f"sml sentence {i:05d}\n" for i in range(1000)))
    sources = [list_corpus_files(CorpusSource(str(tmp_path / f"{name}.txt"), name), "k") for name in ("big", "small")]
    sampled = with_language_sampling(sources, 0.5, None)
    assert [round(s.keep, 4) for s in sampled] == [round((0.75 / 0.9) / (0.25 / 0.1), 4), 1.0]
    stream = CorpusStream(sampled)
    epochs = [[lang for lang, _, _ in all_rows(stream, epoch=e)] for e in (0, 1)]
    for langs in epochs:
        assert abs(langs.count("big") / len(langs) - 0.75) < 0.02
        assert langs.count("small") == 1000
    kept = [{t for lang, t, _ in all_rows(stream, epoch=e) if lang == "big"} for e in (0, 1)]
    assert kept[0] != kept[1]  # a new share of the larger language every epoch
    assert with_language_sampling(sources, 1.0, None) == sources  # alpha 1: the corpus as it is
