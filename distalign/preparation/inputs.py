"""The run's inputs, read, validated and counted on the driver before Ray resources are taken.

Produces the constraint table (evaluation words excluded, a subset of it if asked for), the
corpus stream (files listed and checked; the sentences themselves are streamed to the workers,
``distalign.data.corpus_stream``), the held-out BLI dictionaries, the model directory (the
offline ``tiny`` model is built here, its tokenizer trained on a sample of the run's text) and,
when an objective reads the static stream, its targets (``distalign.preparation.static_targets``), and
when one reads the parallel stream, its translation pairs (``data.parallel``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from distalign.config import ExperimentConfig
from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.corpus_stream import (
    CorpusStream,
    SkipLedger,
    list_corpus_files,
    read_rows,
    sample_texts,
    with_language_sampling,
)
from distalign.data.dictionary_checks import casing_note, check_against_corpora, corpus_words
from distalign.data.readers import (
    ReadReport,
    read_constraints,
    read_dictionary,
    read_parallel_files,
    read_parallel_tsv,
    require_rows,
)
from distalign.data.sampling import (
    exactly_per_pair,
    exclude_words,
    restrict_to_languages,
    subsample_constraints,
    words_of,
)
from distalign.data.sources import CorpusSource, DictionarySource, ParallelSource
from distalign.data.synthetic import SyntheticWorld, generate_world, world_in
from distalign.errors import ConfigError, Problems, require
from distalign.eval.selection import in_loop_settings
from distalign.model_store.locate import locate_model
from distalign.models.loading import build_tiny_model, max_model_positions
from distalign.preparation.cache import cached_directory, cached_json, content_key
from distalign.preparation.prepared import BLIPairs, PreparedData
from distalign.preparation.staging import staged_model
from distalign.preparation.static_targets import static_targets
from distalign.storage import node_local, s3_filesystem, storage_filesystem

log = logging.getLogger("distalign")
TOKENIZER_SAMPLE = 20000  # sentences per corpus source the tiny model's tokenizer is trained on
CORPUS_CHECK_SAMPLE = 2000  # sentences per corpus source the dictionaries' declared languages are checked against


def split_eval_dictionaries(
    sources: list[DictionarySource], languages: list[str], test_languages: list[str]
) -> tuple[list[DictionarySource], list[DictionarySource]]:
    """(validation, test) dictionaries: the test pairs are those between ``test_languages``; validation keeps
    the pairs of ``languages`` (all when empty) without any test language, so model selection never sees one."""
    test_set = set(test_languages)
    test = [src for src in sources if test_set and {src.lang1, src.lang2} <= test_set]
    validation = [
        src
        for src in sources
        if not {src.lang1, src.lang2} & test_set and (not languages or {src.lang1, src.lang2} <= set(languages))
    ]
    require(
        not test_set or bool(test),
        "eval.test_languages",
        f"no evaluation dictionary between {sorted(test_set)} (the pairs of data.eval_dictionaries or of the "
        f"synthetic world are {[f'{s.lang1}-{s.lang2}' for s in sources]})",
    )
    return validation, test


def read_bli_pairs(config: ExperimentConfig, src: DictionarySource, reports: list[ReadReport]) -> BLIPairs:
    table, report = read_dictionary(src.path, src.lang1, src.lang2)
    require_rows(report, "'src<TAB>tgt' pairs")
    reports.append(report)
    lang1, lang2 = table["lang1"][0].as_py(), table["lang2"][0].as_py()  # the codes read_dictionary made canonical
    return BLIPairs(
        lang1,
        lang2,
        table["word1"].to_pylist(),
        table["word2"].to_pylist(),
        in_loop_settings(config.eval, config.model, seed=config.train.seed).target_vocabulary(lang2, reports),
    )


def check_dictionaries_against_corpora(
    corpus: CorpusStream, dictionaries: list[tuple[str, pa.Table]], held_out: list[tuple[str, BLIPairs]]
) -> None:
    """Each dictionary's columns against a sample of each language's corpus (``check_against_corpora``): a pair
    declared the wrong way round, or for a language its words are not in, fails here, before its words decide what
    is excluded from training."""
    if not dictionaries and not held_out:
        return
    texts: dict[str, list[str]] = {}
    for source in corpus.sources:
        texts.setdefault(source.lang, []).extend(
            sample_texts(dataclasses.replace(corpus, sources=[source]), CORPUS_CHECK_SAMPLE)
        )
    words = corpus_words(texts)
    for label, table in dictionaries:
        check_against_corpora(
            label,
            table["lang1"][0].as_py(),
            table["lang2"][0].as_py(),
            table["word1"].to_pylist(),
            table["word2"].to_pylist(),
            words,
        )
    for path, pairs in held_out:
        check_against_corpora(str(path), pairs.lang1, pairs.lang2, pairs.src, pairs.tgt, words)


def prepare_data(config: ExperimentConfig, build_model: bool = True) -> PreparedData:
    """Read every input the config names (or generate the synthetic world), check and count bad rows,
    take evaluation words out of the training pairs, sample the pairs, shuffle the corpus, build the
    tiny model if asked for and the static targets if an objective reads the static stream.

    Every input is read before a problem is raised, and the problems are raised together (``ConfigErrors``).
    ``build_model=False`` (``distalign check``): the tiny model is not built (its ``model_path`` stays ``tiny``),
    nor are static targets derived from a model; everything else is read and checked as for a run."""
    problems = Problems()
    local_model = config.model.name_or_path  # the driver's copy of the model (the workers stage theirs, node_local)
    with problems.check():  # one short look at the Hub, or storage staged here: before the reads
        local_model = locate_model(config.model.name_or_path, "model.name_or_path", config.storage.endpoint_url)
    d = config.data
    if d.source == "synthetic":
        world = synthetic_world(config)
        constraint_files = [str(world.constraints)]
        corpora = [CorpusSource(str(path), lang) for lang, path in world.corpora.items()]
        validation_sources = [
            CorpusSource(str(path), lang)
            for lang, path in world.validation_corpora.items()
            if d.synthetic.validation_sentences
        ]
        eval_dicts = world.eval_dictionaries
    else:
        constraint_files = list(d.constraints)
        corpora = list(d.corpora)
        validation_sources = list(d.validation_corpora)
        eval_dicts = d.eval_dictionaries

    reports: list[ReadReport] = []
    tables = []
    for path in constraint_files:
        with problems.check():
            table, report = read_constraints(path)
            require_rows(report, "constraint pairs")
            tables.append(table)
            reports.append(report)
    dictionaries: list[tuple[str, pa.Table]] = []  # (where, table): checked against the corpora below
    for i, src in enumerate(d.dictionaries):
        with problems.check():
            table, report = read_dictionary(src.path, src.lang1, src.lang2)
            require_rows(report, "'src<TAB>tgt' pairs")
            tables.append(table)
            dictionaries.append((f"data.dictionaries[{i}] {src.path}", table))
            reports.append(report)
    constraints = pa.concat_tables(tables) if tables else CONSTRAINT_SCHEMA.empty_table()

    eval_pairs, test_pairs = [], []
    held_out: list[tuple[str, BLIPairs]] = []  # (path, pairs): checked against the corpora below
    with problems.check():
        validation, test = split_eval_dictionaries(eval_dicts, config.eval.languages, config.eval.test_languages)
        for sources, pairs in ((validation, eval_pairs), (test, test_pairs)):
            for src in sources:
                with problems.check():
                    pairs.append(read_bli_pairs(config, src, reports))
                    held_out.append((src.path, pairs[-1]))

    filesystem, listed, parallel, validation = None, [], None, None
    with problems.check():
        filesystem = corpus_filesystem(corpora, validation_sources, config.storage.endpoint_url)
        for i, src in enumerate(corpora):
            with problems.check():
                listed.append(
                    list_corpus_files(
                        src, f"data.corpora[{i}]", filesystem, functools.partial(cached_json, d.cache_dir)
                    )
                )
        if validation_sources:
            with problems.check():
                validation = validation_sentences(validation_sources, filesystem, reports)
    if "parallel" in config.objectives.streams():
        with problems.check():
            parallel = read_parallel(d.parallel, reports)
    problems.raise_any()  # what follows counts and samples what was read
    corpus = CorpusStream(with_language_sampling(listed, d.corpus_sampling_alpha), filesystem)
    with problems.check():
        check_dictionaries_against_corpora(corpus, dictionaries, held_out)

    heldout = {(p.lang1, w) for p in eval_pairs + test_pairs for w in p.src} | {
        (p.lang2, w) for p in eval_pairs + test_pairs for w in p.tgt
    }
    read = constraints  # every pair read: the tiny model's vocabulary covers them (below)
    constraints, excluded = exclude_words(constraints, heldout)
    if d.constraint_languages:
        constraints = restrict_to_languages(constraints, d.constraint_languages)
    if d.constraints_per_pair:
        with problems.check():
            constraints = exactly_per_pair(constraints, d.constraints_per_pair, config.train.seed)
    constraints = subsample_constraints(constraints, d.max_constraints, config.train.seed)  # shares p kept
    constraints = constraints.slice(0, round(d.dictionary_fraction * len(constraints)))  # already shuffled
    with problems.check():
        check_minimum_sizes(config, constraints)
    kept_parallel = parallel
    if parallel is not None:
        with problems.check():
            share = config.objectives.tlm.parallel_share
            if share is not None:
                kept_parallel = share_of_corpus(parallel, corpus, share, config.train.seed)
            require(
                len(kept_parallel) >= config.train.parallel_batch_size * config.train.num_workers,
                "data.parallel" if share is None else "objectives.tlm.parallel_share",
                f"{len(kept_parallel)} sentence pairs, fewer than one batch per worker (train.parallel_batch_size="
                f"{config.train.parallel_batch_size} x train.num_workers={config.train.num_workers}): give more "
                "pairs, or a smaller train.parallel_batch_size",
            )
    if d.corpus_sampling_alpha != 1:
        log.info(
            "corpus language sampling (alpha=%s): share of sentences kept per epoch %s",
            d.corpus_sampling_alpha,
            {s.lang: round(s.keep, 4) for s in corpus.sources},
        )

    problems.raise_any()  # before a model is built or read
    model_path = config.model.name_or_path  # what the workers load: a storage URI stays one (each node stages it)
    if model_path == "tiny" and (staged := staged_model(config)):
        model_path = local_model = node_local(staged, config.storage.endpoint_url)  # a resumed run: its vocabulary
    elif model_path == "tiny" and build_model:  # every word read: all subsets and language samples share the model
        vocabulary_words = sorted(w for _, w in words_of(read) | heldout)
        parallel_texts = (
            []
            if parallel is None
            else parallel["text1"].to_pylist()[:TOKENIZER_SAMPLE] + parallel["text2"].to_pylist()[:TOKENIZER_SAMPLE]
        )
        model_path = local_model = str(
            tiny_model(config, sample_texts(corpus, TOKENIZER_SAMPLE) + vocabulary_words + parallel_texts)
        )
    if model_path != "tiny":  # the built tiny model's positions are checked with the config (model.tiny.max_length)
        positions = max_model_positions(local_model)  # a longer sequence fails in the model's embeddings, every retry
        require(
            d.max_seq_length <= positions,
            "data.max_seq_length",
            f"{d.max_seq_length} is more than the {positions} tokens model.name_or_path={config.model.name_or_path} "
            f"takes (its max_position_embeddings, less RoBERTa/XLM-R's padding offset, or its tokenizer's "
            f"model_max_length)",
        )
    if (eval_pairs or test_pairs) and Path(local_model).is_dir():  # a Hub name: its tokenizer read when a run loads it
        note = casing_note(local_model, [(p.lang1, p.lang2, p.src + p.tgt) for p in eval_pairs + test_pairs])
        if note:
            log.warning("%s", note)
    static = None
    # its rows: read on the driver from the vectors, or derived from the model (not by a check)
    if "static" in config.objectives.streams() and model_path != "tiny" and (build_model or d.static_vectors):
        static = static_targets(config, local_model, corpus, constraints, heldout, reports)
    prepared = PreparedData(
        model_path,
        with_row_index(with_synset_index(constraints)),
        corpus,
        eval_pairs,
        reports,
        excluded,
        static if static is None else with_row_index(static),
        validation,
        test_pairs,
        kept_parallel if kept_parallel is None else with_row_index(kept_parallel),
        d.cache_dir,
    )
    if validation is not None:
        unknown = sorted(set(validation["lang"].to_pylist()) - set(prepared.languages))
        require(not unknown, "data.validation_corpora", f"languages {unknown} are in no training corpus or constraint")
    for report in reports:
        if report.malformed:
            log.warning("%s", report.summary())
    return prepared


def check_minimum_sizes(config: ExperimentConfig, constraints: pa.Table) -> None:
    """The training pairs a run needs once evaluation words are out: one constraint batch per worker when an
    objective reads the constraint stream, at least one pair when one trains on word pairs."""
    t = config.train
    require(
        "constraints" not in config.objectives.streams() or len(constraints) >= t.constraint_batch_size * t.num_workers,
        "data.constraints",
        f"only {len(constraints)} constraint pairs left after excluding evaluation words, fewer than one batch "
        f"per worker (at least train.constraint_batch_size={t.constraint_batch_size} x train.num_workers="
        f"{t.num_workers} = {t.constraint_batch_size * t.num_workers}): give more pairs outside the evaluation "
        "dictionaries, or a smaller train.constraint_batch_size",
    )
    if config.objectives.uses_word_pairs and len(constraints) == 0:
        readers = sorted(name for name, (plugin, _) in config.objectives.active().items() if plugin.uses_word_pairs)
        raise ConfigError(
            f"data.dictionaries: no dictionary pair left after excluding evaluation words, and "
            f"objectives {readers} train on them: give pairs outside the evaluation dictionaries, or "
            "set their weight to 0"
        )


def share_of_corpus(parallel: pa.Table, corpus: CorpusStream, share: float, seed: int) -> pa.Table:
    """``round(share x n)`` of the pairs, n the MLM corpus's sentences in the pairs' first language (ALIGN-MLM's
    "parallel data relative to MLM"), drawn with ``seed``; the tokenizer still learns from every pair read."""
    lang = parallel["lang1"][0].as_py()
    sentences = sum(
        len(rows["row"])
        for rows in read_rows(CorpusStream([src for src in corpus.sources if src.lang == lang], corpus.filesystem))
    )
    wanted = round(share * sentences)
    require(
        wanted <= len(parallel),
        "objectives.tlm.parallel_share",
        f"{share} of the {sentences} corpus sentences in {lang} is {wanted} pairs; data.parallel has {len(parallel)}",
    )
    return parallel.take(np.random.default_rng(seed).permutation(len(parallel))[:wanted])


def read_parallel(sources: list[ParallelSource], reports: list[ReadReport]) -> pa.Table:
    """Every source's translation pairs (text1, lang1, text2, lang2), bad rows counted in ``reports``."""
    tables = []
    for src in sources:
        table, report = (
            read_parallel_tsv(src.path, src.lang1, src.lang2)
            if src.path
            else read_parallel_files(src.path1, src.path2, src.lang1, src.lang2)
        )
        tables.append(table)
        reports.append(report)
    return pa.concat_tables(tables)


