"""Build, here (with network), what a bare CUDA image needs to run distalign offline (``make wheelhouse``):

    python -m distalign.tools.gpu_check.wheelhouse --python-version 3.12 --wheels .wheelhouse --carry .gpu-carry

1. The project's dependencies (pyproject.toml) less the packages the image has (``image_packages.txt``).
2. Those published only as source built as wheels here (DeepSpeed with ``DS_BUILD_OPS=0``: its ops compile on first
   use, if ever; seqeval is pure Python).
3. Their closure resolved for CPython ``--python-version`` on manylinux x86_64 (``pip install --dry-run --report``),
   the image's packages of known version standing in as empty stub wheels (so torch's CUDA libraries, say, are not
   resolved again, and versions the registry lacks do not block), then every package of the closure the image
   lacks downloaded as a wheel into ``--wheels``.
4. Those wheels installed into a site folder (``pip install --target``), stripped (``STRIPPED``: parts of Ray,
   MLflow and the word lists that no command of the check uses), packed as ``<carry>/site.tar.xz``; beside it the
   bench's base corpus (the English side of Tatoeba in the data home, ``distalign data fetch tatoeba``) as
   ``bench_corpus.txt``.

``--carry`` is what travels to the GPU machine (at most ``CARRY_LIMIT_MIB``, the device tool's 64 MiB less the
work tree); the check's installer (``site_install``) unpacks it there without network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from distalign.benchmark_data import eval_dir

HERE = Path(__file__).resolve().parent
IMAGE_PACKAGES = HERE / "image_packages.txt"
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
# published as source only: built here, with this environment
FROM_SOURCE = {"deepspeed": {"DS_BUILD_OPS": "0"}, "seqeval": {}}
# what the site folder travels without (relative to it): no step of the check reaches it
STRIPPED = (
    "ray/jars",
    "ray/rllib",
    "ray/serve",
    "ray/llm",
    "ray/tests",
    "ray/dashboard/client/build",  # replaced by a one-page build: without one the dashboard does not start, and
    # Ray then takes ~100 s to start and Train's placement-group cleaner fails
    "mlflow/server/js",
    "wordfreq/data",
    "lang2vec/data/learned.npy",
    "lang2vec/data/geocoord.npz",
    "bin",  # console scripts written for this machine's interpreter path
    "virtualenv/seed/wheels/embed",  # pip/setuptools wheels for new virtualenvs (Ray's pip runtime envs)
)
# botocore's service models (28 MB): only S3's and STS's are kept (distalign's storage; the check uses neither)
BOTOCORE_SERVICES = ("s3", "sts")
STRIPPED_BINARIES = ("ray/core/src/ray/gcs/gcs_server", "ray/core/src/ray/raylet/raylet", "ray/_raylet.so")
# the one-page build: its index and the static folder the dashboard serves (aiohttp refuses a missing one, and the
# dashboard then fails to start: the first GPU run's Ray took 70 s to start for it)
DASHBOARD_PAGES = {
    "ray/dashboard/client/build/index.html": "<!doctype html><title>Ray</title>"
    "<p>The dashboard's pages were left out of this install.",
    "ray/dashboard/client/build/static/README.txt": "The dashboard's pages were left out of this install.\n",
}
CARRY_LIMIT_MIB = 60


def image_packages(path: Path = IMAGE_PACKAGES) -> dict[str, str]:
    """name -> version ("" where unknown) of the packages the GPU image has."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canonicalize_name(name)] = version.strip()
    return found


def project_requirements(pyproject: Path, image: dict[str, str]) -> list[str]:
    """The project's dependencies the image does not provide."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [d for d in dependencies if canonicalize_name(Requirement(d).name) not in image]


def stub_wheel(folder: Path, name: str, version: str) -> Path:
    """An empty wheel of ``name==version`` that needs nothing: the image's package, for the resolution only. Its
    local version label (``+image``) sorts it above the registry's wheel of the same version, so it is chosen."""
    version = f"{version}+image"
    dist = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(
            f"{dist}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: distalign\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{dist}.dist-info/RECORD", "")
    return path


def target_flags(python_version: str) -> list[str]:
    return [
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        *(f"--platform={p}" for p in PLATFORMS),
    ]


PIP_PYTHON = [sys.executable]  # the interpreter pip runs in: the target version's (its resolver checks
# Requires-Python against the running interpreter too)


def pip(*args: str, env: dict | None = None) -> None:
    subprocess.run([*PIP_PYTHON, "-m", "pip", *args], check=True, env=(os.environ | env) if env else None)


def find_python(version: str) -> str:
    """An interpreter of ``version``: ``python<version>`` on PATH, else pyenv's; this one as the last resort."""
    candidates = [shutil.which(f"python{version}") or ""]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}*/bin/python{version}"))
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "import pip"], capture_output=True).returncode == 0:
            return candidate
    return sys.executable


def build_from_source(requirements: list[str], wheels: Path) -> None:
    for text in requirements:
        name = canonicalize_name(Requirement(text).name)
        if name in FROM_SOURCE and not list(wheels.glob(f"{name.replace('-', '_')}-*.whl")):
            pip("wheel", "-q", "--no-deps", text, "-w", str(wheels), env=FROM_SOURCE[name])


