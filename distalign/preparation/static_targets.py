"""The static stream's rows, read on the driver: (word, lang, vector) targets of the static objective.

``static_targets`` reads them from ``data.static_vectors`` (word2vec text files in one aligned
space), or from vectors derived from the run's own starting model, leaves evaluation words out,
checks them (one batch per worker; the reading objective's own rules,
``StaticAlignObjective.check_targets``) and shuffles them once by the run seed.

Derived targets (no ``data.static_vectors``): Hämmerl et al. (2022)'s pipeline as one driver-side
step before training:

1. X2Static vectors per corpus language, distilled from the model the run starts from
   (``objectives.static.extract_layer``; layer 6 for XLM-R base);
2. every other language's space mapped (``objectives.static.mapping``: orthogonal Procrustes, or
   VecMap as the paper does; plus self-learning rounds) onto the pivot language's VecMap-normalised
   space, seeded with the run's training pairs between the two languages (evaluation words are
   already out of them). The pivot stays fixed so that every language shares its space.

The files are written once per run under ``<data.output_dir>/static/`` and reused when the run
resumes, so it keeps training towards the same vectors.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from distalign.config import ExperimentConfig
from distalign.data.corpus_stream import CorpusStream
from distalign.data.readers import ReadReport
from distalign.data.sources import StaticVectorsSource
from distalign.errors import ConfigError
from distalign.languages import LanguageCode
from distalign.objectives.static_align import StaticAlignObjective
from distalign.static.mapping import MappingMethod, map_spaces
from distalign.static.procrustes import preprocess
from distalign.static.word2vec_format import read_word2vec, write_word2vec

log = logging.getLogger("distalign")


def seed_pairs_between(pairs: pa.Table, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """(src word, tgt word) of every training pair between the two languages, in either column order."""
    found = []
    for w1, l1, w2, l2 in zip(*(pairs[c].to_pylist() for c in ("word1", "lang1", "word2", "lang2"))):
        if (l1, l2) == (src_lang, tgt_lang):
            found.append((w1, w2))
        elif (l1, l2) == (tgt_lang, src_lang):
            found.append((w2, w1))
    return found


def derive_static_vectors(
    model_path: str,
    corpora: list[tuple[str, str]],
    pairs: pa.Table,
    out_dir: str | Path,
    layer: int,
    epochs: int,
    iterations: int,
    seed: int = 0,
    method: MappingMethod = "procrustes",
    device: str = "cpu",
) -> list[StaticVectorsSource]:
    """Extract (on ``device``) and align (module docstring); ``corpora`` are (path, lang). Returns one source per
    language."""
    # imported here: X2Static imports transformers' model classes (seconds), which a run without derived targets
    # (and `distalign check`) never needs
    from distalign.static.x2static import extract_to_file

    out_dir = Path(out_dir)
    paths_by_lang: dict[str, list[str]] = defaultdict(list)
    for path, lang in corpora:
        paths_by_lang[lang].append(path)
    languages = sorted(paths_by_lang)
    pivot = languages[0]
    sources = [StaticVectorsSource(str(out_dir / f"{lang}.aligned.vec"), LanguageCode(lang)) for lang in languages]
    if all(Path(s.path).is_file() for s in sources):  # a resumed run
        return sources

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("objectives.static.extract_device: cuda, but the driver sees no GPU (use cpu)")
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = {}
    for lang in languages:
        log.info(
            "static targets: X2Static vectors for '%s' from %s (layer %d, on the driver's %s: "
            "objectives.static.extract_device)",
            lang,
            model_path,
            layer,
            device,
        )
        raw[lang] = extract_to_file(
            model_path,
            paths_by_lang[lang],
            out_dir / f"{lang}.x2static.vec",
            layer=layer,
            epochs=epochs,
            seed=seed,
            device=device,
        )["path"]
    pivot_words, pivot_vectors, _ = read_word2vec(raw[pivot])
    for source in sources:
        if source.lang == pivot:  # the shared space: the pivot's normalised vectors
            write_word2vec(source.path, pivot_words, preprocess(pivot_vectors, normalize=True))
            continue
        words, vectors, _ = read_word2vec(raw[source.lang])
        seed_pairs = seed_pairs_between(pairs, source.lang, pivot)
        if not seed_pairs:
            raise ConfigError(
                f"objectives.static: no training pairs between '{source.lang}' and the pivot "
                f"'{pivot}' to seed the {method} map (give data.static_vectors instead)"
            )
        mapped, _, report = map_spaces(
            method, words, vectors, pivot_words, pivot_vectors, seed_pairs, iterations, keep_target=True
        )
        write_word2vec(source.path, words, mapped)
        log.info(
            "static targets: '%s' mapped onto '%s' (%s) with %d seed pairs (%d lacked a vector), dictionary sizes %s",
            source.lang,
            pivot,
            method,
            report["dictionary_sizes"][0],
            report["seed_missing"],
            report["dictionary_sizes"],
        )
    return sources


def static_targets(
    config: ExperimentConfig,
    model_path: str,
    corpus: CorpusStream,
    pairs: pa.Table,
    heldout: set[tuple[str, str]],
    reports: list[ReadReport],
) -> pa.Table:
    """The static stream's rows (module docstring): ``pairs`` are the run's training pairs (they seed the
    maps of derived targets), ``heldout`` the (lang, word) evaluation words; read reports go to ``reports``."""
    sources = config.data.static_vectors or derived_static_sources(config, model_path, corpus, pairs)
    return read_static_targets(config, sources, heldout, reports, model_path)


def derived_static_sources(
    config: ExperimentConfig, model_path: str, corpus: CorpusStream, pairs: pa.Table
) -> list[StaticVectorsSource]:
    """X2Static + mapped targets from the starting model (``derive_static_vectors``)."""
    s = config.objectives.static
    if corpus.filesystem is not None or any(src.kind == "hf" for src in corpus.sources):
        raise ConfigError(
            "objectives.static derives its targets from local corpus files only: give "
            "data.static_vectors for corpora on S3 or from Hugging Face datasets"
        )
    local = [(path, src.lang) for src in corpus.sources for path in src.paths]
    return derive_static_vectors(
        model_path,
        local,
        pairs,
        Path(config.data.output_dir) / "static",
        s.extract_layer,
        s.extract_epochs,
        s.align_iterations,
        config.train.seed,
        s.mapping,
        s.extract_device,
    )


def read_static_targets(
    config: ExperimentConfig,
    sources: list[StaticVectorsSource],
    heldout: set[tuple[str, str]],
    reports: list[ReadReport],
    model_path: str,
) -> pa.Table:
    """(word, lang, vector) rows of every static vector file; evaluation words left out."""
    from transformers import AutoConfig

    tables = []
    for src in sources:
        words, vectors, report = read_word2vec(src.path)
        reports.append(report)
        keep = [i for i, w in enumerate(words) if (src.lang, w) not in heldout]
        tables.append(
            pa.table({"word": [words[i] for i in keep], "lang": [src.lang] * len(keep), "vector": list(vectors[keep])})
        )
    static = pa.concat_tables(tables)
    StaticAlignObjective.check_targets(
        config.objectives.static,
        config.run_facts(),
        len(static["vector"][0]),
        AutoConfig.from_pretrained(model_path).hidden_size,
    )
    if len(static) < config.train.static_batch_size * config.train.num_workers:
        raise ConfigError(
            f"data.static_vectors: {len(static)} words, fewer than one batch per worker "
            f"(train.static_batch_size={config.train.static_batch_size} x train.num_workers="
            f"{config.train.num_workers}): give more vectors, or a smaller train.static_batch_size"
        )
    return static.take(np.random.default_rng(config.train.seed).permutation(len(static)))
