"""Where checkpoints and staged inputs live: a local directory or S3-compatible object storage."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow.fs

from distalign.errors import ConfigError, require_writable, s3_refusal

log = logging.getLogger("distalign")
STAGED_MARKER = "_STAGED"  # written last into a staged directory: its presence means the copy is complete
# Retries of a failed S3 request (an HTTP 5xx, throttling, a timeout, a dropped connection) after the AWS SDK's
# default backoff, 25 ms doubling: about 25 s of outage ridden out. (pyarrow's default, 3 tries in all, failed
# a checkpoint upload or skipped a corpus file on a burst of three 500s.)
S3_RETRIES = 10


def s3_filesystem(endpoint_url: str = "", attempts: int | None = None, **options) -> pyarrow.fs.S3FileSystem:
    """S3 with ``attempts`` tries of a request (default ``S3_RETRIES``, read at the call): at ``endpoint_url``
    (MinIO, moto) with the environment's credentials, or AWS with its own resolution of them (""); ``options``: more
    of ``S3FileSystem``'s."""
    explicit = {}
    if endpoint_url:  # credentials are read here, on the driver, and travel with the filesystem to the workers
        explicit = dict(
            endpoint_override=endpoint_url,
            region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
            secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
        )
    retries = pyarrow.fs.AwsDefaultS3RetryStrategy(max_attempts=S3_RETRIES if attempts is None else attempts)
    return pyarrow.fs.S3FileSystem(retry_strategy=retries, **explicit, **options)


def check_storage(path: str, endpoint_url: str, timeout_s: float = 5.0) -> None:
    """Fail at once, naming ``storage.path``, where checkpoints could not be written: a local path under a file or
    in a read-only folder; an S3 endpoint that does not answer, a bucket that does not exist, credentials it
    refuses, or a key that may not write and delete there (an empty object written under ``path`` and deleted:
    S3 has no other way to ask). One try with short timeouts, where the run's own filesystem retries for half a
    minute."""
    if "://" not in path:
        require_writable(Path(path), "storage.path")
        return
    inner = path.split("://", 1)[1].rstrip("/")
    bucket = inner.split("/", 1)[0]
    where = f"storage.path {path}" + (f" (endpoint {endpoint_url})" if endpoint_url else "")
    needs = "list the bucket, and write and delete objects under this path"
    try:
        probe = s3_filesystem(endpoint_url, attempts=1, connect_timeout=timeout_s, request_timeout=timeout_s)
        found = probe.get_file_info(bucket).type != pyarrow.fs.FileType.NotFound
        if found:
            written = f"{inner}/.distalign-write-check-{uuid.uuid4().hex}"
            with probe.open_output_stream(written) as out:
                out.write(b"")
            probe.delete_file(written)
    except OSError as err:
        raise s3_refusal(err, where, needs) or ConfigError(
            f"{where}: the storage cannot be reached ({err}); check storage.endpoint_url"
        ) from None
    if not found:
        raise ConfigError(f"{where}: bucket '{bucket}' does not exist: create it, or name an existing one")


def _at_endpoint(path: str, endpoint_url: str) -> bool:
    """Whether ``path`` is read through the configured endpoint (MinIO, moto): an ``s3://`` path only, so a local
    path stays local even where the cluster sets an endpoint (DISTALIGN_STORAGE_ENDPOINT) for its S3 data."""
    return bool(endpoint_url) and path.startswith("s3://")


def storage_filesystem(path: str, endpoint_url: str) -> pyarrow.fs.FileSystem | None:
    """The configured endpoint's S3 filesystem for ``path`` (``_at_endpoint``); else None, Ray's default."""
    return s3_filesystem(endpoint_url) if _at_endpoint(path, endpoint_url) else None


def ray_storage_path(path: str, endpoint_url: str) -> str:
    """With an explicit filesystem Ray wants the path inside it (bucket/prefix), not a URI."""
    return path.split("://", 1)[1] if _at_endpoint(path, endpoint_url) else path


