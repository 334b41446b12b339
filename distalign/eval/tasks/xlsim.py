"""Cross-lingual word similarity on Multi-SimLex."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from distalign.eval import benchmarks
from distalign.eval.tasks.base import EvalTask, Flag, TextSet, WORDS, comma_list, distinct, split_pair
from distalign.eval.xlsim import word_similarity_spearman

if TYPE_CHECKING:
    from distalign.eval.suite import SuiteSpec


@dataclass
class XLSimTask(EvalTask):
    """Cross-lingual word similarity: Spearman's rho between cosine and human scores (Multi-SimLex)."""

    lang1: str
    lang2: str
    rows: list[tuple[str, str, float]]
    name: ClassVar[str] = "xlsim"
    task: ClassVar[str] = "xlsim"
    main_metric: ClassVar[str] = "spearman"
    flags: ClassVar[tuple[Flag, ...]] = (
        Flag("--xlsim-pairs", "suite.xlsim_pairs", "Multi-SimLex pairs (ISO 639-3)", comma_list),
    )

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> list[XLSimTask]:
        tasks = []
        for pair in suite.xlsim_pairs:
            lang1, lang2 = split_pair(pair, "suite.xlsim_pairs (--xlsim-pairs)")
            rows, report = benchmarks.read_multisimlex(benchmarks.multisimlex_path(suite.eval_dir, lang1, lang2),
                                                       lang1, lang2)
            suite.reports.append(report)
            tasks.append(cls(lang1.lower(), lang2.lower(), rows))
        return tasks

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    def text_sets(self) -> dict[str, TextSet]:
        return {"w1": TextSet(WORDS, self.lang1, distinct([r[0] for r in self.rows])[0]),
                "w2": TextSet(WORDS, self.lang2, distinct([r[1] for r in self.rows])[0])}

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        index1 = distinct([r[0] for r in self.rows])[1]
        index2 = distinct([r[1] for r in self.rows])[1]
        return {"spearman": word_similarity_spearman(vectors["w1"][index1], vectors["w2"][index2],
                                                     [r[2] for r in self.rows])}
