"""Open Multilingual Wordnet (Bond & Foster 2013) tab files as a synset table, and constraint mining over them.

OMW wordnets are keyed by Princeton WordNet 3.0 synsets, which makes them a BabelNet-like multilingual synset
source for BabelBERT-style mining (``distalign.data.mining``). One file per language, ``wn-data-<lang3>.tab``
(ISO 639-3), one fact a line, ``#`` lines are comments (the first names the wordnet)::

    <offset>-<pos>  [<lang3>:]lemma              <lemma>          a member word; MWEs use spaces or '_'
    <offset>-<pos>  [<lang3>:]lemma:<kind>       <form>           Arabic roots / broken plurals: not synonyms, ignored
    <offset>-<pos>  [<lang3>:]def   [<index>]    <definition>     gloss sentence number <index> (column optional)
    <offset>-<pos>  [<lang3>:]exe   [<index>]    <example>        ignored

Offsets are 8 digits, pos one of n v a s r. The ``<lang3>:`` prefix is present in most files and absent in some
(dan, fas, nob, por). A synset's gloss in a language joins its ``def`` sentences in index order with "; ".
Synset ids are ``omw:<offset>-<pos>``, so they are shared by all languages. Languages are named by ISO 639-1
codes outside this module; ``distalign.languages`` maps the file codes (arb -> ar, cmn -> zh, zsm -> ms, als -> sq).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from distalign.data.mining import SYNSET_SCHEMA, MiningReport, mine_and_write, mining_languages
from distalign.data.readers import ReadReport, _lines
from distalign.errors import InputError
from distalign.languages import language_code

FILE_NAME = re.compile(r"^wn-data-([a-z]{3})\.tab$")
SYNSET_KEY = re.compile(r"^\d{8}-[nvasr]$")
GLOSS_SEPARATOR = "; "


@dataclass
class OmwReadReport(ReadReport):
    """``rows`` counts lemma rows; ``ignored`` counts well-formed rows of types mining does not use."""

    glossed_synsets: int = 0
    ignored: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        ignored = ", ".join(f"{n} {kind}" for kind, n in sorted(self.ignored.items())) or "none"
        return super().summary() + f"\n  {self.glossed_synsets} synsets with a gloss; ignored rows: {ignored}"


def omw_files(omw_dir: str | Path) -> dict[str, Path]:
    """ISO 639-1 (or 639-3 where there is none) code -> ``wn-data-*.tab`` file in ``omw_dir``."""
    omw_dir = Path(omw_dir)
    if not omw_dir.is_dir():
        raise InputError(f"OMW directory not found: {omw_dir}")
    files: dict[str, Path] = {}
    for path in sorted(omw_dir.glob("wn-data-*.tab")):
        match = FILE_NAME.match(path.name)
        if match is None:
            continue
        lang = language_code(match.group(1), str(path))
        if lang in files:
            raise InputError(f"{omw_dir}: {files[lang].name} and {path.name} are both language {lang!r}")
        files[lang] = path
    return files


def _parse_type(column: str, lang3: str) -> tuple[str, str] | None:
    """``[lang3:]kind[:sub]`` -> (kind, sub); None when it names another language."""
    parts = column.split(":")
    if len(parts) > 1 and parts[0] == lang3:
        parts = parts[1:]
    elif len(parts) > 1 and parts[0] not in ("lemma", "def", "exe"):
        return None
    return parts[0], ":".join(parts[1:])


def read_omw_file(path: str | Path, lang: str) -> tuple[pa.Table, OmwReadReport]:
    """One ``wn-data-<lang3>.tab`` file as a synset table (``SYNSET_SCHEMA``) with ``lang`` as language."""
    path = Path(path)
    match = FILE_NAME.match(path.name)
    if match is None:
        raise InputError(f"{path}: OMW file names are 'wn-data-<ISO 639-3 code>.tab'")
    lang3 = match.group(1)
    report = OmwReadReport(str(path))
    lemmas: list[tuple[str, str]] = []  # (synset key, lemma)
    definitions: dict[str, list[tuple[int, int, str]]] = {}  # synset key -> (index, line, sentence)
    for line_no, line in _lines(path):
        if line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) < 3 or not SYNSET_KEY.match(fields[0]):
            report.skip(line_no, f"expected '<8-digit offset>-<pos><TAB>type<TAB>text', got {line[:80]!r}")
            continue
        parsed = _parse_type(fields[1], lang3)
        if parsed is None:
            report.skip(line_no, f"type {fields[1]!r} names another language than {lang3!r}")
            continue
        kind, sub = parsed
        if kind in ("def", "exe") and not sub and len(fields) in (3, 4):
            index_text = fields[2] if len(fields) == 4 else "0"
            text = fields[-1]
            if not index_text.isdigit() or not text:
                report.skip(line_no, f"expected '{kind}<TAB>[index<TAB>]text' with an integer index, got {line[:80]!r}")
            elif kind == "def":
                definitions.setdefault(fields[0], []).append((int(index_text), line_no, text))
            else:
                report.ignored[kind] += 1
        elif kind == "lemma" and len(fields) == 3:
            if not fields[2]:
                report.skip(line_no, "empty lemma")
            elif sub:
                report.ignored[f"lemma:{sub}"] += 1
            else:
                lemmas.append((fields[0], fields[2]))
        else:
            report.skip(line_no, f"unknown row type {fields[1]!r} with {len(fields)} columns")
    if not lemmas:
        raise InputError(f"{path}: no lemma rows, so no synonyms for language {lang!r}")
    glosses = {key: GLOSS_SEPARATOR.join(text for _, _, text in sorted(parts)) for key, parts in definitions.items()}
    report.rows = len(lemmas)
    report.glossed_synsets = len(glosses)
    table = pa.table(
        {
            "synset_id": [f"omw:{key}" for key, _ in lemmas],
            "lang": [lang] * len(lemmas),
            "word": [word for _, word in lemmas],
            "gloss": [glosses.get(key) for key, _ in lemmas],
        },
        schema=SYNSET_SCHEMA,
    )
    return table, report


def read_omw(omw_dir: str | Path, languages: Iterable[str]) -> tuple[pa.Table, list[OmwReadReport]]:
    """The synset table of ``languages`` (ISO 639-1) from the OMW files in ``omw_dir``."""
    files = omw_files(omw_dir)
    tables, reports = [], []
    for lang in languages:
        if lang not in files:
            raise InputError(f"no OMW file for language {lang!r} in {omw_dir} (has {sorted(files)})")
        table, report = read_omw_file(files[lang], lang)
        tables.append(table)
        reports.append(report)
    if not tables:
        raise ValueError("languages: empty")
    return pa.concat_tables(tables), reports


def mine_omw(
    omw_dir: str | Path,
    languages: Iterable[str],
    top_k: int = 15000,
    exclude_paths: Iterable[str | Path] = (),
    out_path: str | Path | None = None,
    **options,
) -> tuple[pa.Table, MiningReport]:
    """Constraints from the OMW files of ``languages`` (``mine_and_write``; ``options``: its pair filters)."""
    languages = mining_languages(languages)
    synsets, read_reports = read_omw(omw_dir, languages)
    return mine_and_write(synsets, read_reports, languages, top_k, exclude_paths, out_path, **options)
