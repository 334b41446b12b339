"""``make wheelhouse`` and the GPU check's installer, end to end: the wheelhouse built for CPython 3.12, its site
archive installed with the network blocked into a Python 3.12 that holds only the GPU image's base packages, a
real training run (Ray, DeepSpeed ZeRO-2, MLflow) there, then ``make gpu-check``'s test collection (``-m gpu``) and
its whole CPU rehearsal (``python -m distalign.tools.gpu_check --cpu``) in those packages, not the dev venv's.
Downloads (the first time, the stand-in image too: torch's CUDA build from PyPI, several GB) and takes minutes:
marker ``wheelhouse``, run by ``make test-wheelhouse`` only.

The stand-in image is a venv of Python 3.12 (``.wheelhouse/image-py312``) with ``IMAGE_STAND_IN`` (the image's versions
where the registry has them; its torch is PyPI's 2.11.0, the CUDA build, which runs on CPU here);
``$DISTALIGN_IMAGE_PYTHON`` names another.
``$DISTALIGN_TATOEBA``: the bench corpus's source where ../shared/data is not beside the checkout.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import REPO, SHARED_DATA, SMALL

from distalign.tools.gpu_check.wheelhouse import CARRY_LIMIT_MIB, find_python, megabytes

pytestmark = pytest.mark.wheelhouse

WHEELS = REPO / ".wheelhouse"  # reused between runs: only what is missing is downloaded
IMAGE_STAND_IN = (
    "torch==2.11.0",
    "transformers==5.17.0",
    "accelerate==1.15.0",
    "pyarrow==25.0.1",
    "tokenizers",
    "safetensors",
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "psutil",
    "pytest",
    "matplotlib",
    "pyyaml",
    "requests",
    "aiohttp",
    "grpcio",
    "protobuf",
    "jinja2",
    "filelock",
    "fsspec",
    "huggingface-hub",
    "packaging",
    "pillow",
    "regex",
    "tqdm",
    "nvidia-ml-py",
    "click",
    "cloudpickle",
    "msgpack",
    "prometheus-client",
    "werkzeug",
    "typing-extensions",
    "six",
    "python-dateutil<3",
    "einops",
    "ninja",
    "py-cpuinfo",
    "xxhash",
    "zipp",
    "wrapt",
)  # the image's, needed by the carried
# the bench corpus's source: ../shared beside the checkout (a worktree elsewhere names it)
TATOEBA = os.environ.get("DISTALIGN_TATOEBA", str(SHARED_DATA / "eval" / "tatoeba"))
OFFLINE = {
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": "",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HF_HUB_OFFLINE": "1",
    "NO_PROXY": "127.0.0.1,localhost",
}


def image_python() -> str:
    """The stand-in image's interpreter, made once (``.wheelhouse/image-py312``)."""
    if os.environ.get("DISTALIGN_IMAGE_PYTHON"):
        return os.environ["DISTALIGN_IMAGE_PYTHON"]
    venv = WHEELS / "image-py312"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([find_python("3.12"), "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *IMAGE_STAND_IN], check=True)  # quick once there
    return str(python)


def test_the_wheelhouse_installs_offline_and_the_gpu_check_rehearses_there(tmp_path):
    python = image_python()
    started = time.monotonic()
    carry = tmp_path / "carry"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "distalign.tools.gpu_check.wheelhouse",
            "--python-version",
            "3.12",
            "--wheels",
            str(WHEELS),
            "--carry",
            str(carry),
            "--tatoeba",
            TATOEBA,
        ],
        cwd=REPO,
        check=True,
    )
    built = time.monotonic()
    assert megabytes(carry) <= CARRY_LIMIT_MIB and (carry / "bench_corpus.txt").stat().st_size > 1_000_000

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MLFLOW_TRACKING_URI")}
    env |= OFFLINE | {
        "DISTALIGN_HOME": str(tmp_path / "home"),
        "DISTALIGN_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": str(REPO),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    site = tmp_path / "site"
    install = subprocess.run(
        [
            python,
            "-c",
            "import json, sys; from pathlib import Path; from distalign.tools.gpu_check.site_install import "
            "install_site; print(json.dumps(install_site(Path(sys.argv[1]), Path(sys.argv[2]))))",
            str(carry / "site.tar.xz"),
            str(site),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    installed = json.loads(install.stdout)
    assert list((site / "ray").glob("__pycache__/__init__.cpython-312.pyc")), "the site is byte-compiled"

    env |= {"PYTHONPATH": f"{REPO}:{site}", "DISTALIGN_GPU_CHECK_SITE": str(site)}
    checked = subprocess.run(
        [python, "-m", "distalign.tools.gpu_check.machine_environment", str(tmp_path / "env.json")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    found = json.loads((tmp_path / "env.json").read_text())
    assert checked.returncode == 0, found["import_s"]
    assert found["python"].startswith("3.12") and found["torch"].startswith("2.11.0")
    for name in ("ray", "deepspeed", "mlflow", "datasets", "optuna", "lang2vec"):
        assert found["packages"][name].endswith("(site)"), (name, found["packages"][name])
    assert found["packages"]["torch"].endswith("(base)") and found["packages"]["transformers"].endswith("(base)")

    run = subprocess.run(
        [
            python,
            "-m",
            "distalign.cli",
            "train",
            "jobs/configs/quickstart.yaml",
            *SMALL,
            "train.num_workers=1",
            "train.engine=deepspeed",
            "train.zero_stage=2",
            "train.precision=bf16",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "[distalign] done" in run.stdout
    trained = time.monotonic()

    # what `make gpu-check` runs, in the image's own packages: its test collection, then every step rehearsed on CPU
    # (the first GPU run found what the dev venv hid: test files importing test-only packages, and MLflow read
    # outside the carried site)
    collected = subprocess.run(
        [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "gpu", "tests/"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    rehearsal_env = env | {"PYTHONPATH": str(REPO)}  # the check installs the site itself, as on the GPU machine
    rehearsal = subprocess.run(
        [
            python,
            "-m",
            "distalign.tools.gpu_check",
            "--cpu",
            "--site",
            str(carry / "site.tar.xz"),
            "--carry",
            str(carry),
            "--out",
            str(tmp_path / "report"),
            "--work",
            str(tmp_path / "check"),
        ],
        cwd=REPO,
        env=rehearsal_env,
        capture_output=True,
        text=True,
    )
    report = (tmp_path / "report" / "report.md").read_text()
    print(report)
    assert rehearsal.returncode == 0, report[:6000]
    print(
        f"\nwheelhouse built in {built - started:.0f} s ({megabytes(carry):.1f} MiB carried); installed offline "
        f"in {installed['unpack_s'] + installed['compile_s']:.0f} s ({installed}); imports {found['import_s']}; "
        f"unmet requirements {found['unmet_requirements']}; a ZeRO-2 run in {trained - built:.0f} s; gpu tests "
        f"collected: {collected.stdout.strip().splitlines()[-1]}; the CPU rehearsal in "
        f"{time.monotonic() - trained:.0f} s"
    )
