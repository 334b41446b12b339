"""``distalign model fetch NAME --to PATH``: a model and its tokenizer copied to where a cluster's nodes read it.

``NAME`` is a Hub name (read through the Hugging Face cache with ``snapshot_download``: a cached model is not
downloaded again, and ``HF_HUB_OFFLINE=1`` reads the cache alone) or a local model directory. ``PATH`` is a
directory (a shared file system) or a storage URI (``s3://bucket/models/xlm-roberta-base``); the nodes then name
it as ``model.name_or_path`` and need no Hub (``distalign.model_store.locate`` stages a storage copy once per node).

Only what ``from_pretrained`` reads with PyTorch is copied: configuration, tokenizer files and one weights format
(safetensors where the model has them), not a repository's TensorFlow, Flax, ONNX or GGUF copies.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from distalign.errors import ConfigError, require_writable, s3_refusal

# Only light imports at the top: the CLI builds this command's parser for every `distalign --help`; the model
# modules (torch, transformers, pyarrow) are imported by the functions that use them.

# weights for frameworks other than PyTorch, and repository folders of exports: never read by from_pretrained here
OTHER_FORMATS = (
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.onnx",
    "*.onnx_data",
    "*.tflite",
    "*.gguf",
    "*.mlmodel",
    "onnx/*",
    "openvino/*",
    "coreml/*",
    ".*",
    "*/.*",
)
TORCH_PICKLES = ("pytorch_model*.bin",)  # the older PyTorch format: left out where safetensors hold the weights


@dataclass
class Fetched:
    source: str  # the local directory the files were read from (a Hub model's cached snapshot)
    destination: str
    files: list[tuple[str, int]]  # (path relative to the model directory, bytes), in copy order

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.files)


def model_files(directory: Path) -> list[str]:
    """The files of the model directory to copy, relative to it (module docstring); config.json last, so a copy
    with a config.json (what ``locate`` checks for) has all the other files already."""
    names = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())
    names = [n for n in names if not any(fnmatch.fnmatch(n, pattern) for pattern in OTHER_FORMATS)]
    if any(n.endswith(".safetensors") for n in names):
        names = [n for n in names if not any(fnmatch.fnmatch(n, pattern) for pattern in TORCH_PICKLES)]
    return sorted(names, key=lambda n: n == "config.json")


def hub_snapshot(name: str) -> Path:
    """The cached snapshot of Hub model ``name`` (downloaded into the cache first where it is not there; offline,
    the cached snapshot as it is)."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    from distalign.models.loading import check_hub_model

    check_hub_model(name, "model fetch NAME")  # cached, or the Hub reachable: one short look, else one line
    try:
        directory = Path(snapshot_download(name, ignore_patterns=list(OTHER_FORMATS + TORCH_PICKLES)))
        if not any(directory.glob("*.safetensors")):  # a model published in the older format only
            directory = Path(snapshot_download(name, ignore_patterns=list(OTHER_FORMATS)))
    except LocalEntryNotFoundError as err:  # offline, and the cache holds a partial snapshot only
        raise ConfigError(
            f"model fetch NAME: {name}: not wholly in the Hugging Face cache ({constants.HF_HUB_CACHE})"
            f" and HF_HUB_OFFLINE is set: fetch it where the Hub is reachable ({err})"
        ) from None
    return directory


def source_directory(name: str) -> Path:
    """The local directory holding model ``name``, checked whole (config.json, tokenizer, weights)."""
    from distalign.model_store.locate import is_storage_uri
    from distalign.models.loading import check_local_model, check_model_files, is_hub_name

    if is_storage_uri(name) or name == "tiny":
        raise ConfigError(f"model fetch NAME: {name} needs no copy: name it as model.name_or_path as it is")
    if is_hub_name(name):
        directory = hub_snapshot(name)
        check_model_files(str(directory), f"model fetch {name} (cached at {directory})")
        return directory
    check_local_model(name, "model fetch NAME")
    return Path(name).expanduser().resolve()


def require_new_directory(to: Path) -> None:
    if to.exists() and (not to.is_dir() or any(to.iterdir())):
        raise ConfigError(f"--to {to}: exists and is not an empty directory: give a new one (nothing is overwritten)")
    require_writable(to.parent, "--to")


def copy_to_directory(source: Path, names: list[str], to: Path) -> None:
    """Into a temporary sibling first, renamed into place whole: a half-copied model is never at ``to``."""
    to.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=to.parent, prefix=f".{to.name}."))
    try:
        for name in names:
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, partial / name)  # follows the Hub cache's links to its blobs
        if to.exists():
            to.rmdir()
        partial.rename(to)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


