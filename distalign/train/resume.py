"""Reading the checkpoint a run resumes from: each rank reads only what it loads.

A ZeRO checkpoint of XLM-R large holds ~9 GB: the exported model and the shared state (rank 0's files) and one
optimizer shard per rank. A rank downloads, and checksums while downloading, the shared files and its own files
(``distalign.checkpoint.private_rank``: its random state, its ZeRO shards), never another rank's. The shared files
come down once per node: the node's other ranks wait for the first one's copy (``distalign.storage.stage_once``),
and a worker group restarted on the same node finds its files there. A checkpoint on a local or shared disk is read
in place, each rank checksumming what it reads.

Which checkpoint: the newest that every rank finds complete (every rank's manifest, every file they list at its size,
from one listing) and uncorrupted (the checksums of what this rank read). A rank finding its own shard corrupted
makes all ranks skip that checkpoint: they agree before anything is loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.fs
import ray.train
import torch
import torch.distributed as dist

from distalign import collectives
from distalign.checkpoint import checksum_problem, crc32, manifest_files, private_rank
from distalign.storage import checkpoint_uri, listed_files, node_cache_dir, stage_once

log = logging.getLogger("distalign")
CHUNK = 8 * 2**20  # bytes a read asks storage for
READ_THREADS = 8  # files read at once (a ZeRO checkpoint's shared part is a few large files and many small ones)


class Unreadable(Exception):
    """A checkpoint file read from storage is not what its manifest lists."""


def read_files(fs: pyarrow.fs.FileSystem, root: str, files: dict[str, dict], into: Path) -> None:
    """Copy ``files`` (name -> what the manifest lists) of the checkpoint at ``root`` into ``into``, checking each
    one's size and checksum as it streams past; ``Unreadable`` names the first that differs."""

    def copy(name: str) -> None:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        crc, size = 0, 0
        with fs.open_input_stream(f"{root}/{name}") as source, open(target, "wb") as out:
            while chunk := source.read(CHUNK):
                crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                out.write(chunk)
        listed = files[name]
        if size != listed["size"]:
            raise Unreadable(f"{name} ({size} of {listed['size']} bytes)")
        if problem := checksum_problem(name, listed, crc):
            raise Unreadable(problem)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        list(pool.map(copy, sorted(files)))


def link_files(source: Path, names: Iterable[str], into: Path) -> None:
    """Hard links in ``into`` to the files ``names`` of ``source`` (same filesystem: no bytes copied)."""
    for name in names:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        os.link(source / name, into / name)


def staged_checkpoint(checkpoint: ray.train.Checkpoint, rank: int) -> tuple[Path | None, list[str]]:
    """This rank's readable copy of ``checkpoint`` (module docstring) and its problems: (directory, []) when it
    is complete and what this rank read matches its checksums, else (None, what is wrong)."""
    fs, root = checkpoint.filesystem, checkpoint.path.rstrip("/")
    assert fs is not None  # a checkpoint Ray Train or the run's store hands over has its filesystem
    stored = {name: size for name, size, _ in listed_files(fs, root)}

    manifests: dict[str, str] = {}  # read by every rank (a few KB each), to see the checkpoint is complete

    def read_manifest(name: str) -> str | None:
        if name not in stored:
            return None
        with fs.open_input_stream(f"{root}/{name}") as stream:
            manifests[name] = stream.read().decode()
        return manifests[name]

    files, problems = manifest_files(read_manifest, stored)
    if problems:
        return None, problems
    shared = {name: listed for name, listed in files.items() if private_rank(name) is None}
    own = {name: listed for name, listed in files.items() if private_rank(name) == rank}
    if isinstance(fs, pyarrow.fs.LocalFileSystem):
        problems = [
            problem
            for name, listed in {**shared, **own}.items()
            if (problem := checksum_problem(name, listed, crc32(Path(root) / name)))
        ]
        return (None if problems else Path(root)), problems
    # keyed by where the checkpoint is and what it holds: a checkpoint written again under the same name is another
    key = hashlib.sha1(json.dumps([fs.type_name, root, files], sort_keys=True).encode()).hexdigest()[:16]
    base = staging_root() / key

    def read_shared(into: Path) -> None:
        for name, text in manifests.items():
            (into / name).write_text(text)
        read_files(fs, root, {name: listed for name, listed in shared.items() if name not in manifests}, into)

    try:
        shared_copy, _ = stage_once(base / "shared", read_shared)
        own_copy, _ = stage_once(base / f"rank{rank}", lambda into: read_files(fs, root, own, into))
    except Unreadable as problem:
        return None, [str(problem)]

    def link_both(into: Path) -> None:
        link_files(shared_copy, shared, into)
        link_files(own_copy, own, into)

    view, _ = stage_once(base / f"view{rank}", link_both)
    return view, []


def staging_root() -> Path:
    """Where this node keeps the checkpoints its ranks resume from, while they load them."""
    return node_cache_dir() / "checkpoints"


def all_agree(ok: bool) -> bool:
    """Whether ``ok`` holds on every rank (a collective: all ranks call it)."""
    disagree = torch.tensor([0 if ok else 1])  # host-side: all_reduce_sum moves it to the group's device
    return int(collectives.all_reduce_sum(disagree)) == 0


def resume_directory(checkpoints: Iterable[ray.train.Checkpoint], rank: int) -> Path | None:
    """This rank's copy of the newest of the run's ``checkpoints`` (newest first) that every rank can read
    (module docstring); None for a fresh start. All ranks call it with the same checkpoints. A checkpoint cut short
    while it was being written (a lost node, a killed upload, files deleted) or corrupted in storage is skipped
    with a warning."""
    newest = None
    for checkpoint in checkpoints:
        newest = newest or checkpoint
        directory, problems = staged_checkpoint(checkpoint, rank)
        if problems:
            log.warning(
                "rank %d: checkpoint %s is incomplete or corrupted (%s): resuming from the one before it",
                rank,
                checkpoint_uri(checkpoint),
                ", ".join(problems[:5]) + (f" and {len(problems) - 5} more" if len(problems) > 5 else ""),
            )
        if all_agree(not problems):
            return directory
    if newest is not None:
        raise RuntimeError(f"no complete checkpoint to resume from beside {checkpoint_uri(newest)}")
    return None


@contextlib.contextmanager
def resumed_from(checkpoints: Iterable[ray.train.Checkpoint], rank: int, local_rank: int) -> Iterator[Path | None]:
    """``resume_directory`` for the block that loads it; afterwards, once every rank has loaded its files, the
    node's first rank removes the node's copies (a checkpoint read in place is left alone)."""
    directory = resume_directory(checkpoints, rank)
    yield directory
    if directory is None or not directory.is_relative_to(staging_root()):
        return
    if collectives.distributed():
        dist.barrier()
    if local_rank == 0:
        shutil.rmtree(directory.parent, ignore_errors=True)
