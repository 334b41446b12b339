"""Lexical-constraint mining from multilingual synsets, as in BabelBERT (Green, Ponzetto & Glavaš 2022, §3.1).

For every synset S with member words W(S) (each a ``(lang, word)``), the constraints are all unordered pairs
``{(l1, w1), (l2, w2)} ⊂ W(S)`` with ``(l1, w1) != (l2, w2)``: monolingual pairs (``l1 == l2``, synonyms) and
cross-lingual pairs (``l1 != l2``, translations). A synset with n kept words gives n·(n−1)/2 pairs.

A word is kept only if
  1. it is a single word: no space or underscore (OMW and BabelNet write multi-word expressions with either).
     Hyphens do *not* mark an MWE; hyphenated words reach the frequency filter, which drops them in practice
     because wordfreq splits at hyphens and its lists hold no hyphenated tokens;
  2. its wordfreq form (``wordfreq.preprocess.preprocess_text``: case-folding, Unicode normalisation, Arabic
     diacritics removed, ...) is among the ``top_k`` words of its language's wordfreq list (k = 15,000 in
     BabelBERT). Kept words are written in that form, so "Chien" and "chien" are one word and match the
     lower-cased evaluation dictionaries;
  3. it is not a word of an evaluation set (``exclude``), to keep test words out of training.

Synsets are filtered first, as §3.1 does (each filter off by default; the counts are in the report):
  a. ``seeds``: only synsets holding one of the English seed words (the paper: the 1,000 most frequent English
     words without stopwords, ``english_seed_words``); the seed is matched on any English member, before the
     word filters below;
  b. named entities dropped: rows whose optional ``synset_type`` column says ``NAMED_ENTITY`` (BabelNet's
     synset type) mark their synset as one;
  c. ``min_glosses``: only synsets with glosses in at least that many of ``languages`` (the paper: 2).

Duplicates: a ``(lang, word)`` listed twice in one synset (or twice after normalisation) is one member, so an
unordered pair is emitted at most once per synset. The same pair in two synsets is kept once per synset by
default (BabelBERT counts a constraint as a pair sharing a synset, and the synset is the InfoNCE label);
``unique_pairs=True`` keeps only its first synset (in synset-id order) and drops the repeats.

The input is a *synset table* (``SYNSET_SCHEMA``: synset_id, lang, word, gloss), one row per member word,
from OMW (``distalign.data.omw.read_omw``) or from a BabelNet export (``synsets_from_constraints``). As
BabelBERT's §3.1 asks, a word's gloss is in a language *other* than the word's:
- OMW glosses are per synset and language (column ``gloss``): ``gloss1`` is the synset's gloss in the first
  language of ``languages`` (in their given order) other than ``lang1`` that has one (it may be ``lang2``),
  null when there is none;
- a BabelNet export gives each word of a pair its own gloss, already in another language, which the file
  does not name (Table 3: "production [en]" with a Bulgarian gloss). Those glosses stay with their word
  (optional column ``word_gloss``), and ``min_glosses`` counts a synset's distinct word glosses.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import langcodes
import pyarrow as pa
import pyarrow.parquet as pq
import wordfreq
from wordfreq.preprocess import preprocess_text

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.readers import MAX_EXAMPLES, ReadReport, read_constraints, read_dictionary
from distalign.errors import InputError
from distalign.languages import language_code
from distalign.logs import progress

SYNSET_SCHEMA = pa.schema(
    [
        pa.field("synset_id", pa.string()),
        pa.field("lang", pa.string()),  # ISO 639-1, as in the rest of distalign
        pa.field("word", pa.string()),  # as written in the source
        pa.field("gloss", pa.string()),  # the synset's gloss in ``lang``, or null
    ]
)
WORD_GLOSS = "word_gloss"  # optional column: a gloss given for this very word, in another language (BabelNet)
MWE_MARKERS = (" ", "_")
# Accept a wordfreq list only for the language itself or a very close one (hr -> sh, tag distance 9); wordfreq
# on its own would silently substitute e.g. Spanish for Galician (distance 20) or English for Albanian.
MAX_LANGUAGE_DISTANCE = 9
GBLI_NAME = re.compile(r"(?:^|[._])([a-z]{2,3})-([a-z]{2,3})\.tsv$")


def mining_languages(languages: Iterable[str]) -> list[str]:
    """``languages`` (``--languages``) in canonical codes, as the synset tables hold them (``fra``, ``French`` ->
    ``fr``), each once, in their given order."""
    return list(dict.fromkeys(language_code(lang, "languages (--languages)") for lang in languages))


@functools.cache
def frequency_list_language(lang: str) -> str:
    """The wordfreq list that serves ``lang``; ValueError naming ``lang`` when there is none close enough."""
    available = sorted(wordfreq.available_languages())
    match = langcodes.closest_supported_match(lang, available, max_distance=MAX_LANGUAGE_DISTANCE)
    if match is None:
        raise ValueError(f"languages: no wordfreq frequency list for {lang!r} (wordfreq has {available})")
    return match


@functools.cache
def top_words(lang: str, top_k: int) -> frozenset[str]:
    return frozenset(wordfreq.top_n_list(frequency_list_language(lang), top_k))


def normalize(word: str, lang: str) -> str:
    """The form in which wordfreq lists ``word``."""
    return preprocess_text(word.strip(), lang)  # type: ignore[arg-type]  # a code: wordfreq reads it with langcodes


NAMED_ENTITY = "NAMED_ENTITY"  # BabelNet's SynsetType of named entities


def english_seed_words(count: int, stopwords: Iterable[str] | None = None) -> frozenset[str]:
    """The ``count`` most frequent English words of wordfreq's list that are not stopwords (BabelBERT §4:
    1,000 seeds; the paper filters with NLTK's stopword list, which needs a download: scikit-learn's English
    list is the default here, and ``stopwords`` takes any other, e.g. NLTK's)."""
    if count < 1:
        raise ValueError(f"seed words: must be a positive count, got {count}")
    if stopwords is None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        stopwords = ENGLISH_STOP_WORDS
    banned = {normalize(w, "en") for w in stopwords}
    words = [w for w in wordfreq.top_n_list("en", count + len(banned) + 1000) if w not in banned]
    if len(words) < count:
        raise ValueError(f"seed words: wordfreq's English list has only {len(words)} words besides stopwords")
    return frozenset(words[:count])


