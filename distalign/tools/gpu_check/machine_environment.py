"""The GPU check's first step: Python, torch and the device, the packages the project imports and where each comes
from (the base image or the carried site folder), requirements of the carried packages that the environment does not
meet, and how long the heavy imports take (start-up of every command).

    python -m distalign.tools.gpu_check.machine_environment OUT.json
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import os
import sys
import time
from pathlib import Path

SITE_ENV = "DISTALIGN_GPU_CHECK_SITE"  # the carried site folder, set by the check when it unpacked one
# what the project imports on every command or training worker, timed in this order (each after the ones before)
IMPORTS = (
    "torch",
    "transformers",
    "ray",
    "ray.train",
    "ray.tune",
    "ray.data",
    "deepspeed",
    "mlflow",
    "datasets",
    "distalign.cli",
)
SHOWN = (
    "torch",
    "transformers",
    "tokenizers",
    "accelerate",
    "numpy",
    "pyarrow",
    "pandas",
    "scipy",
    "scikit-learn",
    "ray",
    "deepspeed",
    "mlflow",
    "datasets",
    "pydantic",
    "optuna",
    "wordfreq",
    "lang2vec",
    "nvidia-ml-py",
)


def device() -> dict:
    import torch

    found: dict[str, object] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        found |= {
            "device": torch.cuda.get_device_name(0),
            "devices": torch.cuda.device_count(),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
            "memory_gib": round(props.total_memory / 2**30, 1),
            "bf16": torch.cuda.is_bf16_supported(),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        }
    return found


def packages(site: str) -> dict[str, str]:
    """name -> "version (site)" or "version (base)" or "missing"."""
    found = {}
    for name in SHOWN:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            found[name] = "missing"
            continue
        where = "site" if site and str(dist.locate_file("")).startswith(site) else "base"
        found[name] = f"{dist.version} ({where})"
    return found


def unmet_requirements(site: str) -> list[str]:
    """Requirements of the carried distributions that the environment does not satisfy (pip check, for them)."""
    from packaging.requirements import Requirement

    if not site:
        return []
    unmet = []
    for dist in md.distributions(path=[site]):
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                version = md.version(req.name)
            except md.PackageNotFoundError:
                unmet.append(f"{dist.metadata['Name']} needs {req}: not installed")
                continue
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                unmet.append(f"{dist.metadata['Name']} needs {req}: {version} installed")
    return sorted(set(unmet))


def import_seconds() -> dict[str, float | str]:
    seconds: dict[str, float | str] = {}
    for name in IMPORTS:
        start = time.perf_counter()
        try:
            importlib.import_module(name)
            seconds[name] = round(time.perf_counter() - start, 2)
        except Exception as err:  # the report names what does not import
            seconds[name] = f"{type(err).__name__}: {err}"[:300]
    return seconds


def main(out: str) -> int:
    site = os.environ.get(SITE_ENV, "")
    found = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cpus": os.cpu_count(),
        "site": site,
        "import_s": import_seconds(),
        **device(),
        "packages": packages(site),
        "unmet_requirements": unmet_requirements(site),
    }
    Path(out).write_text(json.dumps(found, indent=1))
    print(json.dumps(found, indent=1))
    return 0 if all(isinstance(v, float) for v in found["import_s"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