def validation_sentences(sources: list[CorpusSource], filesystem, reports: list[ReadReport]) -> pa.Table:
    """Every held-out sentence of ``sources`` (read whole, on the driver), malformed rows added to ``reports``."""
    listed = [list_corpus_files(src, f"data.validation_corpora[{i}]", filesystem) for i, src in enumerate(sources)]
    ledger = SkipLedger()
    batches = list(read_rows(CorpusStream(listed, filesystem), ledger=ledger))
    reports.extend(ledger.reports())
    table = (
        pa.Table.from_pydict({key: np.concatenate([b[key] for b in batches]) for key in batches[0]})
        if batches
        else None
    )
    require(table is not None, "data.validation_corpora", "holds no well-formed sentence")
    return table


def synthetic_world(config: ExperimentConfig) -> SyntheticWorld:
    """The config's synthetic world, generated once per settings and seed (``distalign.preparation.cache``)."""
    d, seed = config.data, config.train.seed
    settings = dataclasses.asdict(d.synthetic)
    if not settings["transfer_examples"]:  # left out at 0: worlds cached before the setting keep their key
        del settings["transfer_examples"]
    directory = cached_directory(
        d.cache_dir, "world", content_key(settings, seed), lambda out: generate_world(d.synthetic, out, seed=seed)
    )
    return world_in(directory, d.synthetic.languages)


