"""Readers for the real input formats. Malformed rows are counted and reported, never fatal.

- bilingual dictionaries in G-BLI / MUSE form: ``src<TAB>tgt`` (MUSE also uses a single space)
- the BabelNet export used by BabelBERT: ``synsetID lang1 lang2 word1 word2 sent1 sent2`` (TSV,
  header optional; ``sent1/sent2`` are glosses)
- constraint parquet files in ``CONSTRAINT_SCHEMA``
- text corpora: ``.txt`` (one sentence a line), ``.jsonl`` (``{"text": ...}``), ``.parquet`` (column ``text``)
- parallel sentences: a TSV ``src<TAB>tgt`` a line, or two line-aligned files (Tatoeba's / Moses' layout)

Every language code, a file's column or a reader's argument, is read through ``distalign.languages.language_code``
(``DE``, ``deu`` and ``ger`` are all ``de``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA, REQUIRED_COLUMNS
from distalign.data.dictionary_checks import check_name, check_scripts, header_row
from distalign.errors import InputError  # defined at the bottom layer (the CLI catches it without pyarrow)
from distalign.languages import language_code

MAX_EXAMPLES = 5
BABELNET_COLUMNS = ("synsetID", "lang1", "lang2", "word1", "word2", "sent1", "sent2")


@dataclass
class ReadReport:
    """What a reader kept and what it had to skip, with the first few reasons as ``file:line: why``."""

    path: str
    rows: int = 0
    malformed: int = 0
    examples: list[str] = field(default_factory=list)
    header: str = ""  # a first line that names the columns, skipped

    def skip(self, line_no: int | str, reason: str) -> None:  # a line, a row index, or a place in a JSON file
        self.malformed += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{self.path}:{line_no}: {reason}")

    def summary(self) -> str:
        text = f"{self.path}: {self.rows} rows read, {self.malformed} malformed rows skipped"
        text += f" (and the header row {self.header!r})" if self.header else ""
        return text + "".join(f"\n  {e}" for e in self.examples)


def require_rows(report: ReadReport, what: str) -> None:
    """An input file named in a config that gives no usable row is an ``InputError`` with the first rows' reasons."""
    if report.rows == 0:
        raise InputError(f"{report.summary()}\n  no usable {what} in {report.path}: check its format, or leave it out")


def _lines(path: Path):
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    with path.open(encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, start=1):
            line = line.rstrip("\n").rstrip("\r")
            if line.strip():
                yield line_no, line


def read_dictionary(
    path: str | Path, lang1: str | None = None, lang2: str | None = None
) -> tuple[pa.Table, ReadReport]:
    """G-BLI/MUSE dictionary as constraints; all translations of one source word share a synset. The declared pair
    must agree with the file's name and its words' scripts, and a header row is skipped
    (``distalign.data.dictionary_checks``). Without a declared pair (a seed list whose languages nobody names:
    ``static align``), the languages are left empty and nothing is checked against them."""
    path = Path(path)
    declared = lang1 is not None and lang2 is not None
    if lang1 is not None and lang2 is not None:  # declared
        lang1, lang2 = language_code(lang1, f"{path} (lang1)"), language_code(lang2, f"{path} (lang2)")
        check_name(path, lang1, lang2)
    else:
        lang1 = lang2 = ""
    report = ReadReport(str(path))
    rows: dict[str, list] = {name: [] for name in CONSTRAINT_SCHEMA.names}
    for line_no, line in _lines(path):
        fields = line.split("\t") if "\t" in line else line.split(" ")
        fields = [f.strip() for f in fields]
        if (
            report.rows == report.malformed == 0
            and not report.header
            and len(fields) == 2
            and header_row(fields, lang1, lang2)
        ):
            report.header = line
            continue
        if len(fields) != 2 or not all(fields):
            report.skip(line_no, f"expected 'src<TAB>tgt', got {line!r}")
            continue
        src, tgt = fields
        for key, value in zip(REQUIRED_COLUMNS, (src, lang1, tgt, lang2, f"dict:{lang1}:{src}")):
            rows[key].append(value)
        rows["gloss1"].append(None)
        rows["gloss2"].append(None)
        report.rows += 1
    if declared:
        check_scripts(path, lang1, lang2, rows["word1"], rows["word2"])
    return pa.table(rows, schema=CONSTRAINT_SCHEMA), report


