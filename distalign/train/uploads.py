"""Checkpoint uploads off the training thread.

A rank writes its part of a checkpoint into a local directory and trains on, while a background thread writes the
directory's manifest (its checksums read every file again) and uploads it; the directory is removed once it is
uploaded. One upload at a time: the next checkpoint waits for the previous upload before it is written, so a node's
disk holds at most two checkpoints in flight. A failed upload is logged when it fails and raised on the training
thread at the next checkpoint or when training ends (``wait``), naming the local directory, where its files are
kept; raised from the storage's own error (an ``OSError``), it counts as an infrastructure failure a restart may cure
(``distalign.train.failures``): the restarted run resumes from the last checkpoint that was uploaded.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from distalign.checkpoint import write_manifest

log = logging.getLogger("distalign")
T = TypeVar("T")


class UploadFailed(RuntimeError):
    """A checkpoint's upload failed; its files are kept in the local directory the message names."""


class CheckpointUploads:
    """One rank's checkpoint uploads, one at a time (module docstring)."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size
        self._idle = threading.Event()
        self._idle.set()
        self._failure: UploadFailed | None = None

    def new_directory(self) -> Path:
        """An empty local directory to write the next checkpoint into, once the previous upload is done."""
        self.wait()
        return Path(tempfile.mkdtemp(prefix=f"distalign-checkpoint-{self.rank}-"))

    def begin(self) -> None:
        """Mark an upload under way (``upload`` will run in another thread: Ray Train's)."""
        self._idle.clear()

    def upload(self, directory: Path, send: Callable[[], T]) -> T:
        """In the upload thread: write ``directory``'s manifest, ``send()`` it, then remove it; on failure keep it and
        record the failure for ``wait``. Returns what ``send`` returned."""
        try:
            write_manifest(directory, self.rank, self.world_size)  # last into the directory: it vouches for the rest
            sent = send()
            shutil.rmtree(directory, ignore_errors=True)
            self._failure = None  # a retry (Ray Train retries an upload that failed on a throttled request) made it
            return sent
        except Exception as error:
            self._failure = UploadFailed(
                f"rank {self.rank}: the checkpoint upload failed ({type(error).__name__}: "
                f"{error}); its files are kept in {directory}"
            )
            log.error("%s", self._failure)
            raise self._failure from error
        finally:
            self._idle.set()

    def start(self, directory: Path, send: Callable[[], object]) -> None:
        """``upload`` in a thread of this object's own."""
        self.begin()

        def run() -> None:
            try:
                self.upload(directory, send)
            except UploadFailed:
                pass  # logged, and raised on the training thread by ``wait``

        threading.Thread(target=run, name=f"checkpoint-upload-{self.rank}").start()

    def wait(self) -> None:
        """Wait for the upload under way; raise ``UploadFailed`` if the last one failed."""
        self._idle.wait()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