@dataclass(kw_only=True)
class MiningReport:
    """Counts of one mining run. Word counts are synset memberships (rows), per language."""

    languages: list[str]
    top_k: int
    synsets: int = 0  # distinct synsets with a row in one of ``languages``
    synsets_with_pairs: int = 0
    unseeded: int | None = None  # synsets dropped: no English seed word (None: no seeds given)
    named_entities: int = 0  # synsets dropped: typed NAMED_ENTITY
    few_glosses: int | None = None  # synsets dropped: glosses in fewer than min_glosses languages (None: no filter)
    min_glosses: int = 0
    words: Counter = field(default_factory=Counter)  # member rows read
    mwe: Counter = field(default_factory=Counter)  # dropped: multi-word expressions
    rare: Counter = field(default_factory=Counter)  # dropped: not in the top-k of the language
    excluded: Counter = field(default_factory=Counter)  # dropped: evaluation words (that passed the top-k)
    duplicates: Counter = field(default_factory=Counter)  # dropped: same (lang, word) again in a synset
    pairs: Counter = field(default_factory=Counter)  # kept pairs per "l1-l2" (l1 == l2: monolingual)
    repeated_pairs: int = 0  # pairs already emitted for an earlier synset (dropped iff unique_pairs)
    other_language_rows: int = 0
    invalid_rows: int = 0
    invalid_examples: list[str] = field(default_factory=list)

    def invalid(self, row: int, reason: str) -> None:
        self.invalid_rows += 1
        if len(self.invalid_examples) < MAX_EXAMPLES:
            self.invalid_examples.append(f"row {row}: {reason}")

    @property
    def total_pairs(self) -> int:
        return sum(self.pairs.values())

    def summary(self) -> str:
        lines = [
            f"mined {self.total_pairs} constraints from {self.synsets_with_pairs} of {self.synsets} synsets "
            f"(languages {','.join(self.languages)}, top_k={self.top_k}); "
            f"{self.repeated_pairs} pairs also in an earlier synset; "
            f"{self.other_language_rows} rows of other languages ignored; {self.invalid_rows} invalid rows"
        ]
        lines += [f"  {e}" for e in self.invalid_examples]
        lines.append(
            "  synsets dropped: "
            + ", ".join(
                [
                    "no seed filter" if self.unseeded is None else f"{self.unseeded} without an English seed word",
                    f"{self.named_entities} named entities",
                    "no gloss filter"
                    if self.few_glosses is None
                    else f"{self.few_glosses} with glosses in fewer than {self.min_glosses} languages",
                ]
            )
        )
        for lang in self.languages:
            lines.append(
                f"  {lang}: {self.words[lang]} words read, dropped {self.mwe[lang]} MWEs, {self.rare[lang]} not in "
                f"top-{self.top_k}, {self.excluded[lang]} evaluation words, {self.duplicates[lang]} duplicates"
            )
        lines += [f"  pairs {key}: {n}" for key, n in sorted(self.pairs.items())]
        return "\n".join(lines)


