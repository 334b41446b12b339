"""The ``suite`` section of an evaluation spec: which benchmarks to run and their inputs (``SuiteSpec``).

A module below the task plugins (``distalign.eval.tasks``), which read their settings from it, and below
``distalign.eval.suite``, which builds the plugins' tasks from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distalign.data.readers import ReadReport
from distalign.eval.bli_settings import BLISettings

# what an empty eval_dir means, for help texts (not the path itself: the docs are generated from them)
BENCHMARK_DIR_TEXT = (
    "the data home's eval/ ($DISTALIGN_DATA/eval, default ~/.cache/distalign/data/eval), filled by "
    "`distalign data fetch`"
)


@dataclass(kw_only=True)
class SuiteSpec:
    """The benchmarks of an evaluation; the ``suite`` section of an evaluation spec (``distalign eval --spec``).

    ``tasks`` names plugins of ``distalign.eval.tasks.registry.EVAL_TASKS``; the other keys are
    their inputs and settings, each read by the plugins that name it.
    """

    # benchmark folder (layout: distalign.eval.benchmarks); "" = the data home's eval/ (`distalign data fetch`)
    eval_dir: str = ""
    tasks: tuple[str, ...] = ("bli", "xlsim", "tatoeba")  # names in EVAL_TASKS
    # the languages of the benchmarks' files (G-BLI pairs, ISO 639-1, read by bli and word_alignment; Multi-SimLex
    # pairs and Tatoeba languages, each against English, ISO 639-3; SemEval below): as the files name them, or any
    # other code or name of the language (deu-eng, en-fr, German)
    bli_pairs: tuple[str, ...] = ("de-en", "en-fi")
    xlsim_pairs: tuple[str, ...] = ("eng-fra",)
    tatoeba_langs: tuple[str, ...] = ("deu", "fra")
    # extra BLI test files (G-BLI/MUSE/PanLex format) as [lang1, lang2, path]; their test sets are built as the
    # in-loop BLI builds them (a checkpoint: with its run's settings, so the numbers match the run's)
    dictionaries: tuple[tuple[str, str, str], ...] = ()
    # <lang>_vocab.txt files whose top vocab_size words are the dictionaries' targets; empty: each dictionary's own
    # targets as written (a checkpoint: its run's eval.vocab_dir)
    dictionary_vocab_dir: str = ""
    similarities: tuple[Literal["cosine", "csls"], ...] = ("cosine",)  # add "csls" for CSLS (k = 10) rankings
    vocab_size: int = 100_000  # BLI vocabulary size (targets; the source space for CSLS and per-pair OOV)
    # BLI queries: one per source word ("grouped"), or one per test pair with the word's other
    # translations competing and pairs outside the source vocabulary dropped ("per_pair", BabelBERT's)
    bli_ranking: Literal["grouped", "per_pair"] = "grouped"
    max_queries: int = 0  # per BLI pair, 0 = all
    max_sentences: int = 0  # per Tatoeba language, 0 = all
    # Tatoeba sentence vectors at layer l: the mean of layers l-n+1..l; 4 with layer -1 = DICT-MLM's mean of the
    # last four layers; 1 = layer l alone
    tatoeba_mean_of_layers: int = 1
    semeval_pairs: tuple[str, ...] = ()  # SemEval-2017 Task 2 cross-lingual, ISO 639-1 (or any form); read by xlsim
    reports: list[ReadReport] = field(default_factory=list, init=False, repr=False)  # what build_tasks read
    # how the dictionaries' test sets are built (set by distalign eval from a checkpoint's run); None: from the keys
    # above (max_queries source words, bli_ranking, dictionary_vocab_dir, every layer)
    run_settings: BLISettings | None = field(default=None, init=False, repr=False)

    @property
    def dictionary_settings(self) -> BLISettings:
        return self.run_settings or BLISettings(
            max_pairs=self.max_queries,
            ranking=self.bli_ranking,
            vocab_dir=self.dictionary_vocab_dir,
            vocab_size=self.vocab_size,
            layer=None,
        )
