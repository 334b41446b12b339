"""Where checkpoints live: a local directory or S3-compatible object storage, as Ray Train wants them."""

from __future__ import annotations

import os

import pyarrow.fs


def storage_filesystem(endpoint_url: str) -> pyarrow.fs.FileSystem | None:
    """An explicit S3 filesystem when an endpoint is configured (MinIO, moto); else Ray's default."""
    if not endpoint_url:
        return None
    # Credentials are read here, on the driver, and travel with the filesystem to the workers.
    return pyarrow.fs.S3FileSystem(
        endpoint_override=endpoint_url,
        region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
        secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
    )


def ray_storage_path(path: str, endpoint_url: str) -> str:
    """With an explicit filesystem Ray wants the path inside it (bucket/prefix), not a URI."""
    return path.split("://", 1)[1] if endpoint_url and "://" in path else path


def checkpoint_uri(checkpoint) -> str:
    """A ``ray.train.Checkpoint``'s location as a local path or an ``s3://`` URI."""
    scheme = "" if isinstance(checkpoint.filesystem, pyarrow.fs.LocalFileSystem) else "s3://"
    return scheme + checkpoint.path
