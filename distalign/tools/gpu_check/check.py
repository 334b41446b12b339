"""``python -m distalign.tools.gpu_check``: install the carried packages (``--site``), run the steps side by side within
the time budget, read their figures, write the report (``--out``, default ``$OUT``) after every change."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from distalign.tools.gpu_check.check_report import write_report
from distalign.tools.gpu_check.figures import ChildPython, read_figures
from distalign.tools.gpu_check.machine_environment import SITE_ENV
from distalign.tools.gpu_check.run import FAILED, PASSED, Places, Runner, StepResult
from distalign.tools.gpu_check.site_install import install_site
from distalign.tools.gpu_check.steps import CPU, GPU, Step, check_steps

REPO = Path(__file__).resolve().parents[3]
GPU_BUDGET_S = 345  # the whole check, install included, under 6 minutes
CPU_BUDGET_S = 5400  # the rehearsal on 2 busy cores
FINISH_RESERVE_S = 15  # for the last figures and the report after the steps' deadline
DROPPED_ENV = ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "DISTALIGN_HOME")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m distalign.tools.gpu_check", description=__doc__)
    parser.add_argument("--cpu", action="store_true", help="rehearse the steps on CPU, smaller (no GPU used)")
    parser.add_argument(
        "--site",
        default="",
        help="a site archive to install first (make wheelhouse: .gpu-carry/site.tar.xz); default: use this environment",
    )
    parser.add_argument("--carry", default=".gpu-carry", help="the carried folder (bench_corpus.txt)")
    parser.add_argument(
        "--out",
        default=os.environ.get("OUT") or "gpu-check-report",
        help="report.md, report.json, logs.tar.gz (default $OUT, else ./gpu-check-report)",
    )
    parser.add_argument(
        "--work", default="/tmp/distalign-gpu-check", help="the steps' homes, logs, caches (emptied first)"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=0,
        help=f"seconds for the whole check (default {GPU_BUDGET_S}, --cpu {CPU_BUDGET_S})",
    )
    parser.add_argument("--jobs", type=int, default=0, help="steps at a time (default: all; --cpu 2)")
    parser.add_argument("--only", default="", help="comma list of step names (with the steps they need)")
    return parser.parse_args(argv)


def selected(steps: list[Step], only: str) -> list[Step]:
    """The steps named in ``only`` and those they need, in the list's order; every step when ``only`` is empty."""
    if not only:
        return steps
    by_name = {s.name: s for s in steps}
    wanted = set(only.split(","))
    unknown = wanted - set(by_name)
    if unknown:
        raise SystemExit(f"--only: unknown steps {sorted(unknown)}; choose from {', '.join(by_name)}")
    for name in list(wanted):
        wanted |= set(by_name[name].needs)
    return [s for s in steps if s.name in wanted]


def step_environment(site: str, work: Path, cpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    paths = [str(REPO), site, env.get("PYTHONPATH", "")]
    env |= {
        "PYTHONPATH": ":".join(p for p in paths if p),
        SITE_ENV: site,
        "DISTALIGN_CACHE": str(work / "cache"),
        "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "MPLBACKEND": "Agg",
    }
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a rehearsal on a GPU machine stays on the CPU
    return env


def fail_without_figures(result: StepResult) -> None:
    """A step that exited 0 but left nothing of what it measures (its figures unreadable) did not pass."""
    if result.status == PASSED and "error" in result.figures:
        result.status, result.note = FAILED, "exited 0 but left no figures"


def pack_logs(work: Path, out: Path) -> None:
    """Every step's log and its commands' logs ($DISTALIGN_HOME/logs) as one archive (the device tool brings back
    a few files only)."""
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        for log in sorted((work / "logs").glob("*.log")):
            tar.add(log, arcname=f"steps/{log.name}")
        for log in sorted((work / "homes").glob("*/logs/*.log")):
            tar.add(log, arcname=f"commands/{log.parent.parent.name}/{log.name}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started, wall = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    budget = args.budget or (CPU_BUDGET_S if args.cpu else GPU_BUDGET_S)
    work, out = Path(args.work).resolve(), Path(args.out).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    steps = selected(check_steps(CPU if args.cpu else GPU), args.only)
    header: dict = {
        "mode": "CPU rehearsal" if args.cpu else "GPU",
        "started": wall,
        "budget_s": budget,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    results = [StepResult(name=s.name, about=s.about, status="PENDING") for s in steps]
    write_report(out, header, results)
    site = ""
    if args.site:
        try:
            installed = install_site(Path(args.site).resolve(), work / "site")
            site = installed["site"]
            header["install"] = installed
        except Exception as err:  # the steps then run without it: the report shows what fails for that
            header["install"] = {"error": f"{type(err).__name__}: {err}"[:1000]}
        header["install"]["seconds"] = round(time.monotonic() - started, 1)
    places = Places(REPO, work, out, Path(args.carry).resolve(), sys.executable)
    by_name = {s.name: s for s in steps}
    figures: dict[str, Future] = {}
    environment = step_environment(site, work, args.cpu)
    child = ChildPython(sys.executable, environment)  # the readers' MLflow is the steps' (the carried site's)

    with ThreadPoolExecutor(max_workers=4) as readers:

        def on_change(current: list[StepResult]) -> None:
            for result in current:
                if result.status not in ("PENDING", "RUNNING", "SKIPPED") and result.name not in figures:
                    step = by_name[result.name]
                    figures[result.name] = readers.submit(
                        read_figures, step.figures, places.step_out(step), places.home(step), child
                    )
            for name, future in figures.items():
                if future.done():
                    next(r for r in current if r.name == name).figures = future.result()
            write_report(out, header, current)

        runner = Runner(
            steps,
            places,
            environment,
            budget - FINISH_RESERVE_S - (time.monotonic() - started),
            args.jobs or (2 if args.cpu else len(steps)),
            on_change=on_change,
        )
        results = runner.run()
    for result in results:
        if result.name in figures:
            result.figures = figures[result.name].result()
        fail_without_figures(result)
    header["seconds"] = round(time.monotonic() - started, 1)
    pack_logs(work, out)
    for plot in (work / "outputs" / "mlm_emergence" / "emergence").glob("curves.png"):
        shutil.copy(plot, out / "emergence_curves.png")
    md, _ = write_report(out, header, results)
    print(md.read_text())
    return 0 if all(r.status == PASSED for r in results) else 1
