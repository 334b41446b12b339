"""Readers for the evaluation benchmarks in ``eval_dir`` (default the data home's ``eval/``, filled by ``distalign data
fetch``: ``distalign.benchmark_data``); malformed rows are counted, never fatal.

Every file format lives here; the task plugins (``distalign.eval.tasks``) call these readers from
their ``from_suite``. A language given for a benchmark, in any code or name, becomes the code its files use
(``benchmark_language``).

- BLI test dictionaries: G-BLI ``bli/gbli/<l1>-<l2>/yacle.test.freq.2k.<l1>-<l2>.tsv`` (``src<TAB>tgt``; one
  direction per pair, :func:`read_gbli_test` reads the other swapped) and PanLex-BLI
  ``<l1>-<l2>.test.2000.cc.trans`` (the same two columns, tab or single-space separated)
- BLI target vocabularies ``vocab/<lang>_vocab.txt``: one word a line, most frequent first
- Multi-SimLex ``multisimlex/<L1>-<L2>.csv``: ``ID,<L1>,<L2>,PoS,score`` with ISO 639-3 upper-case columns
- Tatoeba ``tatoeba/tatoeba.<xxx>-eng.{<xxx>,eng}``: translations aligned line by line
- SemEval-2017 Task 2, subtask 2 (cross-lingual word similarity), as released:
  ``semeval2017/subtask2-crosslingual/data/<l1>-<l2>.test.data.txt`` (``word1<TAB>word2`` a line, ISO 639-1)
  and ``semeval2017/subtask2-crosslingual/keys/<l1>-<l2>.test.gold.txt`` (the score of line i on line i)
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from distalign.benchmark_data import not_fetched
from distalign.data.readers import ReadReport, read_dictionary
from distalign.errors import InputError
from distalign.languages import code_in_data

MULTISIMLEX_HEADER = ("ID", "PoS", "score")  # columns 0, 3, 4; 1 and 2 name the languages
# benchmark -> (its folder in eval_dir, the names of its files or folders, whose groups are language codes)
LANGUAGE_NAMES = {
    "G-BLI": ("bli/gbli", re.compile(r"([a-z]{2,3})-([a-z]{2,3})")),
    "Multi-SimLex": ("multisimlex", re.compile(r"([A-Za-z]{3})-([A-Za-z]{3})\.csv")),
    "Tatoeba": ("tatoeba", re.compile(r"tatoeba\.([a-z]{3})-eng\.\1")),
    "SemEval-2017 Task 2": (
        "semeval2017/subtask2-crosslingual/data",
        re.compile(r"([a-z]{2,3})-([a-z]{2,3})\.test\.data\.txt"),
    ),
}
# benchmark -> its name in `distalign data fetch` (SemEval-2017's says where to download it by hand)
FETCH_NAMES = {
    "G-BLI": "g-bli",
    "Multi-SimLex": "multisimlex",
    "Tatoeba": "tatoeba",
    "SemEval-2017 Task 2": "semeval17",
}


def gbli_test_path(eval_dir: str | Path, lang1: str, lang2: str) -> Path:
    pair = f"{lang1}-{lang2}"
    return Path(eval_dir) / "bli" / "gbli" / pair / f"yacle.test.freq.2k.{pair}.tsv"


def vocab_path(eval_dir: str | Path, lang: str) -> Path:
    return Path(eval_dir) / "vocab" / f"{lang}_vocab.txt"


def multisimlex_path(eval_dir: str | Path, lang1: str, lang2: str) -> Path:
    """``<L1>-<L2>.csv`` or, if only that exists, ``<L2>-<L1>.csv`` (ISO 639-3 codes, any case)."""
    folder = Path(eval_dir) / "multisimlex"
    a, b = lang1.upper(), lang2.upper()
    path = folder / f"{a}-{b}.csv"
    swapped = folder / f"{b}-{a}.csv"
    return swapped if not path.is_file() and swapped.is_file() else path


def semeval2017_paths(eval_dir: str | Path, lang1: str, lang2: str) -> tuple[Path, Path, bool]:
    """(data file, gold file, swapped) of a SemEval-2017 Task 2 cross-lingual pair; the files name each pair in
    one order (de-en, not en-de): asked for the other, they are read with the columns swapped."""
    root = Path(eval_dir) / "semeval2017" / "subtask2-crosslingual"

    def files(a: str, b: str) -> tuple[Path, Path]:
        return root / "data" / f"{a}-{b}.test.data.txt", root / "keys" / f"{a}-{b}.test.gold.txt"

    data, gold = files(lang1.lower(), lang2.lower())
    if data.is_file():
        return data, gold, False
    swapped_data, swapped_gold = files(lang2.lower(), lang1.lower())
    if swapped_data.is_file():
        return swapped_data, swapped_gold, True
    return data, gold, False  # the reader names it as missing


def tatoeba_paths(eval_dir: str | Path, lang: str) -> tuple[Path, Path]:
    """(``tatoeba.<lang>-eng.<lang>``, ``tatoeba.<lang>-eng.eng``) for an ISO 639-3 code."""
    stem = Path(eval_dir) / "tatoeba" / f"tatoeba.{lang}-eng"
    return stem.with_name(f"{stem.name}.{lang}"), stem.with_name(f"{stem.name}.eng")


def benchmark_language(eval_dir: str | Path, benchmark: str, code: str, where: str) -> str:
    """The code the files of ``benchmark`` (a key of ``LANGUAGE_NAMES``) in ``eval_dir`` name the language
    ``code`` by, for any code or name of it (Tatoeba: ``de``, ``German`` -> ``deu``, ``zh`` -> ``cmn``; G-BLI:
    ``deu`` -> ``de``; ``distalign.languages.code_in_data``); a ``ConfigError`` naming ``where`` and listing the
    languages there when they lack it."""
    subfolder, names = LANGUAGE_NAMES[benchmark]
    folder = Path(eval_dir) / subfolder
    if not folder.is_dir():
        if benchmark in FETCH_NAMES:
            raise not_fetched(FETCH_NAMES[benchmark], f"{where}: the {benchmark} folder {folder}")
        raise InputError(
            f"{where}: the {benchmark} folder {folder} not found (docs/guides/data.md says where to get "
            "it and how to lay it out)"
        )
    codes = [
        code.lower() for path in folder.glob("*") if (match := names.fullmatch(path.name)) for code in match.groups()
    ]
    return code_in_data(code, codes, where, f"{benchmark} ({folder})")


def read_bli_dictionary(path: str | Path, lang1: str, lang2: str) -> tuple[list[tuple[str, str]], ReadReport]:
    """(source, target) pairs of a G-BLI or PanLex-BLI dictionary, in file order.

    Lines split on tab when they have one, else on a single space (``read_dictionary``);
    any other shape (one field, three fields, an empty side) is a counted malformed row.
    """
    table, report = read_dictionary(path, lang1, lang2)
    return list(zip(table["word1"].to_pylist(), table["word2"].to_pylist())), report


def read_gbli_test(eval_dir: str | Path, lang1: str, lang2: str) -> tuple[list[tuple[str, str]], ReadReport]:
    """G-BLI test pairs lang1 -> lang2; G-BLI ships one direction per pair, so the other is read swapped."""
    path = gbli_test_path(eval_dir, lang1, lang2)
    if path.is_file():
        return read_bli_dictionary(path, lang1, lang2)
    reverse = gbli_test_path(eval_dir, lang2, lang1)
    if not reverse.is_file():
        raise InputError(f"no G-BLI test dictionary for {lang1}-{lang2}: neither {path} nor {reverse} exists")
    pairs, report = read_bli_dictionary(reverse, lang2, lang1)
    return [(b, a) for a, b in pairs], report


def _raw_lines(path: Path):
    """(line number, line without its newline) for every line, blank ones included."""
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
        for line_no, line in enumerate(f, start=1):
            yield line_no, line.rstrip("\n").rstrip("\r")


def read_vocabulary(path: str | Path, max_words: int | None = None) -> tuple[list[str], ReadReport]:
    """The first ``max_words`` distinct words (surrounding whitespace stripped), most frequent first.

    Lines that are empty after stripping (fastText keeps Unicode spaces as words) and repeats
    of an earlier word are counted as malformed and skipped.
    """
    if max_words is not None and max_words < 1:
        raise ValueError(f"max_words must be >= 1 or None, got {max_words}")
    path = Path(path)
    report = ReadReport(str(path))
    first_seen: dict[str, int] = {}
    for line_no, line in _raw_lines(path):
        word = line.strip()
        if not word:
            report.skip(line_no, f"empty word {line!r}")
        elif word in first_seen:
            report.skip(line_no, f"duplicate of line {first_seen[word]}: {word!r}")
        else:
            first_seen[word] = line_no
            if len(first_seen) == max_words:
                break
    report.rows = len(first_seen)
    return list(first_seen), report


def read_multisimlex(path: str | Path, lang1: str, lang2: str) -> tuple[list[tuple[str, str, float]], ReadReport]:
    """(word in lang1, word in lang2, score) rows; the file's columns may be in either language order.

    ``lang1``/``lang2`` are ISO 639-3 codes (any case). A header that does not name both languages
    raises ``InputError``; rows with the wrong column count, an empty word or a non-numeric score
    are counted as malformed.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    report = ReadReport(str(path))
    rows = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        wanted = (lang1.upper(), lang2.upper())
        if (
            len(header) != 5
            or (header[0], header[3], header[4]) != MULTISIMLEX_HEADER
            or sorted(header[1:3]) != sorted(wanted)
        ):
            raise InputError(
                f"{path}: expected header ID,{wanted[0]},{wanted[1]},PoS,score (either language "
                f"order), got {','.join(header)}"
            )
        swap = header[1] != wanted[0]
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            if len(fields) != 5:
                report.skip(reader.line_num, f"expected 5 columns, got {len(fields)}")
                continue
            w1, w2 = (fields[2].strip(), fields[1].strip()) if swap else (fields[1].strip(), fields[2].strip())
            try:
                score = float(fields[4])
            except ValueError:
                score = math.nan
            if not (w1 and w2):
                report.skip(reader.line_num, "empty word")
            elif not math.isfinite(score):
                report.skip(reader.line_num, f"score is not a number: {fields[4]!r}")
            else:
                rows.append((w1, w2, score))
    report.rows = len(rows)
    return rows, report


