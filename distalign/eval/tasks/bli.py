"""Bilingual lexicon induction: G-BLI (and other) test dictionaries ranked against a target vocabulary."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from distalign.data.dictionary_checks import check_against_corpora
from distalign.errors import InputError
from distalign.eval import benchmarks
from distalign.eval.bli_settings import BLIRanking, BLISettings
from distalign.eval.tasks.base import (
    WORDS,
    EvalTask,
    Flag,
    TextSet,
    benchmark_pair,
    comma_list,
    distinct,
    require_language_codes,
    split_pair,
)
from distalign.languages import language_code

FREQUENT_WORDS = 20_000  # words of each frequency list a --dictionary's columns are checked against

if TYPE_CHECKING:
    import torch

    from distalign.eval.suite_spec import SuiteSpec


def gbli_sources(suite: SuiteSpec) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(lang1, lang2, test pairs) of the G-BLI ``bli_pairs``."""
    sources = []
    for lang1, lang2 in dict.fromkeys(
        benchmark_pair(suite, "G-BLI", pair, "suite.bli_pairs (--bli-pairs)") for pair in suite.bli_pairs
    ):
        pairs, report = benchmarks.read_gbli_test(suite.eval_dir, lang1, lang2)
        suite.reports.append(report)
        sources.append((lang1, lang2, pairs))
    return sources


def dictionary_sources(suite: SuiteSpec) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(lang1, lang2, test pairs) of the extra ``dictionaries``, read as training reads its evaluation dictionaries
    (languages in canonical codes: ``eng-deu`` is ``en-de``, as in-loop)."""
    sources = []
    for i, (lang1, lang2, path) in enumerate(suite.dictionaries):
        lang1, lang2 = (language_code(lang, f"suite.dictionaries[{i}] (--dictionary)") for lang in (lang1, lang2))
        pairs, report = benchmarks.read_bli_dictionary(path, lang1, lang2)
        suite.reports.append(report)
        frequent = {lang: _frequent_words(suite, lang) for lang in (lang1, lang2)}
        if all(frequent.values()):  # the languages' frequency lists: a dictionary declared the wrong way round fails
            check_against_corpora(
                f"suite.dictionaries[{i}] (--dictionary) {path}",
                lang1,
                lang2,
                [a for a, _ in pairs],
                [b for _, b in pairs],
                frequent,
                "frequency list",
            )
        sources.append((lang1, lang2, pairs))
    return sources


def scorable(task: BLITask, pairs: int, where: str) -> BLITask:
    """``task``, unless none of its test pairs has a translation in its target vocabulary: a command asked for it
    would write NaN scores (the in-loop BLI, which logs its OOV count each step, keeps such a task)."""
    if not task.queries:
        raise InputError(
            f"{where}: none of its {pairs} test pairs has a translation among the {len(task.vocab)} "
            f"target words of {task.lang2} (the vocabulary file's top --vocab-size words, or the "
            "dictionary's own targets): nothing to score; check the vocabulary and the dictionary's "
            "direction"
        )
    return task


def validate_languages(suite: SuiteSpec) -> None:
    """The languages of ``bli_pairs`` and ``dictionaries`` (read by bli and word_alignment) are language codes: a
    flag's wrong value is named before the model or any file is read."""
    require_language_codes(suite.bli_pairs, "suite.bli_pairs (--bli-pairs)")
    for i, (lang1, lang2, _) in enumerate(suite.dictionaries):
        require_language_codes((lang1, lang2), f"suite.dictionaries[{i}] (--dictionary)", pairs=False)


def bli_sources(suite: SuiteSpec) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(lang1, lang2, test pairs) of the G-BLI ``bli_pairs``, then of the extra ``dictionaries``."""
    return gbli_sources(suite) + dictionary_sources(suite)


def _frequent_words(suite: SuiteSpec, lang: str) -> set[str]:
    """The top ``FREQUENT_WORDS`` of ``lang``'s frequency list in ``eval_dir``, lower case; empty without one."""
    path = benchmarks.vocab_path(suite.eval_dir, lang)
    return {w.lower() for w in benchmarks.read_vocabulary(path, FREQUENT_WORDS)[0]} if path.is_file() else set()


