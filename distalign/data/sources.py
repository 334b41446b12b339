"""Config sections that name input files: where each training or evaluation stream is read from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DictionarySource:
    """A bilingual dictionary (G-BLI / MUSE: ``src<TAB>tgt`` per line) between two languages."""

    path: str = ""
    lang1: str = ""
    lang2: str = ""


@dataclass
class CorpusSource:
    path: str = ""  # .txt (one sentence a line), .jsonl ({"text": ...}) or .parquet (column text)
    lang: str = ""


@dataclass
class StaticVectorsSource:
    path: str = ""  # word2vec text format (e.g. from `distalign static extract` / `static align`)
    lang: str = ""
