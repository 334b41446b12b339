"""BLI of static word vectors read from word2vec text files (``.vec``): the static-contextual paper (Hämmerl et
al. 2022) scores its static spaces themselves (Tables 1 and 5), beside the encoders they are distilled into.

    distalign static bli --vectors de=de.vec --vectors en=en.vec --dictionary de-en:test.de-en.tsv --similarity csls
    distalign static bli --vectors de=de.vec --vectors en=en.vec --bli-pairs de-en  # after `distalign data fetch g-bli`

Test dictionaries are read as ``distalign eval`` reads them (G-BLI pairs from ``--eval-dir``, extra files with
``--dictionary``) and ranked by ``BLITask`` (cosine or CSLS, grouped or per-pair queries): only the vectors
differ, looked up in the files instead of encoded. Each file's first ``--vocab-size`` words are its space (the
source space of CSLS, the target vocabulary). Words are looked up exactly as written; a test pair whose source
word has no vector is not scored (``oov_source``), nor is a query none of whose translations has one (``oov``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from distalign.errors import InputError
from distalign.eval.suite_spec import SuiteSpec
from distalign.eval.tasks import BLITask
from distalign.eval.tasks.bli import bli_sources, limit_queries
from distalign.similarity import SIMILARITIES
from distalign.static.word2vec_format import read_word2vec


@dataclass
class StaticSpace:
    words: list[str]
    vectors: np.ndarray  # [len(words), dim] float32

    def __post_init__(self) -> None:
        self.row = {w: i for i, w in enumerate(self.words)}

    def lookup(self, words: list[str]) -> torch.Tensor:
        return torch.from_numpy(self.vectors[[self.row[w] for w in words]])  # host-side: CPU-only static BLI


def parse_vectors(items: list[str]) -> dict[str, str]:
    """``--vectors LANG=PATH`` flags as {lang: path}."""
    vectors: dict[str, str] = {}
    for item in items:
        lang, sep, path = item.partition("=")
        if not sep or not lang or not path:
            raise InputError(f"--vectors {item!r}: expected LANG=PATH, e.g. de=vectors/de.vec")
        if lang in vectors:
            raise InputError(f"--vectors: two files for '{lang}' ({vectors[lang]}, {path})")
        vectors[lang] = path
    return vectors


def static_bli(vectors: dict[str, str], suite: SuiteSpec) -> list[dict]:
    """Result rows ``{task, pair, metric, value}`` of every test dictionary of ``suite`` (its G-BLI ``bli_pairs``
    and ``dictionaries``) and similarity, scored on the static spaces of ``vectors`` ({lang: .vec path}).
    Every file is read and checked first; what each reader skipped is appended to ``suite.reports``."""
    unknown = [s for s in suite.similarities if s not in SIMILARITIES]
    if unknown:
        raise InputError(f"--similarity: {unknown} not among {list(SIMILARITIES)}")
    sources = bli_sources(suite)
    if not sources:
        raise InputError("no test dictionary: give --dictionary L1-L2:PATH or --bli-pairs with --eval-dir")
    spaces: dict[str, StaticSpace] = {}
    for lang1, lang2, _ in sources:
        for lang in (lang1, lang2):
            if lang not in vectors:
                raise InputError(
                    f"--vectors: no vectors for '{lang}' (pair {lang1}-{lang2}); give --vectors {lang}=PATH"
                )
            if lang not in spaces:
                words, matrix, report = read_word2vec(vectors[lang], suite.vocab_size)
                suite.reports.append(report)
                if not words:
                    raise InputError(f"{vectors[lang]}: no vector read")
                spaces[lang] = StaticSpace(words, matrix)
    rows = []
    for lang1, lang2, pairs in sources:
        pairs = limit_queries(pairs, suite.max_queries)
        src, tgt = spaces[lang1], spaces[lang2]
        in_space = [(a, b) for a, b in pairs if a in src.row]  # a query needs a vector
        for similarity in suite.similarities:
            task = BLITask.from_pairs(
                lang1,
                lang2,
                in_space,
                tgt.words,
                lowercase=False,
                source_vocab=src.words,
                ranking=suite.bli_ranking,
                similarity=similarity,
            )
            if not task.queries:  # every score would be NaN: say so rather than write them
                raise InputError(
                    f"{lang1}-{lang2}: none of its {len(pairs)} test pairs has its source word in "
                    f"--vectors {lang1}={vectors[lang1]} and a translation in --vectors "
                    f"{lang2}={vectors[lang2]} ({len(pairs) - len(in_space)} source words without a "
                    "vector): nothing to score; check the dictionary's languages and direction"
                )
            vectors_of = {
                role: spaces[text_set.lang].lookup(text_set.texts) for role, text_set in task.text_sets().items()
            }
            metrics = task.score(vectors_of) | {"oov_source": len(pairs) - len(in_space)}
            rows += [
                {"task": task.task, "pair": task.pair, "metric": metric, "value": float(value)}
                for metric, value in metrics.items()
            ]
    return rows


def run_static_bli_cli(args) -> int:
    suite = SuiteSpec(eval_dir=args.eval_dir, tasks=("bli",), bli_pairs=())
    for flag in BLITask.flags:
        given = getattr(args, flag.name.lstrip("-").replace("-", "_"))
        if given is not None:
            setattr(suite, flag.key.removeprefix("suite."), flag.parse(given) if flag.parse else given)
    rows = static_bli(parse_vectors(args.vectors), suite)
    for report in suite.reports:
        if report.malformed or getattr(report, "duplicates", 0):  # a .vec file's report counts repeated words
            print(f"[distalign static bli] WARNING {report.summary()}")
    print(f"{'task':<10} {'pair':<8} {'metric':<12} value")
    for row in rows:
        print(f"{row['task']:<10} {row['pair']:<8} {row['metric']:<12} {row['value']:.4f}")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        with open(args.output, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["task", "pair", "metric", "value"])
            writer.writeheader()
            writer.writerows(rows)
        print(f"[distalign static bli] {len(rows)} rows -> {args.output}")
    return 0