@contextlib.contextmanager
def storage_errors(to: str, endpoint_url: str) -> Iterator[str]:
    """pyarrow's errors of the storage at ``to`` as one ``ConfigError`` naming ``--to``; yields how to name it."""
    where = f"--to {to}" + (f" (endpoint {endpoint_url})" if endpoint_url else "")
    try:
        yield where
    except OSError as err:
        raise s3_refusal(err, where, "list, read and write objects under this path") or ConfigError(
            f"{where}: the storage cannot be written ({err}); check --endpoint-url (DISTALIGN_STORAGE_ENDPOINT), the "
            "bucket and the credentials"
        ) from None


def empty_storage_path(to: str, endpoint_url: str):
    """The filesystem and directory of the storage URI ``to``, which must hold nothing yet."""
    from distalign.storage import listed_files, storage_directory

    with storage_errors(to, endpoint_url) as where:
        fs, directory = storage_directory(to, endpoint_url)
        if listed_files(fs, directory):
            raise ConfigError(f"{where}: something is stored there already: give a new path (nothing is overwritten)")
    return fs, directory


def copy_to_storage(source: Path, names: list[str], to: str, endpoint_url: str, fs, directory: str) -> None:
    """Each file uploaded under ``to``; config.json last (``model_files``), so a reader never takes a part-uploaded
    copy for a model."""
    import pyarrow.fs

    with storage_errors(to, endpoint_url):
        for name in names:
            pyarrow.fs.copy_files(str(source / name), f"{directory}/{name}", pyarrow.fs.LocalFileSystem(), fs)


def fetch_model(name: str, to: str, endpoint_url: str = "") -> Fetched:
    """Copy model ``name`` (a Hub name or a local directory) with its tokenizer to the directory or storage URI
    ``to``; returns what was copied. ``to`` is checked first: a full destination is refused before the model is
    read or downloaded."""
    from distalign.model_store.locate import is_storage_uri

    if is_storage_uri(to):
        destination = to.rstrip("/")
        fs, directory = empty_storage_path(destination, endpoint_url)
    else:
        destination = str(Path(to).expanduser().resolve())
        require_new_directory(Path(destination))
    source = source_directory(name)
    names = model_files(source)
    if is_storage_uri(to):
        copy_to_storage(source, names, destination, endpoint_url, fs, directory)
    else:
        copy_to_directory(source, names, Path(destination))
    return Fetched(str(source), destination, [(n, (source / n).stat().st_size) for n in names])


def _fetch_command(args) -> int:
    fetched = fetch_model(args.name, args.to, args.endpoint_url)
    for name, size in fetched.files:
        print(f"  {name}  {size:,} bytes")
    print(
        f"[distalign] copied {len(fetched.files)} files, {fetched.bytes:,} bytes, of {args.name} "
        f"({fetched.source}) to {fetched.destination}"
    )
    print(f"use it in a config as:  model: {{name_or_path: {fetched.destination}}}")
    if "://" in fetched.destination:
        print(
            "(read through storage.endpoint_url / DISTALIGN_STORAGE_ENDPOINT and the AWS credentials of the "
            "nodes; each node stages it once into $DISTALIGN_CACHE)"
        )
    return 0


def register(sub, arguments: bool) -> None:
    """`distalign model fetch NAME --to PATH`"""
    model = sub.add_parser("model", help="copy a model with its tokenizer to a directory or bucket for the nodes")
    if not arguments:
        return
    commands = model.add_subparsers(dest="model_command", required=True)
    fetch = commands.add_parser(
        "fetch",
        description="Copy a model with its tokenizer to where a cluster's nodes read it: a directory (a "
        "shared file system) or a storage URI, which the nodes then name as model.name_or_path and need no Hub. A Hub "
        "name is read through the Hugging Face cache (a cached model is not downloaded again; HF_HUB_OFFLINE=1 reads "
        "the cache alone). Only what from_pretrained reads with PyTorch is copied: configuration, tokenizer files "
        "and one weights format (safetensors where there are some). Nothing is overwritten.",
        help="copy a Hub model (through the Hugging Face cache; HF_HUB_OFFLINE=1 reads the cache only) or a local "
        "model directory, with its tokenizer, to a directory or s3:// URI",
    )
    fetch.add_argument("name", help="Hub name (xlm-roberta-base, org/model) or local model directory")
    fetch.add_argument("--to", required=True, help="a new directory, or a storage URI (s3://bucket/models/NAME)")
    fetch.add_argument(
        "--endpoint-url",
        default=os.environ.get("DISTALIGN_STORAGE_ENDPOINT", ""),
        help="S3-compatible endpoint (MinIO) for an s3:// --to (default $DISTALIGN_STORAGE_ENDPOINT)",
    )
    fetch.set_defaults(func=_fetch_command)
