"""Staging the run's prepared inputs where every node can read them.

With ``storage.path`` on S3 the nodes share nothing but the bucket, so what the driver prepared on
its own disk (the tiny model and its tokenizer, generated corpora, the user's local corpus files)
is copied to ``<storage.path>/<run.name>/inputs/`` and the run reads it from there: workers and
Ray Data tasks through a per-node cache (``distalign.storage.node_local``), corpora straight from
S3 with Ray Data's readers. The driver's copy under ``data.output_dir`` (generated files only) is
then removed. Constraint pairs, static targets and evaluation pairs travel in memory with the
plan and the Ray datasets. With a local (shared) ``storage.path`` nothing needs staging.

A staged model is complete once its ``_STAGED`` marker exists; a resumed run reuses it instead of
building or uploading it again, so it keeps the tokenizer its checkpoints were trained with.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import pyarrow.fs

from distalign.config import ExperimentConfig
from distalign.data.corpus_stream import CorpusStream
from distalign.preparation.prepared import PreparedData
from distalign.storage import STAGED_MARKER, storage_filesystem

log = logging.getLogger("distalign")


def inputs_uri(config: ExperimentConfig) -> str:
    return f"{config.storage.path.rstrip('/')}/{config.run.name}/inputs"


def _s3(config: ExperimentConfig) -> tuple[pyarrow.fs.FileSystem, str]:
    """The storage filesystem and the inputs prefix inside it (``bucket/prefix/run/inputs``)."""
    fs = (
        storage_filesystem(config.storage.path, config.storage.endpoint_url)
        or pyarrow.fs.FileSystem.from_uri(config.storage.path)[0]
    )
    return fs, inputs_uri(config).split("://", 1)[1]


def staged_model(config: ExperimentConfig) -> str:
    """The URI of this run's staged model if a complete one exists, else ""."""
    if not config.storage_is_remote:
        return ""
    fs, prefix = _s3(config)
    marker = fs.get_file_info(f"{prefix}/model/{STAGED_MARKER}")
    return f"{inputs_uri(config)}/model" if marker.type == pyarrow.fs.FileType.File else ""


def stage_inputs(prepared: PreparedData, config: ExperimentConfig) -> PreparedData:
    """``prepared`` with its local model directory and local corpus files replaced by staged copies
    (module docstring); unchanged when the storage is local."""
    if not config.storage_is_remote:
        return prepared
    fs, prefix = _s3(config)
    local = pyarrow.fs.LocalFileSystem()
    model_path = prepared.model_path
    if Path(model_path).is_dir():
        model_path = staged_model(config)
        if not model_path:
            pyarrow.fs.copy_files(prepared.model_path, f"{prefix}/model", local, fs)
            with fs.open_output_stream(f"{prefix}/model/{STAGED_MARKER}") as f:
                f.write(b"complete\n")
            model_path = f"{inputs_uri(config)}/model"
            log.info("staged the model %s at %s", prepared.model_path, model_path)
    corpus = prepared.corpus
    if corpus.filesystem is None and any(source.paths for source in corpus.sources):  # local files
        sources = []
        for i, source in enumerate(corpus.sources):  # Hugging Face datasets have no paths: loaded by name
            staged = [f"{prefix}/corpus/{i}/{j:05d}{Path(path).suffix}" for j, path in enumerate(source.paths)]
            for path, target in zip(source.paths, staged):
                pyarrow.fs.copy_files(path, target, local, fs)
            sources.append(dataclasses.replace(source, paths=staged))
        corpus = CorpusStream(sources, fs, corpus.ledger)
        log.info("staged %d corpus files under %s/corpus", sum(len(s.paths) for s in sources), inputs_uri(config))
    output_dir = Path(config.data.output_dir)
    if output_dir.is_dir():  # generated files only: the user's own inputs live elsewhere
        shutil.rmtree(output_dir)
        log.info("removed the driver's copy %s: the run reads its inputs from %s", output_dir, inputs_uri(config))
    return dataclasses.replace(prepared, model_path=model_path, corpus=corpus)
