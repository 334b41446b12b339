"""The word2vec *text* format (Mikolov et al. 2013; also fastText ``.vec``)::

    <n_words> <dim>
    word v_1 v_2 ... v_dim
    ...

Fields are separated by single spaces, so words cannot contain whitespace. Reading is lenient
the way the other readers are (distalign.data.readers): a line with the wrong number of values
or a value that is not a finite float is skipped and counted with ``file:line: why``; a word seen
again is skipped too (the first vector is kept, as gensim does) and counted as a duplicate. Only
a missing file or an unreadable header line is fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distalign.data.readers import MAX_EXAMPLES, ReadReport
from distalign.errors import InputError

# Float32 round-trips exactly through 9 significant digits.
FLOAT_FORMAT = "{:.9g}"


@dataclass
class VectorReadReport(ReadReport):
    """A ReadReport that also counts repeated words (skipped, first vector kept)."""

    duplicates: int = 0

    def duplicate(self, line_no: int, word: str) -> None:
        self.duplicates += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{self.path}:{line_no}: duplicate word {word!r} (first vector kept)")

    def summary(self) -> str:
        head, _, rest = super().summary().partition("\n")
        return f"{head}, {self.duplicates} duplicate words skipped" + (f"\n{rest}" if rest else "")


def write_word2vec(path: str | Path, words: list[str], vectors: np.ndarray) -> Path:
    """Write ``vectors [n, dim]`` with one ``words[i]`` per row in word2vec text format."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 2:
        raise ValueError(f"vectors must be a 2-D [n, dim] array, got shape {vectors.shape}")
    if len(words) != vectors.shape[0]:
        raise ValueError(f"words has {len(words)} entries but vectors has {vectors.shape[0]} rows")
    for word in words:
        if not word or word != "".join(word.split()):
            raise ValueError(f"words must be non-empty and contain no whitespace, got {word!r}")
    if len(set(words)) != len(words):
        raise ValueError("words contains duplicates")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    row_format = " ".join([FLOAT_FORMAT] * vectors.shape[1])
    with path.open("w", encoding="utf-8") as f:
        f.write(f"{vectors.shape[0]} {vectors.shape[1]}\n")
        for word, row in zip(words, vectors.tolist()):
            f.write(f"{word} {row_format.format(*row)}\n")
    return path


def _header(line: str, path: Path) -> tuple[int, int]:
    fields = line.split()
    if len(fields) != 2 or not all(f.isdigit() for f in fields) or int(fields[1]) == 0:
        raise InputError(f"{path}:1: expected a word2vec header '<n_words> <dim>', got {line[:80]!r}")
    return int(fields[0]), int(fields[1])


def read_word2vec(path: str | Path, max_words: int | None = None) -> tuple[list[str], np.ndarray, VectorReadReport]:
    """Words, float32 ``[n, dim]`` vectors and a report; ``max_words`` keeps the first rows only."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    report = VectorReadReport(str(path))
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8", errors="replace") as f:
        _, dim = _header(f.readline(), path)
        for line_no, line in enumerate(f, start=2):
            if max_words is not None and len(words) >= max_words:
                break
            fields = line.rstrip("\r\n").rstrip(" ").split(" ")
            if fields == [""]:
                continue
            word, values = fields[0], fields[1:]
            if len(values) != dim:
                report.skip(line_no, f"expected {dim} values after the word, got {len(values)}")
                continue
            try:
                row = np.array(values, dtype=np.float32)
            except ValueError:
                report.skip(line_no, f"a value of {word!r} is not a float")
                continue
            if not np.isfinite(row).all():
                report.skip(line_no, f"a value of {word!r} is not finite")
                continue
            if word in seen:
                report.duplicate(line_no, word)
                continue
            seen.add(word)
            words.append(word)
            rows.append(row)
    report.rows = len(words)
    vectors = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    return words, vectors, report
