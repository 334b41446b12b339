"""Tatoeba parallel sentence retrieval against English."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from distalign.errors import ConfigError, InputError
from distalign.eval import benchmarks
from distalign.eval.tasks.base import SENTENCES, EvalTask, Flag, TextSet, comma_list, require_language_codes

if TYPE_CHECKING:
    import torch

    from distalign.eval.suite_spec import SuiteSpec


@dataclass
class TatoebaTask(EvalTask):
    """Sentence retrieval between ``lang`` and English, both directions; accuracy in [0, 1].

    ``acc`` (the headline) is xxx->eng, as XTREME scores it and DICT-MLM and the static-contextual
    paper report it; ``acc_to_eng`` repeats it under its direction's name and ``acc_from_eng`` is
    eng->xxx (BabelBERT's ``evaluate.py``). ``mean_of_layers`` = n scores the sentence vectors at layer l
    as the mean of layers l-n+1..l (n = 4 at the last layer: DICT-MLM's mean of the last four layers);
    layers with fewer than n below them are not scored.
    """

    lang: str
    sentences: list[str]
    english: list[str]
    mean_of_layers: int = 1
    name: ClassVar[str] = "tatoeba"
    task: ClassVar[str] = "tatoeba"
    main_metric: ClassVar[str] = "acc"
    flags: ClassVar[tuple[Flag, ...]] = (
        Flag(
            "--tatoeba-langs",
            "suite.tatoeba_langs",
            "Tatoeba languages, each vs English: ISO 639-3 "
            "as its files name them, or another code or name (de, German: deu)",
            comma_list,
        ),
        Flag("--max-sentences", "suite.max_sentences", "Tatoeba sentences per language (0 = all)", None, {"type": int}),
    )

    @classmethod
    def validate(cls, suite: SuiteSpec) -> None:
        require_language_codes(suite.tatoeba_langs, "suite.tatoeba_langs (--tatoeba-langs)", pairs=False)
        if suite.tatoeba_mean_of_layers < 1:
            raise ConfigError("suite.tatoeba_mean_of_layers: must be >= 1")

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> list[TatoebaTask]:
        tasks = []
        key = "suite.tatoeba_langs (--tatoeba-langs)"
        langs = [benchmarks.benchmark_language(suite.eval_dir, "Tatoeba", lang, key) for lang in suite.tatoeba_langs]
        for lang in dict.fromkeys(langs):  # de and deu: one task
            src, eng, report = benchmarks.read_tatoeba(*benchmarks.tatoeba_paths(suite.eval_dir, lang))
            suite.reports.append(report)
            if suite.max_sentences:
                src, eng = src[: suite.max_sentences], eng[: suite.max_sentences]
            tasks.append(cls(lang, src, eng, suite.tatoeba_mean_of_layers))
        return tasks

    @property
    def pair(self) -> str:
        return f"{self.lang}-eng"

    def check_model(self, num_layers: int) -> None:
        if self.mean_of_layers > num_layers:
            raise InputError(
                f"suite.tatoeba_mean_of_layers: {self.mean_of_layers} is more than the {num_layers} "
                "layers of the model (embeddings included)"
            )

    def text_sets(self) -> dict[str, TextSet]:
        return {"src": TextSet(SENTENCES, self.lang, self.sentences), "eng": TextSet(SENTENCES, "eng", self.english)}

    def at_layer(self, stack, layer: int):
        if layer + 1 < self.mean_of_layers:
            return None
        return stack[layer + 1 - self.mean_of_layers : layer + 1].mean(0)

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        # here, not at the top: the task modules import no torch, so the command line's help loads fast
        from distalign.eval.retrieval import tatoeba_accuracy_both_directions

        to_eng, from_eng = tatoeba_accuracy_both_directions(vectors["src"], vectors["eng"])
        return {"acc_to_eng": to_eng, "acc_from_eng": from_eng, "acc": to_eng}