def read_babelnet_export(path: str | Path) -> tuple[pa.Table, ReadReport]:
    path = Path(path)
    report = ReadReport(str(path))
    rows: dict[str, list] = {name: [] for name in CONSTRAINT_SCHEMA.names}
    two_columns = 0
    for line_no, line in _lines(path):
        fields = line.split("\t")
        two_columns += len(fields) == 2 or len(fields) == 1 and len(line.split(" ")) == 2  # MUSE: one space
        if line_no == 1 and tuple(f.strip() for f in fields[:7]) == BABELNET_COLUMNS:
            continue  # header
        if len(fields) not in (5, 7):
            report.skip(line_no, f"expected 7 tab-separated columns {BABELNET_COLUMNS}, got {len(fields)}")
            continue
        synset, l1, l2, w1, w2 = (f.strip() for f in fields[:5])
        if not all((synset, l1, l2, w1, w2)):
            report.skip(line_no, "empty synsetID, language or word")
            continue
        glosses = [f.strip() or None for f in fields[5:7]] if len(fields) == 7 else [None, None]
        for key, value in zip(CONSTRAINT_SCHEMA.names, (w1, l1, w2, l2, synset, *glosses)):
            rows[key].append(value)
        report.rows += 1
    if report.rows == 0 and two_columns == report.malformed > 0:
        raise InputError(
            f"{path}: a two-column dictionary (src<TAB>tgt, G-BLI/MUSE), not a BabelNet export of 7 "
            f"columns {BABELNET_COLUMNS}: give it as data.dictionaries: [{{path: {path}, lang1: ..., "
            "lang2: ...}], which reads that format"
        )
    return pa.table(rows, schema=CONSTRAINT_SCHEMA), report


def unreadable_parquet(path, err: Exception) -> InputError:
    """The error for a file that is not parquet (cut short, another format renamed), naming it and what to do."""
    return InputError(f"{path}: unreadable parquet file ({err}); write it again, or copy it again if it was cut short")


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A parquet file's table; a file that is not parquet (cut short, another format renamed) is an ``InputError``
    naming it, not pyarrow's error naming neither the file nor the setting."""
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as err:
        raise unreadable_parquet(path, err) from None


def read_constraint_parquet(path: str | Path) -> tuple[pa.Table, ReadReport]:
    path = Path(path)
    table = read_parquet(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(f"{path}: missing constraint columns {missing} (has {table.column_names})")
    for gloss in ("gloss1", "gloss2"):
        if gloss not in table.column_names:
            table = table.append_column(gloss, pa.nulls(len(table), pa.string()))
    table = table.select(CONSTRAINT_SCHEMA.names).cast(CONSTRAINT_SCHEMA)
    report = ReadReport(str(path))
    valid = None
    for col in REQUIRED_COLUMNS:
        # Kleene AND: a null word gives false (plain and_ gives null, and the row was dropped uncounted).
        ok = pc.and_kleene(pc.is_valid(table[col]), pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(table[col])), 0))
        valid = ok if valid is None else pc.and_kleene(valid, ok)
    # (pyarrow 25's indices_nonzero crashes the process on an empty array)
    for i in pc.indices_nonzero(pc.invert(valid)).to_pylist() if len(table) else []:
        report.skip(i + 1, "null or empty word, language or synset_id")
    table = table.filter(valid)
    report.rows = len(table)
    return table, report


def read_constraints(path: str | Path) -> tuple[pa.Table, ReadReport]:
    """Constraint file by extension: ``.parquet`` in the schema, ``.tsv`` a BabelNet export."""
    suffix = Path(path).suffix
    if suffix == ".parquet":
        table, report = read_constraint_parquet(path)
    elif suffix in (".tsv", ".txt"):
        table, report = read_babelnet_export(path)
    else:
        raise InputError(f"{path}: constraint files must be .parquet or a BabelNet export .tsv")
    return with_language_codes(table, path), report


