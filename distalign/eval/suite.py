"""Which benchmarks to run, read from the files of an evaluation directory into tasks (before any Ray work).

Layout of ``eval_dir`` (``../shared/data/eval``; see ``distalign.eval.benchmarks``): G-BLI test
dictionaries, 100K-word target vocabularies, Multi-SimLex CSVs, Tatoeba test sets. Every file is
read and checked here, so a missing file or a bad pair name fails before the cluster is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from distalign.data.readers import InputError, ReadReport
from distalign.eval import benchmarks
from distalign.eval.tasks import BLITask, EvalTask, TatoebaTask, WordAlignmentTask, XLSimTask

TaskName = Literal["bli", "xlsim", "tatoeba", "word_alignment"]
TASK_NAMES = get_args(TaskName)


@dataclass
class SuiteSpec:
    """The benchmarks of an evaluation; the ``suite`` section of an evaluation spec (``distalign eval --spec``)."""

    eval_dir: str = "../shared/data/eval"  # benchmark folder (layout: distalign.eval.benchmarks)
    tasks: tuple[TaskName, ...] = ("bli", "xlsim", "tatoeba")
    bli_pairs: tuple[str, ...] = ("de-en", "en-fi")  # G-BLI, ISO 639-1; read by bli and word_alignment
    xlsim_pairs: tuple[str, ...] = ("eng-fra",)  # Multi-SimLex, ISO 639-3
    tatoeba_langs: tuple[str, ...] = ("deu", "fra")  # Tatoeba, ISO 639-3, each against English
    # extra BLI test files (G-BLI/MUSE/PanLex format) as [lang1, lang2, path]
    dictionaries: tuple[tuple[str, str, str], ...] = ()
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
    reports: list[ReadReport] = field(default_factory=list, init=False, repr=False)  # what build_tasks read


def split_pair(pair: str, option: str) -> tuple[str, str]:
    langs = pair.split("-")
    if len(langs) != 2 or not all(langs):
        raise InputError(f"{option}: {pair!r} is not a language pair like de-en")
    return langs[0], langs[1]


def gbli_test_pairs(eval_dir: str | Path, lang1: str, lang2: str) -> tuple[list[tuple[str, str]], ReadReport]:
    """G-BLI test pairs lang1 -> lang2; G-BLI ships one direction per pair, so the other is read swapped."""
    path = benchmarks.gbli_test_path(eval_dir, lang1, lang2)
    if path.is_file():
        return benchmarks.read_bli_dictionary(path, lang1, lang2)
    reverse = benchmarks.gbli_test_path(eval_dir, lang2, lang1)
    if not reverse.is_file():
        raise InputError(f"no G-BLI test dictionary for {lang1}-{lang2}: neither {path} nor {reverse} exists")
    pairs, report = benchmarks.read_bli_dictionary(reverse, lang2, lang1)
    return [(b, a) for a, b in pairs], report


def _vocabulary(spec: SuiteSpec, lang: str, fallback: list[str] | None) -> list[str] | None:
    path = benchmarks.vocab_path(spec.eval_dir, lang)
    if not path.is_file():
        return fallback
    words, report = benchmarks.read_vocabulary(path, spec.vocab_size)
    spec.reports.append(report)
    return words


def _limit_queries(pairs: list[tuple[str, str]], max_queries: int) -> list[tuple[str, str]]:
    """Pairs of the first ``max_queries`` distinct source words (G-BLI files are frequency-ordered)."""
    if not max_queries:
        return pairs
    keep = set(list(dict.fromkeys(s for s, _ in pairs))[:max_queries])
    return [p for p in pairs if p[0] in keep]


def one_to_one(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Keep a pair only if neither word was used by an earlier pair (the alignment score needs row i = row i)."""
    seen_src, seen_tgt, kept = set(), set(), []
    for s, t in pairs:
        if s not in seen_src and t not in seen_tgt:
            seen_src.add(s)
            seen_tgt.add(t)
            kept.append((s, t))
    return kept


def build_tasks(spec: SuiteSpec) -> list[EvalTask]:
    """The evaluation tasks of a suite, every benchmark file read and checked (before any Ray work).

    One BLI task per pair and similarity (G-BLI pairs, then ``dictionaries``), one word_alignment task
    per BLI pair (one-to-one pairs), one XLSIM task per Multi-SimLex pair, one Tatoeba task per
    language; what each reader kept and skipped is appended to ``spec.reports``. Errors name the
    spec key and its ``distalign eval`` flag.
    """
    unknown = set(spec.tasks) - set(TASK_NAMES)
    if unknown:
        raise InputError(f"suite.tasks (--tasks): unknown task(s) {sorted(unknown)}; "
                         f"choose from {', '.join(TASK_NAMES)}")
    if not Path(spec.eval_dir).is_dir():
        raise InputError(f"suite.eval_dir (--eval-dir): directory not found: {spec.eval_dir}")
    bli_sources = []  # (lang1, lang2, pairs)
    if "bli" in spec.tasks or "word_alignment" in spec.tasks:
        for pair in spec.bli_pairs:
            lang1, lang2 = split_pair(pair, "suite.bli_pairs (--bli-pairs)")
            pairs, report = gbli_test_pairs(spec.eval_dir, lang1, lang2)
            spec.reports.append(report)
            bli_sources.append((lang1, lang2, pairs))
        for lang1, lang2, path in spec.dictionaries:
            pairs, report = benchmarks.read_bli_dictionary(path, lang1, lang2)
            spec.reports.append(report)
            bli_sources.append((lang1, lang2, pairs))

    tasks: list[EvalTask] = []
    if "bli" in spec.tasks:
        for lang1, lang2, pairs in bli_sources:
            pairs = _limit_queries(pairs, spec.max_queries)
            vocab = _vocabulary(spec, lang2, fallback=[t for _, t in pairs])
            source_vocab = _vocabulary(spec, lang1, fallback=None)  # CSLS's r_S and per-pair OOV: the source space
            tasks += [BLITask.from_pairs(lang1, lang2, pairs, vocab, source_vocab=source_vocab,
                                         ranking=spec.bli_ranking, similarity=sim) for sim in spec.similarities]
    if "word_alignment" in spec.tasks:
        for lang1, lang2, pairs in bli_sources:
            tasks.append(WordAlignmentTask(lang1, lang2, one_to_one(_limit_queries(pairs, spec.max_queries))))
    if "xlsim" in spec.tasks:
        for pair in spec.xlsim_pairs:
            lang1, lang2 = split_pair(pair, "suite.xlsim_pairs (--xlsim-pairs)")
            rows, report = benchmarks.read_multisimlex(benchmarks.multisimlex_path(spec.eval_dir, lang1, lang2),
                                                       lang1, lang2)
            spec.reports.append(report)
            tasks.append(XLSimTask(lang1.lower(), lang2.lower(), rows))
    if "tatoeba" in spec.tasks:
        for lang in spec.tatoeba_langs:
            src, eng, report = benchmarks.read_tatoeba(*benchmarks.tatoeba_paths(spec.eval_dir, lang))
            spec.reports.append(report)
            if spec.max_sentences:
                src, eng = src[:spec.max_sentences], eng[:spec.max_sentences]
            tasks.append(TatoebaTask(lang, src, eng, spec.tatoeba_mean_of_layers))
    return tasks