def run_location(storage_path: str, endpoint_url: str, run_name: str) -> tuple[pyarrow.fs.FileSystem, str, str]:
    """Where a run's checkpoints live (``<storage.path>/<run.name>``, Ray Train's layout): the filesystem, the
    directory inside it, and the scheme that makes a path in it a URI ("" when local, else ``s3://`` and the like)."""
    base = f"{storage_path.rstrip('/')}/{run_name}"
    fs = storage_filesystem(base, endpoint_url)
    if fs is not None:
        return fs, ray_storage_path(base, endpoint_url), "s3://"
    # a local path, or a URI whose scheme names the filesystem (s3://, gs://)
    fs, root = pyarrow.fs.FileSystem.from_uri(base if "://" in base else str(Path(base).resolve()))
    return fs, root, base.split("://", 1)[0] + "://" if "://" in base else ""


def checkpoint_uri(checkpoint) -> str:
    """A ``ray.train.Checkpoint``'s location as a local path or an ``s3://`` URI."""
    scheme = "" if isinstance(checkpoint.filesystem, pyarrow.fs.LocalFileSystem) else "s3://"
    return scheme + checkpoint.path


def node_cache_dir() -> Path:
    """This node's cache of staged inputs (``$DISTALIGN_CACHE``, default ``/tmp/distalign-cache``)."""
    return Path(os.environ.get("DISTALIGN_CACHE", Path(tempfile.gettempdir()) / "distalign-cache"))


def storage_directory(
    path: str, endpoint_url: str = "", attempts: int | None = None, **options
) -> tuple[pyarrow.fs.FileSystem, str]:
    """The filesystem holding the storage URI ``path`` (the configured endpoint's for ``s3://``, with ``attempts``
    and ``options`` as ``s3_filesystem`` takes them; else the one the scheme names: AWS's S3, ``gs://``,
    ``hdfs://``) and the directory inside it."""
    if _at_endpoint(path, endpoint_url):
        return s3_filesystem(endpoint_url, attempts, **options), ray_storage_path(path, endpoint_url)
    return pyarrow.fs.FileSystem.from_uri(path)


def listed_files(fs: pyarrow.fs.FileSystem, directory: str) -> list[tuple[str, int, int]]:
    """Every file under ``directory``: (path relative to it, size, modification time in ns), sorted."""
    infos = fs.get_file_info(pyarrow.fs.FileSelector(directory, recursive=True, allow_not_found=True))
    return sorted(
        (info.path[len(directory.rstrip("/")) + 1 :], info.size, info.mtime_ns or 0)
        for info in infos
        if info.type == pyarrow.fs.FileType.File
    )


def node_local(path: str, endpoint_url: str = "") -> str:
    """A local directory holding ``path``: itself when local (or a hub name), else this node's copy of the storage
    directory ``path`` (``s3://`` and the other URIs ``storage_directory`` reads). Downloaded once per node: the copy
    is keyed by the path and its objects' sizes and modification times (an object written again is a new copy), a
    file lock makes the node's other processes wait for the first one's download instead of repeating it, and the
    copy is renamed into place whole, so a half-copied directory is never read."""
    if "://" not in path:
        return path
    fs, directory = storage_directory(path, endpoint_url)
    files = listed_files(fs, directory)
    if not files:
        raise FileNotFoundError(f"{path}: nothing stored there (no object under this prefix)")
    key = hashlib.sha1(json.dumps([endpoint_url, path, files]).encode()).hexdigest()[:16]

    def copy(partial: Path) -> None:
        pyarrow.fs.copy_files(directory, str(partial), fs, pyarrow.fs.LocalFileSystem())
        changed = [
            name for name, size, _ in files if not (partial / name).is_file() or (partial / name).stat().st_size != size
        ]
        if changed:  # written to while it was copied: the next try keys the new contents
            raise OSError(f"{path}: {changed[:3]} changed while being copied to this node; try again")

    target, fresh = stage_once(node_cache_dir() / key, copy)
    if fresh:
        log.info(
            "staged %s on this node: %d files, %d bytes in %s", path, len(files), sum(s for _, s, _ in files), target
        )
    return str(target)


def stage_once(target: Path, fill: Callable[[Path], None]) -> tuple[Path, bool]:
    """The directory ``target`` on this node, filled by ``fill(directory)`` once: a file lock makes the node's other
    processes wait for the first one's filling instead of repeating it, and the directory is filled under another
    name and renamed into place whole, so a half-filled one is never read (a failed ``fill`` leaves nothing).
    Returns the directory and whether this call filled it."""
    from filelock import FileLock  # here: huggingface_hub's dependency, needed only where something is staged

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock"):
        if target.is_dir():
            return target, False
        partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=target.name + "."))
        try:
            fill(partial)
            partial.rename(target)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return target, True