def with_language_codes(table: pa.Table, path: str | Path) -> pa.Table:
    """``table`` with its ``lang1`` and ``lang2`` columns in canonical codes (each distinct code read once)."""
    for column in ("lang1", "lang2"):
        codes = table[column].combine_chunks().dictionary_encode()
        canonical = [language_code(code, f"{path}: column {column}") for code in codes.dictionary.to_pylist()]
        field = table.schema.field(column)
        array = pc.take(pa.array(canonical, field.type), codes.indices)
        table = table.set_column(table.schema.get_field_index(column), field, array)
    return table


def read_corpus(path: str | Path, lang: str) -> tuple[pa.Table, ReadReport]:
    """Sentences of one language as a table (``text``, ``lang``, as given: a corpus's language comes canonical from
    its config key, and a reader that needs none passes "")."""
    path = Path(path)
    report = ReadReport(str(path))
    texts: list[str] = []
    if path.suffix == ".parquet":
        table = read_parquet(path)
        if "text" not in table.column_names:
            raise InputError(f"{path}: no 'text' column (has {table.column_names})")
        for i, value in enumerate(table["text"].to_pylist(), start=1):
            if isinstance(value, str) and value.strip():
                texts.append(value.strip())
            else:
                report.skip(i, f"empty or non-string text {value!r}")
    elif path.suffix == ".jsonl":
        for line_no, line in _lines(path):
            try:
                value = json.loads(line)["text"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                report.skip(line_no, f"not a JSON object with a 'text' field ({type(err).__name__})")
                continue
            if isinstance(value, str) and value.strip():
                texts.append(value.strip())
            else:
                report.skip(line_no, f"empty or non-string text {value!r}")
    elif path.suffix == ".txt":
        texts = [line.strip() for _, line in _lines(path)]
    else:
        raise InputError(f"{path}: corpora must be .txt, .jsonl or .parquet")
    report.rows = len(texts)
    return pa.table({"text": texts, "lang": [lang] * len(texts)}), report


PARALLEL_COLUMNS = ("text1", "lang1", "text2", "lang2")


def _parallel_table(pairs: list[tuple[str, str]], lang1: str, lang2: str, path: Path) -> pa.Table:
    lang1, lang2 = language_code(lang1, f"{path} (lang1)"), language_code(lang2, f"{path} (lang2)")
    return pa.table(
        {
            "text1": [a for a, _ in pairs],
            "lang1": [lang1] * len(pairs),
            "text2": [b for _, b in pairs],
            "lang2": [lang2] * len(pairs),
        }
    )


def read_parallel_tsv(path: str | Path, lang1: str, lang2: str) -> tuple[pa.Table, ReadReport]:
    """Sentence pairs ``src<TAB>tgt`` (one pair a line) as (text1, lang1, text2, lang2)."""
    path = Path(path)
    report = ReadReport(str(path))
    pairs = []
    for line_no, line in _lines(path):
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != 2 or not all(fields):
            report.skip(line_no, f"expected 'src<TAB>tgt' with two non-empty sentences, got {len(fields)} field(s)")
            continue
        pairs.append((fields[0], fields[1]))
    report.rows = len(pairs)
    return _parallel_table(pairs, lang1, lang2, path), report


def read_parallel_files(path1: str | Path, path2: str | Path, lang1: str, lang2: str) -> tuple[pa.Table, ReadReport]:
    """Two line-aligned files, line i of one the translation of line i of the other. Unlike the other readers,
    blank lines are kept for the count (they hold the alignment); a pair with a blank side is skipped
    (reported as ``path1:line``), and files of different lengths are an error (the alignment is lost)."""
    path1, path2 = Path(path1), Path(path2)
    sides = []
    for path in (path1, path2):
        if not path.is_file():
            raise InputError(f"file not found: {path}")
        sides.append(path.read_text(encoding="utf-8", errors="replace").splitlines())
    if len(sides[0]) != len(sides[1]):
        raise InputError(f"{path1} has {len(sides[0])} lines, {path2} has {len(sides[1])}: not line-aligned")
    report = ReadReport(str(path1))
    pairs = []
    for line_no, (a, b) in enumerate(zip(*sides), start=1):
        a, b = a.strip(), b.strip()
        if not (a and b):
            report.skip(
                line_no, f"empty sentence on {'both sides' if not (a or b) else 'one side'} (line {line_no} of {path2})"
            )
            continue
        pairs.append((a, b))
    report.rows = len(pairs)
    return _parallel_table(pairs, lang1, lang2, path1), report