def _exclusion_keys(exclude, languages: list[str]) -> set[tuple[str, str]]:
    """``{lang: words}`` or ``[(lang, word), ...]`` -> normalised ``(lang, word)`` keys of ``languages``."""
    if exclude is None:
        return set()
    items = ((lang, w) for lang, words in exclude.items() for w in words) if isinstance(exclude, Mapping) else exclude
    return {(lang, normalize(w, lang)) for lang, w in items if lang in languages}


def _check_synset_table(synsets: pa.Table) -> None:
    missing = [name for name in SYNSET_SCHEMA.names if name not in synsets.column_names]
    if missing:
        raise ValueError(f"synsets_table: missing columns {missing} (has {synsets.column_names})")


@dataclass
class _SynsetMembers:
    """What the first pass over a synset table keeps: each synset's words and glosses, and its flags."""

    words: dict[str, dict[tuple[str, str], None]] = field(default_factory=dict)  # synset -> kept (lang, word)
    glosses: dict[tuple[str, str], str] = field(default_factory=dict)  # (synset, lang) -> first gloss seen
    word_glosses: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (synset, lang, word) -> own gloss
    seeded: set[str] = field(default_factory=set)  # synsets with an English seed word
    named: set[str] = field(default_factory=set)  # synsets typed as named entities

    def gloss_for(self, synset: str, word_lang: str, word: str, languages: list[str]) -> str | None:
        """The word's own gloss where the table gives one; else the synset's gloss in the first language of
        ``languages`` other than the word's (§3.1)."""
        if self.word_glosses:
            return self.word_glosses.get((synset, word_lang, word))
        return next(
            (
                self.glosses[(synset, lang)]
                for lang in languages
                if lang != word_lang and (synset, lang) in self.glosses
            ),
            None,
        )


def _check_mining_arguments(
    languages: list[str], top_k, cross_lingual: bool, monolingual: bool, seeds, min_glosses: int
) -> None:
    if not languages:
        raise ValueError("languages: empty")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k: must be a positive integer, got {top_k!r}")
    if not (cross_lingual or monolingual):
        raise ValueError("cross_lingual and monolingual are both False: nothing to mine")
    if seeds is not None and "en" not in languages:
        raise ValueError("seeds: the seed words are English, so languages must include en")
    if not 0 <= min_glosses <= len(languages):
        raise ValueError(f"min_glosses: must be between 0 and the {len(languages)} languages, got {min_glosses}")


def _read_members(
    synsets_table: pa.Table,
    languages: list[str],
    top_k: int,
    excluded: set[tuple[str, str]],
    seeds: Collection[str] | None,
    report: MiningReport,
) -> _SynsetMembers:
    """One pass over the rows: the word filters (module docstring, 1-3), counted in ``report``."""
    frequent = {lang: top_words(lang, top_k) for lang in languages}
    found = _SynsetMembers()

    def optional(column: str) -> list:
        return (
            synsets_table[column].to_pylist() if column in synsets_table.column_names else [None] * len(synsets_table)
        )

    columns = [synsets_table[name].to_pylist() for name in SYNSET_SCHEMA.names]
    rows = progress(zip(*columns, optional("synset_type"), optional(WORD_GLOSS)), len(synsets_table), "synset rows")
    for row, (synset, lang, word, gloss, kind, own_gloss) in enumerate(rows, start=1):
        if not (synset and lang and word and word.strip()):
            report.invalid(row, f"null or empty synset_id, lang or word: {(synset, lang, word)!r}")
            continue
        if kind == NAMED_ENTITY:
            found.named.add(synset)
        if seeds is not None and lang == "en" and normalize(word, "en") in seeds:
            found.seeded.add(synset)
        if lang not in frequent:
            report.other_language_rows += 1
            continue
        report.words[lang] += 1
        kept = found.words.setdefault(synset, {})
        if gloss:
            found.glosses.setdefault((synset, lang), gloss)
        if any(marker in word.strip() for marker in MWE_MARKERS):
            report.mwe[lang] += 1
            continue
        key = (lang, normalize(word, lang))
        if own_gloss:
            found.word_glosses.setdefault((synset, *key), own_gloss)
        if key[1] not in frequent[lang]:
            report.rare[lang] += 1
        elif key in excluded:
            report.excluded[lang] += 1
        elif key in kept:
            report.duplicates[lang] += 1
        else:
            kept[key] = None
    report.synsets = len(found.words)
    return found


