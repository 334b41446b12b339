"""Config sections that name input files: where each training or evaluation stream is read from.

Their languages are ``LanguageCode`` fields: the config loader reads them through ``distalign.languages``.
"""

from __future__ import annotations

from dataclasses import dataclass

from distalign.languages import LanguageCode


@dataclass
class DictionarySource:
    """A bilingual dictionary (G-BLI / MUSE: ``src<TAB>tgt`` per line) between two languages."""

    path: str = ""
    lang1: LanguageCode = ""
    lang2: LanguageCode = ""


@dataclass
class CorpusSource:
    """Sentences of one language, streamed (``distalign.data.corpus_stream``): files or a Hugging Face dataset."""

    # A file, directory or glob of .txt (a sentence a line), .jsonl ({"text": ...}) or .parquet files;
    # local or s3://
    path: str = ""
    lang: LanguageCode = ""
    text_field: str = "text"  # the JSON key or parquet / dataset column holding the sentence
    # Instead of path: a Hugging Face dataset, a `save_to_disk` directory or a name for
    # `datasets.load_dataset` (streamed); with its configuration and split
    hf_dataset: str = ""
    hf_config: str = ""
    hf_split: str = "train"


@dataclass
class StaticVectorsSource:
    path: str = ""  # word2vec text format (e.g. from `distalign static extract` / `static align`)
    lang: LanguageCode = ""


@dataclass
class ParallelSource:
    """Translated sentence pairs (TLM): a TSV ``src<TAB>tgt`` (``path``) or two line-aligned files (``path1``,
    ``path2``), sentences of ``lang1`` and ``lang2``."""

    path: str = ""
    path1: str = ""
    path2: str = ""
    lang1: LanguageCode = ""
    lang2: LanguageCode = ""
