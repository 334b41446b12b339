"""Cross-lingual word similarity on Multi-SimLex."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from distalign.eval import benchmarks
from distalign.eval.tasks.base import Flag, WordPairTask, benchmark_pair, comma_list, require_language_codes

if TYPE_CHECKING:
    import torch

    from distalign.eval.suite_spec import SuiteSpec


@dataclass
class XLSimTask(WordPairTask):
    """Cross-lingual word similarity: Spearman's rho between cosine and human scores, on Multi-SimLex
    (rows ``xlsim``) or SemEval-2017 Task 2's cross-lingual subtask (rows ``xlsim_semeval``)."""

    rows: list[tuple[str, str, float]]
    task: str = "xlsim"  # the benchmark's rows: xlsim (Multi-SimLex) or xlsim_semeval
    name: ClassVar[str] = "xlsim"
    main_metric: ClassVar[str] = "spearman"
    flags: ClassVar[tuple[Flag, ...]] = (
        Flag(
            "--xlsim-pairs",
            "suite.xlsim_pairs",
            "Multi-SimLex pairs: ISO 639-3 as its files name "
            "them, or other codes or names (en-fr, English-French: eng-fra)",
            comma_list,
        ),
        Flag(
            "--semeval-pairs",
            "suite.semeval_pairs",
            "SemEval-2017 Task 2 cross-lingual pairs, read by "
            "xlsim: ISO 639-1 as its files name them, or other codes or names (deu-eng: de-en)",
            comma_list,
        ),
    )

    @classmethod
    def validate(cls, suite: SuiteSpec) -> None:
        require_language_codes(suite.xlsim_pairs, "suite.xlsim_pairs (--xlsim-pairs)")
        require_language_codes(suite.semeval_pairs, "suite.semeval_pairs (--semeval-pairs)")

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> list[XLSimTask]:
        """One task per Multi-SimLex pair (``xlsim_pairs``), then per SemEval-2017 pair (``semeval_pairs``)."""
        tasks = []
        pairs = [
            benchmark_pair(suite, "Multi-SimLex", pair, "suite.xlsim_pairs (--xlsim-pairs)")
            for pair in suite.xlsim_pairs
        ]
        for lang1, lang2 in dict.fromkeys(pairs):  # en-fr and eng-fra: one task
            rows, report = benchmarks.read_multisimlex(
                benchmarks.multisimlex_path(suite.eval_dir, lang1, lang2), lang1, lang2
            )
            suite.reports.append(report)
            tasks.append(cls(lang1, lang2, rows))
        pairs = [
            benchmark_pair(suite, "SemEval-2017 Task 2", pair, "suite.semeval_pairs (--semeval-pairs)")
            for pair in suite.semeval_pairs
        ]
        for lang1, lang2 in dict.fromkeys(pairs):
            rows, report = benchmarks.read_semeval2017(*benchmarks.semeval2017_paths(suite.eval_dir, lang1, lang2))
            suite.reports.append(report)
            tasks.append(cls(lang1, lang2, rows, "xlsim_semeval"))
        return tasks

    def word_pairs(self) -> list[tuple[str, str]]:
        return [(w1, w2) for w1, w2, _ in self.rows]

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        # here, not at the top: the task modules import no torch, so the command line's help loads fast
        from distalign.eval.xlsim_metrics import word_similarity_spearman

        return {"spearman": word_similarity_spearman(*self.paired_vectors(vectors), [r[2] for r in self.rows])}