def _filter_synsets(
    found: _SynsetMembers, languages: list[str], seeds: Collection[str] | None, min_glosses: int, report: MiningReport
) -> None:
    """The synset filters (module docstring, a-c), applied in place and counted in ``report``."""
    words = found.words
    if seeds is not None:
        report.unseeded = sum(synset not in found.seeded for synset in words)
        words = {synset: kept for synset, kept in words.items() if synset in found.seeded}
    report.named_entities = sum(synset in found.named for synset in words)
    words = {synset: kept for synset, kept in words.items() if synset not in found.named}
    if min_glosses:
        if found.word_glosses:  # an export's glosses: their languages are not in the file, distinct texts are counted
            gloss_count = Counter(synset for synset, _ in {(k[0], text) for k, text in found.word_glosses.items()})
        else:
            gloss_count = Counter(synset for synset, lang in found.glosses if lang in languages)
        report.few_glosses = sum(gloss_count[synset] < min_glosses for synset in words)
        words = {synset: kept for synset, kept in words.items() if gloss_count[synset] >= min_glosses}
    found.words = words


def _pair_rows(
    found: _SynsetMembers,
    languages: list[str],
    cross_lingual: bool,
    monolingual: bool,
    unique_pairs: bool,
    report: MiningReport,
) -> pa.Table:
    """Every kept pair of every kept synset, in synset-id order, as a ``CONSTRAINT_SCHEMA`` table."""
    position = {lang: i for i, lang in enumerate(languages)}
    rows: dict[str, list] = {name: [] for name in CONSTRAINT_SCHEMA.names}
    seen_pairs: set[tuple] = set()
    for synset in sorted(found.words):
        ordered = sorted(found.words[synset], key=lambda m: (position[m[0]], m[1]))
        emitted = 0
        for (lang1, word1), (lang2, word2) in itertools.combinations(ordered, 2):
            if not (monolingual if lang1 == lang2 else cross_lingual):
                continue
            pair = (lang1, word1, lang2, word2)
            if pair in seen_pairs:
                report.repeated_pairs += 1
                if unique_pairs:
                    continue
            seen_pairs.add(pair)
            values = (
                word1,
                lang1,
                word2,
                lang2,
                synset,
                found.gloss_for(synset, lang1, word1, languages),
                found.gloss_for(synset, lang2, word2, languages),
            )
            for name, value in zip(CONSTRAINT_SCHEMA.names, values):
                rows[name].append(value)
            report.pairs[f"{lang1}-{lang2}"] += 1
            emitted += 1
        report.synsets_with_pairs += emitted > 0
    return pa.table(rows, schema=CONSTRAINT_SCHEMA)


def mine_constraints(
    synsets_table: pa.Table,
    languages: Iterable[str],
    top_k: int = 15000,
    exclude: Mapping[str, Iterable[str]] | Iterable[tuple[str, str]] | None = None,
    cross_lingual: bool = True,
    monolingual: bool = True,
    unique_pairs: bool = False,
    seeds: Collection[str] | None = None,
    min_glosses: int = 0,
) -> tuple[pa.Table, MiningReport]:
    """All synonym/translation pairs of each synset among frequent single words, in the synsets that pass
    the seed, named-entity and gloss filters (module docstring).

    Returns a ``CONSTRAINT_SCHEMA`` table, sorted by synset id, each pair ordered by (position of the language
    in ``languages``, word), and a ``MiningReport``.
    """
    languages = mining_languages(languages)
    _check_mining_arguments(languages, top_k, cross_lingual, monolingual, seeds, min_glosses)
    _check_synset_table(synsets_table)
    report = MiningReport(languages=languages, top_k=top_k, min_glosses=min_glosses)
    found = _read_members(synsets_table, languages, top_k, _exclusion_keys(exclude, languages), seeds, report)
    _filter_synsets(found, languages, seeds, min_glosses, report)
    return _pair_rows(found, languages, cross_lingual, monolingual, unique_pairs, report), report