def limit_queries(pairs: list[tuple[str, str]], max_queries: int) -> list[tuple[str, str]]:
    """Pairs of the first ``max_queries`` distinct source words (G-BLI files are frequency-ordered)."""
    if not max_queries:
        return pairs
    keep = set(list(dict.fromkeys(s for s, _ in pairs))[:max_queries])
    return [p for p in pairs if p[0] in keep]


def _vocabulary(suite: SuiteSpec, lang: str, fallback: list[str] | None) -> list[str] | None:
    path = benchmarks.vocab_path(suite.eval_dir, lang)
    if not path.is_file():
        return fallback
    words, report = benchmarks.read_vocabulary(path, suite.vocab_size)
    suite.reports.append(report)
    return words


def _dictionaries(items: list[str]) -> list[list[str]]:
    """``--dictionary L1-L2:PATH`` flags as ``suite.dictionaries`` entries [lang1, lang2, path]."""
    dictionaries = []
    for item in items:
        pair, sep, path = item.partition(":")
        if not sep:
            raise InputError(f"--dictionary {item!r}: expected L1-L2:PATH, e.g. de-en:test.tsv")
        dictionaries.append([*split_pair(pair, "--dictionary"), path])
    return dictionaries


def build_test_set(
    lang1: str,
    lang2: str,
    src: list[str],
    tgt: list[str],
    settings: BLISettings = BLISettings(),
    vocab: list[str] | None = None,
    **options,
) -> BLITask:
    """The BLI task of dictionary pairs ``zip(src, tgt)``, in-loop and in ``distalign eval`` alike: the pairs of
    ``settings.max_pairs`` source words (seeded), ranked among ``vocab`` (its words and the lookups in it
    lower-cased, like the shared frequency lists) or, without one, among the pairs' own targets as written (a cased
    model is scored on the words it was given). ``options``: more ``BLITask`` fields (``similarity``)."""
    pairs = list(zip(src, tgt))
    sources = list(dict.fromkeys(src))
    if 0 < settings.max_pairs < len(sources):
        rng = np.random.default_rng(settings.seed)
        keep = {sources[i] for i in rng.choice(len(sources), size=settings.max_pairs, replace=False)}
        pairs = [p for p in pairs if p[0] in keep]
    task = BLITask.from_pairs(
        lang1,
        lang2,
        pairs,
        vocab,
        lowercase=vocab is not None,
        ranking=settings.ranking,
        layer=settings.layer,
        **options,
    )
    order = sorted(range(len(task.vocab)), key=task.vocab.__getitem__)  # sorted vocabulary: stable across runs
    new_index = {old: new for new, old in enumerate(order)}
    task.vocab = [task.vocab[i] for i in order]
    task.gold = [sorted(new_index[i] for i in gold) for gold in task.gold]
    return task


