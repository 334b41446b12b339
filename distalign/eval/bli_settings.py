"""How a dictionary's pairs become a BLI test set (``BLISettings``): a module below the BLI task
(``distalign.eval.tasks.bli``), which builds the test sets, and the evaluation spec (``distalign.eval.suite_spec``),
which carries a checkpoint's settings to it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from distalign.data.readers import ReadReport
from distalign.errors import InputError
from distalign.eval import benchmarks

BLIRanking = Literal["grouped", "per_pair"]


@dataclass(frozen=True)
class BLISettings:
    """How a dictionary's pairs become a BLI test set and how it is encoded and scored. The in-loop BLI's come from
    the run's config (``distalign.eval.selection.in_loop_settings``), which every checkpoint keeps, so
    ``distalign eval --checkpoint ... --dictionary ...`` builds the same test set and gets the same number."""

    max_pairs: int = 0  # source words kept, a sample seeded by ``seed`` (0 = all)
    seed: int = 0
    ranking: BLIRanking = "grouped"
    vocab_dir: str = ""  # <lang>_vocab.txt files: the targets are their top vocab_size words; "" = the pairs' targets
    vocab_size: int = 100_000
    layer: int | None = -1  # the hidden state scored (negative counts from the last); None = every layer
    max_word_tokens: int = 16  # subword budget of a word encoded alone

    def target_vocabulary(self, lang: str, reports: list[ReadReport], key: str = "eval.vocab_dir") -> list[str] | None:
        """The top ``vocab_size`` words of ``<vocab_dir>/<lang>_vocab.txt``, or None without a ``vocab_dir``."""
        if not self.vocab_dir:
            return None
        path = Path(self.vocab_dir) / f"{lang}_vocab.txt"
        if not path.is_file():
            raise InputError(
                f"{key}: no {path.name} in {self.vocab_dir} for the BLI targets in '{lang}' "
                f"(one word a line, most frequent first): add it, or leave {key} empty"
            )
        words, report = benchmarks.read_vocabulary(path, self.vocab_size)
        reports.append(report)
        return words
