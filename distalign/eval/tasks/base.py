"""What an evaluation task plugin is: one class that owns everything about one benchmark.

A plugin subclasses ``EvalTask`` and sets:

- ``name``: its entry in ``suite.tasks`` (``distalign eval --tasks``) and in ``EVAL_TASKS``;
- ``from_suite``: its reader. It reads and checks its benchmark files from the ``SuiteSpec`` (before
  any Ray work), appends what each reader kept and skipped to ``suite.reports``, and returns one
  instance per language pair (or per pair and variant: BLI gives one per similarity);
- ``flags``: the ``distalign eval`` flags that set its suite keys; ``validate``: checks of those keys
  that need more than types (``ConfigError`` naming the dotted key), when the spec is read;
- ``check_model``: checks against the model under test (its layer count), before any Ray work;
- per instance: ``pair``, the text sets it encodes (``text_sets``), the vectors it scores at a layer
  (``at_layer``) and its metrics from them (``score``); ``task`` is the name of its result rows and
  MLflow metrics ``eval/<task>/<pair>/<metric>`` (``name`` unless a variant renames it);
- ``main_metric`` and ``report``: the metric its heatmap shows and the files it adds to the report.

``distalign.eval.tasks.registry`` maps each name to its plugin.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from distalign.errors import InputError
from distalign.eval import benchmarks
from distalign.languages import language_code

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from distalign.eval.suite_spec import SuiteSpec

WORDS, SENTENCES = "words", "sentences"


@dataclass
class TextSet:
    """Texts of one language to encode together: words alone (``[CLS] w [SEP]``) or sentences."""

    kind: str
    lang: str
    texts: list[str]

    @cached_property
    def key(self) -> str:
        """Identifies the set across tasks (same words of the same language = one encoding)."""
        digest = hashlib.sha256(json.dumps(self.texts, ensure_ascii=False).encode()).hexdigest()[:16]
        return f"{self.kind}:{self.lang}:{digest}"


@dataclass(frozen=True)
class Flag:
    """A ``distalign eval`` flag that sets one suite key; ``parse`` turns its text into the key's value."""

    name: str  # --bli-pairs
    key: str  # suite.bli_pairs
    help: str
    parse: Callable[[str], Any] | None = None  # None: the text as given
    options: dict = field(default_factory=dict)  # more argparse keywords (type, choices, metavar, action)


def comma_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def distinct(words: list[str]) -> tuple[list[str], list[int]]:
    """Distinct words in first-seen order, and each input word's index among them."""
    unique = list(dict.fromkeys(words))
    position = {w: i for i, w in enumerate(unique)}
    return unique, [position[w] for w in words]


def split_pair(pair: str, option: str) -> tuple[str, str]:
    langs = pair.split("-")
    if len(langs) != 2 or not all(langs):
        raise InputError(f"{option}: {pair!r} is not a language pair like de-en")
    return langs[0], langs[1]


def require_language_codes(values: tuple[str, ...], option: str, pairs: bool = True) -> None:
    """Each language of ``values`` (pairs like ``de-en``, or single languages) is a language code, checked with the
    flags, before the model or any file is read (whether a benchmark has the language: when its files are read)."""
    for value in values:
        for lang in split_pair(value, option) if pairs else (value,):
            language_code(lang, option)


def benchmark_pair(suite: SuiteSpec, benchmark: str, pair: str, option: str) -> tuple[str, str]:
    """``pair`` (``en-fr``, ``English-French``) in the codes ``benchmark``'s files name its languages by."""
    lang1, lang2 = (
        benchmarks.benchmark_language(suite.eval_dir, benchmark, lang, option) for lang in split_pair(pair, option)
    )
    return lang1, lang2


class EvalTask:
    """One task on one language pair; the class is the plugin (see the module docstring)."""

    name: ClassVar[str]
    main_metric: ClassVar[str]
    flags: ClassVar[tuple[Flag, ...]] = ()
    task: str  # the name of its result rows (a class attribute or a field of the instance)

    @classmethod
    def validate(cls, suite: SuiteSpec) -> None:
        """Raise ``ConfigError`` naming ``suite.<key>`` for values the types alone do not rule out."""

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> Sequence[EvalTask]:
        raise NotImplementedError

    def check_model(self, num_layers: int) -> None:
        """Raise ``InputError`` if this task cannot be scored on a model with ``num_layers`` hidden states."""

    @classmethod
    def report(cls, df: pd.DataFrame, task: str, out_dir: Path) -> list[Path]:
        """Files for the report of ``task``'s rows in ``df`` (``avg`` rows included): a heatmap of the
        language pairs at the layer where the pair-averaged main metric is best."""
        from distalign.eval import result_tables

        rows = df[(df["task"] == task) & (df["pair"] == result_tables.AVG)]
        best = result_tables.best_layers(rows)
        best = best[best["metric"] == cls.main_metric]
        if best.empty:
            return []
        return [
            result_tables.plot_pair_heatmap(
                df, task, cls.main_metric, int(best["layer"].iloc[0]), out_dir / f"heatmap_{task}.png"
            )
        ]

    @property
    def pair(self) -> str:
        raise NotImplementedError

    def text_sets(self) -> dict[str, TextSet]:
        raise NotImplementedError

    def at_layer(self, stack, layer: int):
        """The vectors scored as ``layer`` from a role's ``[L+1, n, d]`` stack; None: not scored there."""
        return stack[layer]

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        raise NotImplementedError


@dataclass
class WordPairTask(EvalTask):
    """A task on (lang1 word, lang2 word) pairs: each side's distinct words are encoded once
    (roles ``src`` and ``tgt``) and :meth:`paired_vectors` gives them back row-aligned with the pairs."""

    lang1: str
    lang2: str

    def word_pairs(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    def _sides(self) -> tuple[tuple[list[str], list[int]], tuple[list[str], list[int]]]:
        pairs = self.word_pairs()
        return distinct([a for a, _ in pairs]), distinct([b for _, b in pairs])

    def text_sets(self) -> dict[str, TextSet]:
        (first, _), (second, _) = self._sides()
        return {"src": TextSet(WORDS, self.lang1, first), "tgt": TextSet(WORDS, self.lang2, second)}

    def paired_vectors(self, vectors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """([n, d], [n, d]): row i holds the vectors of the two words of pair i."""
        (_, rows1), (_, rows2) = self._sides()
        return vectors["src"][rows1], vectors["tgt"][rows2]