def tiny_model(config: ExperimentConfig, texts: list[str]) -> Path:
    """The tiny model with a tokenizer trained on ``texts``, built once per texts, settings and seed: a run
    resumed (or a trial of the same study) gets the same vocabulary and initial weights."""
    tiny, seed = config.model.tiny, config.train.seed
    key = content_key(dataclasses.asdict(tiny), seed, hashlib.sha256("\n".join(texts).encode()).hexdigest())
    return cached_directory(
        config.data.cache_dir, "tiny-model", key, lambda out: build_tiny_model(out, texts, tiny, seed=seed)
    )


def corpus_filesystem(corpora: list[CorpusSource], validation: list[CorpusSource], endpoint_url: str):
    """The one filesystem the corpora and validation corpora are read with: None for local files; for ``s3://``
    ones the storage endpoint's filesystem when one is configured (MinIO, moto), else S3 with AWS's defaults."""
    named = [(f"data.corpora[{i}].path", c.path) for i, c in enumerate(corpora)] + [
        (f"data.validation_corpora[{i}].path", c.path) for i, c in enumerate(validation)
    ]
    remote = [(key, path) for key, path in named if "://" in path]
    if not remote:
        return None
    local = [(key, path) for key, path in named if "://" not in path]
    if local:
        raise ConfigError(
            f"{local[0][0]} {local[0][1]} is a local path and {remote[0][0]} {remote[0][1]} is not: a "
            "run reads all its corpora from one storage, so put them all on S3 or all on local (shared) "
            "disk"
        )
    return storage_filesystem(remote[0][1], endpoint_url) or s3_filesystem()


def with_synset_index(table: pa.Table) -> pa.Table:
    """Integer synset labels for the loss (dense over this table's synsets)."""
    index = pc.dictionary_encode(table["synset_id"]).combine_chunks().indices
    return table.append_column("synset_index", pc.cast(index, pa.int64()))


def with_row_index(table: pa.Table) -> pa.Table:
    """A ``row`` column: each row's index in the shuffled table (it seeds the row's data-side randomness)."""
    return table.append_column("row", pa.array(np.arange(len(table), dtype=np.int64)))
