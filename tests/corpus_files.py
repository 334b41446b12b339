"""Corpus files with known bad rows, for the corpus streaming tests."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq


def write_corpus(root):
    """A directory of three files of one language each kind, with known bad rows."""
    (root / "txt").mkdir(parents=True)
    (root / "txt" / "a.txt").write_text("the cat sleeps\n\nthe dog runs\n")
    (root / "txt" / "b.txt").write_text("a bird sings\n")
    (root / "jsonl").mkdir()
    (root / "jsonl" / "c.jsonl").write_text(
        json.dumps({"text": "ein hund"})
        + "\n"
        + '{"text": "abgeschnit'
        + "\n"
        + json.dumps({"txt": "x"})
        + "\n"
        + json.dumps({"text": "eine katze"})
        + "\n"
    )
    (root / "pq").mkdir()
    pq.write_table(pa.table({"text": ["un chat", None, "  ", "un chien"]}), root / "pq" / "d.parquet")
    return root
