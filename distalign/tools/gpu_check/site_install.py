"""The installer on the GPU machine: the carried site archive (``make wheelhouse``) unpacked into a folder that goes
on PYTHONPATH after the project and before the image's own packages, then byte-compiled.

No network and no pip: the archive holds the installed packages (``pip install --target`` here, stripped to travel).
Byte-compiling here, on all CPUs, keeps the archive small and spares every command and Ray worker the compilation
of what it imports (without it, start-up imports took 16-19 s on the first GPU run).
"""

from __future__ import annotations

import compileall
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path


def install_site(archive: Path, site: Path) -> dict:
    """Unpack ``archive`` into ``site`` (emptied first) and byte-compile it; returns what it did and how long."""
    started = time.perf_counter()
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        if sys.version_info >= (3, 12):
            tar.extractall(site, filter="data")
        else:
            tar.extractall(site)
    unpacked = time.perf_counter()
    # a few packages ship files that do not compile (test data, other Pythons' syntax): they are skipped
    compiled = compileall.compile_dir(site, quiet=2, workers=os.cpu_count() or 1)
    done = time.perf_counter()
    megabytes = sum(f.stat().st_size for f in site.rglob("*") if f.is_file()) / 2**20
    return {
        "archive": str(archive),
        "site": str(site),
        "unpack_s": round(unpacked - started, 1),
        "compile_s": round(done - unpacked, 1),
        "all_compiled": bool(compiled),
        "megabytes": round(megabytes),
    }