def synsets_from_constraints(constraints: pa.Table) -> pa.Table:
    """A constraint table (e.g. ``read_babelnet_export``'s, columns of ``CONSTRAINT_SCHEMA``) as a synset table.

    The BabelNet export lists pairs ``synsetID lang1 lang2 word1 word2 sent1 sent2``; every word of a pair is a
    member of its synset, and ``sent1``/``sent2`` is that word's own gloss, in a language other than the word's
    (§3.1), not the synset's gloss in ``lang1``. Each ``(synset_id, lang, word)`` becomes one row with column
    ``word_gloss`` (its first non-null gloss) and a null ``gloss``. Mining the result re-applies the frequency,
    MWE and exclusion filters.
    """
    missing = [name for name in CONSTRAINT_SCHEMA.names if name not in constraints.column_names]
    if missing:
        raise ValueError(f"constraints: missing columns {missing} (has {constraints.column_names})")
    sides = [
        constraints.select(["synset_id", f"lang{n}", f"word{n}", f"gloss{n}"]).rename_columns(SYNSET_SCHEMA.names)
        for n in (1, 2)
    ]
    stacked = pa.concat_tables(sides).cast(SYNSET_SCHEMA)
    grouped = stacked.group_by(["synset_id", "lang", "word"], use_threads=False).aggregate([("gloss", "first")])
    members = grouped.rename_columns(SYNSET_SCHEMA.names).select(SYNSET_SCHEMA.names)
    return (
        members.set_column(3, "gloss", pa.nulls(len(members), pa.string()))
        .append_column(WORD_GLOSS, members["gloss"])
        .cast(SYNSET_SCHEMA.append(pa.field(WORD_GLOSS, pa.string())))
    )


def read_exclusions(paths: Iterable[str | Path]) -> tuple[dict[str, set[str]], list[ReadReport]]:
    """Words of G-BLI/MUSE dictionaries ``...<l1>-<l2>.tsv`` (``src<TAB>tgt``) per language, for ``exclude``."""
    words: dict[str, set[str]] = {}
    reports = []
    for path in map(Path, paths):
        match = GBLI_NAME.search(path.name)
        if match is None:
            raise InputError(f"{path}: evaluation file name must end in '<l1>-<l2>.tsv' to name its languages")
        lang1, lang2 = (language_code(lang, f"{path} (its file name)") for lang in match.groups())  # deu-eng: de, en
        table, report = read_dictionary(path, lang1, lang2)
        words.setdefault(lang1, set()).update(table["word1"].to_pylist())
        words.setdefault(lang2, set()).update(table["word2"].to_pylist())
        reports.append(report)
    return words, reports


def mine_and_write(
    synsets: pa.Table,
    read_reports: list,
    languages: list[str],
    top_k: int = 15000,
    exclude_paths: Iterable[str | Path] = (),
    out_path: str | Path | None = None,
    **options,
) -> tuple[pa.Table, MiningReport]:
    """Drop the words of the evaluation dictionaries ``exclude_paths``, mine (``options``: the pair and synset
    filters of ``mine_constraints``), write ``out_path`` (parquet, ``CONSTRAINT_SCHEMA``) when given, and print
    what was read, skipped and mined."""
    exclude, exclusion_reports = read_exclusions(exclude_paths)
    table, report = mine_constraints(synsets, languages, top_k, exclude, **options)
    for read_report in [*read_reports, *exclusion_reports]:
        print(read_report.summary())
    print(report.summary())
    if len(table) == 0:  # an empty constraint file would only fail later, in the training run that reads it
        sources = ", ".join(r.path for r in read_reports)
        raise InputError(
            f"0 constraint pairs mined from {sources} for languages {languages} (top-k {top_k}): "
            f"nothing written{f' to {out_path}' if out_path is not None else ''}; check that the "
            "source has synsets with words of at least two of these languages among the "
            "frequent words (a larger --top-k, other --languages), and the filters above"
        )
    if out_path is not None:
        out_path = Path(out_path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out_path)
        print(f"wrote {len(table)} constraints to {out_path}")
    return table, report


def mine_babelnet(
    export_path: str | Path,
    languages: Iterable[str],
    top_k: int = 15000,
    exclude_paths: Iterable[str | Path] = (),
    out_path: str | Path | None = None,
    **options,
) -> tuple[pa.Table, MiningReport]:
    """Constraints from a BabelNet export (``.tsv``) or a constraint parquet, re-mined per synset: its words
    filtered by frequency, MWE and exclusion like OMW's, and every pair of each synset's kept words emitted."""
    languages = mining_languages(languages)
    pairs, read_report = read_constraints(export_path)
    return mine_and_write(
        synsets_from_constraints(pairs), [read_report], languages, top_k, exclude_paths, out_path, **options
    )