def read_tatoeba(src_path: str | Path, eng_path: str | Path) -> tuple[list[str], list[str], ReadReport]:
    """Aligned (source, English) sentences; line i of one file translates line i of the other.

    Files with different line counts raise ``InputError`` naming both; a pair with an empty side
    is counted as malformed (reported at the source file's line number) and dropped.
    """
    src_path, eng_path = Path(src_path), Path(eng_path)
    src_lines, eng_lines = list(_raw_lines(src_path)), list(_raw_lines(eng_path))
    if len(src_lines) != len(eng_lines):
        raise InputError(
            f"Tatoeba files are not aligned: {src_path} has {len(src_lines)} lines, {eng_path} has {len(eng_lines)}"
        )
    report = ReadReport(str(src_path))
    src, eng = [], []
    for (line_no, s), (_, e) in zip(src_lines, eng_lines):
        s, e = s.strip(), e.strip()
        if not s:
            report.skip(line_no, "empty sentence")
        elif not e:
            report.skip(line_no, f"empty English sentence at {eng_path}:{line_no}")
        else:
            src.append(s)
            eng.append(e)
    report.rows = len(src)
    return src, eng, report


def read_semeval2017(
    data_path: str | Path, gold_path: str | Path, swapped: bool = False
) -> tuple[list[tuple[str, str, float]], ReadReport]:
    """(word in lang1, word in lang2, gold score) rows of a SemEval-2017 Task 2 cross-lingual pair: the data
    file's line i (``word1<TAB>word2``; words may be multi-word expressions) scored by the gold file's line i.

    Files with different line counts (trailing blank lines aside) raise ``InputError`` naming both; a line with
    other than two tab-separated words, an empty word or a score that is not a finite number is counted as
    malformed, at ``data file:line`` (a bad score's reason names ``gold file:line``).
    """
    data_path, gold_path = Path(data_path), Path(gold_path)

    def lines(path: Path) -> list[tuple[int, str]]:
        found = list(_raw_lines(path))
        while found and not found[-1][1].strip():
            found.pop()
        return found

    data, gold = lines(data_path), lines(gold_path)
    if len(data) != len(gold):
        raise InputError(
            f"SemEval-2017 files are not aligned: {data_path} has {len(data)} lines, {gold_path} has {len(gold)}"
        )
    report = ReadReport(str(data_path))
    rows = []
    for (line_no, pair), (_, score_text) in zip(data, gold):
        words = [w.strip() for w in pair.split("\t")]
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if len(words) != 2:
            report.skip(line_no, f"expected word1<TAB>word2, got {len(words)} field(s): {pair[:60]!r}")
        elif not all(words):
            report.skip(line_no, "empty word")
        elif not math.isfinite(score):
            report.skip(line_no, f"score is not a number: {score_text[:30]!r} at {gold_path}:{line_no}")
        else:
            rows.append((words[1], words[0], score) if swapped else (words[0], words[1], score))
    report.rows = len(rows)
    return rows, report