def resolve(requirements: list[str], image: dict[str, str], wheels: Path, python_version: str, scratch: Path) -> dict:
    """name -> version of the closure of ``requirements`` for the target Python and platform, the image's packages
    (at their versions, where known) left in."""
    stubs = scratch / "stubs"
    stubs.mkdir()
    for name, version in image.items():
        if version:
            stub_wheel(stubs, name, version)
    (scratch / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (scratch / "constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in image.items() if v))
    pip(
        "install",
        "-q",
        "--dry-run",
        "--ignore-installed",
        "--report",
        str(scratch / "report.json"),
        "--target",
        str(scratch / "target"),
        *target_flags(python_version),
        "--find-links",
        str(wheels),
        "--find-links",
        str(stubs),
        "-r",
        str(scratch / "requirements.txt"),
        "-c",
        str(scratch / "constraints.txt"),
    )
    report = json.loads((scratch / "report.json").read_text())
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}


def wheel_files(wheels: Path, closure: dict[str, str], image: dict[str, str]) -> list[Path]:
    """The wheel in ``wheels`` of each package of the closure that the image lacks (one each)."""
    files = []
    for name, version in sorted(closure.items()):
        if name in image:
            continue
        prefix = f"{name.replace('-', '_')}-{version}-"
        match = [
            w
            for w in wheels.glob("*.whl")
            if canonicalize_name(w.name.split("-")[0]) == name and w.name.split("-")[1] == version
        ]
        if not match:
            raise FileNotFoundError(f"no wheel {prefix}*.whl in {wheels}")
        files.append(match[0])
    return files


def download(closure: dict[str, str], image: dict[str, str], wheels: Path, python_version: str) -> None:
    have = {(canonicalize_name(w.name.split("-")[0]), w.name.split("-")[1]) for w in wheels.glob("*.whl")}
    missing = [f"{n}=={v}" for n, v in sorted(closure.items()) if n not in image and (n, v) not in have]
    if missing:
        pip("download", "-q", "--no-deps", *target_flags(python_version), "-d", str(wheels), *missing)


def install_site(files: list[Path], site: Path, python_version: str) -> None:
    if site.exists():
        shutil.rmtree(site)
    pip(
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--no-compile",
        "--target",
        str(site),
        *target_flags(python_version),
        *map(str, files),
    )


def strip_site(site: Path) -> None:
    for relative in STRIPPED:
        path = site / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    models = site / "botocore" / "data"
    for service in models.iterdir() if models.is_dir() else ():
        if service.is_dir() and service.name not in BOTOCORE_SERVICES:
            shutil.rmtree(service)
    for page, text in DASHBOARD_PAGES.items():
        (site / page).parent.mkdir(parents=True, exist_ok=True)
        (site / page).write_text(text)
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache)
    if shutil.which("strip"):
        for relative in STRIPPED_BINARIES:
            if (site / relative).exists():
                subprocess.run(["strip", "--strip-unneeded", str(site / relative)], check=True)


def pack(site: Path, archive: Path) -> None:
    """``site``'s content (no top folder) as tar.xz, xz on every core."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-c", "-I", "xz -T0 -6", "-f", str(archive), "-C", str(site), "."], check=True)


def write_bench_corpus(tatoeba: Path, out: Path) -> None:
    """The bench's default base corpus (``distalign.synthetic_languages.benchmark.default_corpus_files``) as one
    file."""
    files = sorted(tatoeba.glob("tatoeba.*-eng.eng"))
    if not files:
        raise FileNotFoundError(f"no tatoeba.*-eng.eng in {tatoeba}")
    with out.open("wb") as f:
        for path in files:
            data = path.read_bytes()
            f.write(data if data.endswith(b"\n") else data + b"\n")


def megabytes(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", default="3.12")
    parser.add_argument("--wheels", default=".wheelhouse", help="the downloaded and built wheels (kept, reused)")
    parser.add_argument("--carry", default=".gpu-carry", help="site.tar.xz and bench_corpus.txt: what travels")
    parser.add_argument("--pyproject", default="pyproject.toml")
    parser.add_argument(
        "--tatoeba",
        default=str(eval_dir() / "tatoeba"),
        help="the bench corpus's source (default: the data home's; distalign data fetch tatoeba)",
    )
    parser.add_argument(
        "--pip-python",
        default="",
        help="the interpreter that runs pip (default: python<version> on PATH, else pyenv's)",
    )
    args = parser.parse_args(argv)
    PIP_PYTHON[:] = [args.pip_python or find_python(args.python_version)]
    wheels, carry = Path(args.wheels).resolve(), Path(args.carry).resolve()
    wheels.mkdir(parents=True, exist_ok=True)
    carry.mkdir(parents=True, exist_ok=True)
    image = image_packages()
    requirements = project_requirements(Path(args.pyproject), image)
    build_from_source(requirements, wheels)
    with tempfile.TemporaryDirectory() as tmp:
        closure = resolve(requirements, image, wheels, args.python_version, Path(tmp))
        download(closure, image, wheels, args.python_version)
        files = wheel_files(wheels, closure, image)
        site = Path(tmp) / "site"
        install_site(files, site, args.python_version)
        strip_site(site)
        site_mib = megabytes(site)
        pack(site, carry / "site.tar.xz")
    write_bench_corpus(Path(args.tatoeba), carry / "bench_corpus.txt")
    (carry / "packages.txt").write_text("".join(f"{f.name}\n" for f in files))
    total = megabytes(carry)
    print(
        f"wheelhouse: {len(files)} wheels in {wheels}; site {site_mib:.0f} MiB unpacked, "
        f"{(carry / 'site.tar.xz').stat().st_size / 2**20:.1f} MiB packed; {carry}: {total:.1f} MiB"
    )
    if total > CARRY_LIMIT_MIB:
        print(
            f"wheelhouse: {carry} is {total:.1f} MiB, over the {CARRY_LIMIT_MIB} MiB that may travel", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
