"""Config sections that name input files: where each training or evaluation stream is read from.

Their languages are ``LanguageCode`` fields: the config loader reads them through ``distalign.languages``.
"""

from __future__ import annotations

from dataclasses import dataclass

from distalign.languages import LanguageCode


@dataclass
class DictionarySource:
    """A bilingual dictionary (G-BLI / MUSE: ``src<TAB>tgt`` per line) between two languages."""

    path: str = ""  # the dictionary file, local
    lang1: LanguageCode = LanguageCode("")  # language of the first column
    lang2: LanguageCode = LanguageCode("")  # language of the second column


@dataclass
class CorpusSource:
    """Sentences of one language, streamed (``distalign.data.corpus_stream``): files or a Hugging Face dataset."""

    # A file, directory or glob of .txt (a sentence a line), .jsonl ({"text": ...}) or .parquet files;
    # local or s3://
    path: str = ""
    lang: LanguageCode = LanguageCode("")  # the sentences' language code
    text_field: str = "text"  # the JSON key or parquet / dataset column holding the sentence
    # Instead of path: a Hugging Face dataset, a `save_to_disk` directory or a name for
    # `datasets.load_dataset` (streamed); with its configuration and split
    hf_dataset: str = ""
    hf_config: str = ""  # the dataset's configuration (subset) name
    hf_split: str = "train"  # the dataset's split


@dataclass
class StaticVectorsSource:
    path: str = ""  # word2vec text format (e.g. from `distalign static extract` / `static align`)
    lang: LanguageCode = LanguageCode("")  # the words' language code


@dataclass
class ParallelSource:
    """Translated sentence pairs (TLM): a TSV ``src<TAB>tgt`` (``path``) or two line-aligned files (``path1``,
    ``path2``), sentences of ``lang1`` and ``lang2``."""

    path: str = ""  # a TSV file, src<TAB>tgt per line
    path1: str = ""  # instead of path: the lang1 sentences, one a line ...
    path2: str = ""  # ... and their translations in lang2, line by line
    lang1: LanguageCode = LanguageCode("")  # language of the source sentences
    lang2: LanguageCode = LanguageCode("")  # language of the target sentences