@dataclass(kw_only=True)
class BLITask(EvalTask):
    """Bilingual lexicon induction lang1 -> lang2: rank ``vocab`` for every query (see :meth:`from_pairs`).

    ``grouped``: one query per source word, its best-ranked gold translation counts. ``per_pair``
    (BabelBERT's evaluation): one query per test pair, the pair's own target is the gold and the
    word's other translations compete with it. ``source_vocab`` is the source space the queries come
    from: CSLS's r_S is computed over it, and per-pair queries outside it are dropped (``oov_source``).
    """

    lang1: str
    lang2: str
    queries: list[str]
    vocab: list[str]
    gold: list[list[int]]  # gold[i] = indices into vocab of the translations of queries[i]
    oov: int = 0  # queries whose translations are all outside the vocabulary (not scored)
    similarity: str = "cosine"
    k_values: tuple[int, ...] = (1, 5, 10)
    csls_k: int = 10
    source_vocab: list[str] | None = None
    ranking: BLIRanking = "grouped"
    oov_source: int = 0  # per_pair: test pairs whose source word is outside source_vocab (not scored)
    layer: int | None = None  # the one hidden state scored (a dictionary's test set, as in-loop); None = any

    name: ClassVar[str] = "bli"
    main_metric: ClassVar[str] = "mrr"
    flags: ClassVar[tuple[Flag, ...]] = (
        Flag(
            "--bli-pairs",
            "suite.bli_pairs",
            "G-BLI pairs for bli and word_alignment: ISO "
            "639-1 as its folders name them, or other codes or names (deu-eng: de-en)",
            comma_list,
        ),
        Flag(
            "--dictionary",
            "suite.dictionaries",
            "extra BLI test dictionary (G-BLI/MUSE/PanLex format), repeatable",
            _dictionaries,
            {"action": "append", "metavar": "L1-L2:PATH"},
        ),
        Flag(
            "--dictionary-vocab-dir",
            "suite.dictionary_vocab_dir",
            "<lang>_vocab.txt files whose top "
            "--vocab-size words are the targets of the --dictionary test sets (default: each dictionary's own "
            "targets as written; a checkpoint: its run's eval.vocab_dir)",
        ),
        Flag("--similarity", "suite.similarities", "BLI ranking: cosine, csls or cosine,csls", comma_list),
        Flag(
            "--bli-ranking",
            "suite.bli_ranking",
            "BLI queries: one per source word (grouped) or one per test "
            "pair with its other translations competing (per_pair, BabelBERT's)",
            None,
            {"choices": ["grouped", "per_pair"]},
        ),
        Flag("--vocab-size", "suite.vocab_size", "BLI target vocabulary size", None, {"type": int}),
        Flag("--max-queries", "suite.max_queries", "BLI source words per pair (0 = all)", None, {"type": int}),
    )

    @property
    def task(self) -> str:
        return "bli" if self.similarity == "cosine" else f"bli_{self.similarity}"

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    @classmethod
    def from_pairs(
        cls,
        lang1: str,
        lang2: str,
        pairs: list[tuple[str, str]],
        vocab_words: list[str] | None = None,
        *,
        lowercase: bool = True,
        source_vocab: list[str] | None = None,
        ranking: BLIRanking = "grouped",
        **options,
    ) -> BLITask:
        """Queries from test pairs; the target vocabulary is ``vocab_words`` (never extended with gold
        words: a query whose translations are all missing is OOV, counted and skipped) or, when None,
        the distinct targets of the pairs. ``lowercase`` applies to the vocabularies and to looking words
        up in them (the shared vocabularies are lower-case while G-BLI keeps German noun capitals); a query
        is encoded as written, as the BabelBERT authors' evaluation does (a cased model sees "Haus")."""
        norm = str.lower if lowercase else str
        vocab = list(
            dict.fromkeys(norm(w) for w in (vocab_words if vocab_words is not None else [t for _, t in pairs]))
        )
        position = {w: i for i, w in enumerate(vocab)}
        sources = None if source_vocab is None else list(dict.fromkeys(norm(w) for w in source_vocab))
        if ranking == "per_pair":
            known = set(sources) if sources is not None else None
            in_space = [(a, norm(b)) for a, b in pairs if known is None or norm(a) in known]
            scored = [(a, position[b]) for a, b in in_space if b in position]
            return cls(
                lang1=lang1,
                lang2=lang2,
                queries=[a for a, _ in scored],
                vocab=vocab,
                gold=[[g] for _, g in scored],
                oov=len(in_space) - len(scored),
                source_vocab=sources,
                ranking=ranking,
                oov_source=len(pairs) - len(in_space),
                **options,
            )
        translations: dict[str, set[int]] = {}
        written: dict[str, str] = {}  # a source word's first written form: its query
        for src, tgt in pairs:
            gold = translations.setdefault(norm(src), set())
            written.setdefault(norm(src), src)
            if norm(tgt) in position:
                gold.add(position[norm(tgt)])
        keys = [key for key, gold in translations.items() if gold]
        return cls(
            lang1=lang1,
            lang2=lang2,
            queries=[written[key] for key in keys],
            vocab=vocab,
            gold=[sorted(translations[key]) for key in keys],
            oov=len(translations) - len(keys),
            source_vocab=sources,
            **options,
        )

    @classmethod
    def validate(cls, suite: SuiteSpec) -> None:
        validate_languages(suite)

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> list[BLITask]:
        """One task per test dictionary and similarity. G-BLI pairs: the targets are the top ``vocab_size`` words of
        the target language's vocabulary file in ``eval_dir`` (the pairs' targets without one), and the source
        language's file, when there is one, is the source space. ``dictionaries``: the test set the in-loop BLI
        builds (``build_test_set`` with ``suite.dictionary_settings``: a checkpoint's own run's settings), ranked
        among the dictionary's own targets unless ``dictionary_vocab_dir`` (or the run's ``eval.vocab_dir``) names
        vocabulary files."""
        tasks = []
        for lang1, lang2, pairs in gbli_sources(suite):
            pairs = limit_queries(pairs, suite.max_queries)
            vocab = _vocabulary(suite, lang2, fallback=[t for _, t in pairs])
            source_vocab = _vocabulary(suite, lang1, fallback=None)  # CSLS's r_S and per-pair OOV: the source space
            tasks += [
                scorable(
                    cls.from_pairs(
                        lang1, lang2, pairs, vocab, source_vocab=source_vocab, ranking=suite.bli_ranking, similarity=sim
                    ),
                    len(pairs),
                    f"G-BLI {lang1}-{lang2} (suite.bli_pairs, --bli-pairs)",
                )
                for sim in suite.similarities
            ]
        settings = suite.dictionary_settings
        for i, (lang1, lang2, pairs) in enumerate(dictionary_sources(suite)):
            key = "suite.dictionary_vocab_dir (a checkpoint's default: its run's eval.vocab_dir)"
            vocab = settings.target_vocabulary(lang2, suite.reports, key)
            tasks += [
                scorable(
                    build_test_set(
                        lang1, lang2, [a for a, _ in pairs], [b for _, b in pairs], settings, vocab, similarity=sim
                    ),
                    len(pairs),
                    f"suite.dictionaries[{i}] (--dictionary) {suite.dictionaries[i][2]}",
                )
                for sim in suite.similarities
            ]
        return tasks

    def check_model(self, num_layers: int) -> None:
        if self.layer is not None and not -num_layers <= self.layer < num_layers:
            raise InputError(
                f"BLI {self.pair}: layer {self.layer} (the run's model.word_layer, or --layer) is not "
                f"one of the model's {num_layers} hidden states"
            )

    def at_layer(self, stack, layer: int):
        return stack[layer] if self.layer is None or self.layer % len(stack) == layer % len(stack) else None

    def text_sets(self) -> dict[str, TextSet]:
        if not self.queries:  # all OOV: nothing to encode, score() reports NaN and the OOV count
            return {}
        return {
            "src": TextSet(WORDS, self.lang1, self._source_words()[0]),
            "tgt": TextSet(WORDS, self.lang2, self.vocab),
        }

    def _source_words(self) -> tuple[list[str], list[int]]:
        """The encoded source words (the source space) and each query's row among them."""
        if self.source_vocab is None:
            return distinct(self.queries)
        row = {w: i for i, w in enumerate(self.source_vocab)}
        extra = [q for q in dict.fromkeys(self.queries) if q not in row]  # grouped queries outside the space
        words = self.source_vocab + extra
        row.update({w: len(self.source_vocab) + i for i, w in enumerate(extra)})
        return words, [row[q] for q in self.queries]

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        # here, not at the top: the task modules import no torch, so the command line's help loads fast
        from distalign.eval.bli_metrics import gold_ranks, ranking_metrics

        counts = {"oov": self.oov, **({"oov_source": self.oov_source} if self.ranking == "per_pair" else {})}
        if not self.queries:
            return {"mrr": math.nan, **{f"p_at_{k}": math.nan for k in self.k_values}, **counts}
        _, rows = self._source_words()
        # CSLS's r_S over the source vocabulary, not the queries encoded beside it
        space = vectors["src"] if self.source_vocab is None else vectors["src"][: len(self.source_vocab)]
        ranks = gold_ranks(
            vectors["src"][rows], vectors["tgt"], self.gold, self.similarity, self.csls_k, src_space=space
        )
        metrics = ranking_metrics(ranks, self.k_values)
        return {"mrr": metrics.pop("mrr"), **{f"p_at_{k}": v for k, v in metrics.items()}, **counts}
