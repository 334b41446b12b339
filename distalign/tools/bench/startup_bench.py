"""``distalign bench startup``: a real run's start-up phases beside the bare Ray Train floor.

Each round runs, as subprocesses one after the other, the floor (``distalign.tools.bench.ray_train_floor``: Ray, two
CPU workers importing torch and transformers, a 2-layer BERT, one step) and ``distalign train`` on the quickstart;
the run's ``startup/*`` metrics are read back from its MLflow store. Printed: each phase's and each total's median
over the rounds and the run's ratio to the floor; written: ``startup.json`` and ``startup.md`` in the output folder.

    distalign bench startup                       # a fresh local Ray per command, as a new user runs
    distalign bench startup --start-cluster       # both against one `ray start --head` cluster, kept up between

Light at import (``distalign --help`` loads it): MLflow and Ray are imported when it runs.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from distalign.errors import require_writable

QUICKSTART = Path(__file__).resolve().parents[3] / "jobs" / "configs" / "quickstart.yaml"
PHASES = ("imports", "prepare", "ray", "trainer", "workers", "model", "vanilla_eval", "first_batch", "first_step")


def register(bench) -> None:
    """Add ``startup`` to the ``distalign bench`` subparsers ``bench``."""
    startup = bench.add_parser(
        "startup",
        help="a quickstart run's start-up phases beside the bare Ray Train floor (median of rounds)",
        description="Rounds of: the bare Ray Train script (two CPU workers importing torch and transformers, a "
        "2-layer BERT, one step, from process start) and `distalign train` on the quickstart (its "
        "startup/* phases), each a fresh command. Printed: the medians and the ratio to the floor; "
        "startup.json and startup.md in the output folder.",
    )
    startup.add_argument("--rounds", type=int, default=3, help="runs of each side; the table shows medians")
    startup.add_argument("--steps", type=int, default=2, help="the run's train.max_steps")
    startup.add_argument(
        "--address",
        default="",
        help="a running Ray cluster both sides join (RAY_ADDRESS's form, "
        "e.g. 127.0.0.1:6379; a `ray start` head also needs "
        "RAY_AUTH_MODE=token); default a fresh local Ray per command",
    )
    startup.add_argument(
        "--start-cluster",
        action="store_true",
        help="start a `ray start --head` cluster on this machine for the bench (token auth, free "
        "ports), run both sides against it, stop it at the end",
    )
    startup.add_argument(
        "--output-dir",
        default="",
        help="default $DISTALIGN_HOME/bench_startup (its MLflow store "
        "and caches are reused: the inputs are generated once)",
    )
    startup.add_argument("overrides", nargs="*", help="more training-config overrides for the run")
    startup.set_defaults(func=run)


def run(args) -> int:
    from distalign.config import distalign_home
    from distalign.errors import ConfigError

    if args.rounds < 1 or args.steps < 1:
        raise ConfigError("--rounds and --steps must be at least 1")
    if args.address and args.start_cluster:
        raise ConfigError("--address and --start-cluster exclude each other: join one cluster or start one")
    out = Path(args.output_dir).resolve() if args.output_dir else distalign_home() / "bench_startup"
    require_writable(out, "--output-dir")
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DISTALIGN_HOME": str(out), "MLFLOW_TRACKING_URI": f"sqlite:///{out / 'mlflow.db'}"}
    env.pop("RAY_ADDRESS", None)
    cluster = None
    try:
        if args.start_cluster:
            cluster, address = start_head(out, env)
            env |= {"RAY_ADDRESS": address, "RAY_AUTH_MODE": "token"}
        elif args.address:
            env["RAY_ADDRESS"] = args.address
        rounds = []
        for i in range(args.rounds):
            floor = floor_seconds(env)
            phases = run_phases(out, env, args.steps, args.overrides)
            rounds.append({"floor_s": floor} | phases)
            print(
                f"round {i + 1}/{args.rounds}: floor {floor:.1f} s, distalign train {phases['total_s']:.1f} s "
                f"(load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        if cluster is not None:
            cluster.terminate()  # `ray start --block` stops the processes it started, and only those
            cluster.wait(timeout=60)
    where = env.get("RAY_ADDRESS") and f"a running cluster ({env['RAY_ADDRESS']})" or "a fresh local Ray per command"
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "ray": where,
        "load_average_1m": os.getloadavg()[0],
        "rounds": rounds,
        "median": medians(rounds),
    }
    (out / "startup.json").write_text(json.dumps(report, indent=1))
    table = format_table(report)
    (out / "startup.md").write_text(table + "\n")
    print(table)
    print(f"\nwritten: {out / 'startup.json'}, {out / 'startup.md'}")
    return 0


def machine() -> str:
    return f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_head(out: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """A ``ray start --head --block`` process on free ports (other Ray clusters on the machine are left alone) and
    its address, once it answers."""
    port = free_port()
    ray = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [
            str(ray),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            f"--num-cpus={os.cpu_count()}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={free_port()}",
            f"--ray-client-server-port={free_port()}",
        ],
        env=env | {"RAY_AUTH_MODE": "token"},
        stdout=(out / "ray-head.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"ray start --head exited with {head.returncode}: see {out / 'ray-head.log'}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return head, address
        except OSError:
            time.sleep(0.5)
    head.terminate()
    raise RuntimeError(f"ray start --head did not answer on {address} in 120 s: see {out / 'ray-head.log'}")


def checked_run(command: list[str], env: dict[str, str], what: str) -> str:
    """``command``'s stdout; its exit status and the end of its stderr in the error when it fails."""
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{what} exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


def floor_seconds(env: dict[str, str]) -> float:
    stdout = checked_run([sys.executable, "-m", "distalign.tools.bench.ray_train_floor"], env, "the Ray Train floor")
    return json.loads(stdout.strip().splitlines()[-1])["total_s"]


def run_phases(out: Path, env: dict[str, str], steps: int, overrides: list[str]) -> dict[str, float]:
    """``distalign train`` on the quickstart as a new command: its ``startup/*`` metrics (phase -> seconds,
    ``total_s``) and ``wall_s``, the whole command's."""
    from mlflow.tracking import MlflowClient

    name = f"bench-startup-{time.strftime('%Y%m%d-%H%M%S')}"  # a new run each time: the same name would resume
    start = time.time()
    checked_run(
        [
            sys.executable,
            "-m",
            "distalign.cli",
            "train",
            str(QUICKSTART),
            f"run.name={name}",
            f"train.max_steps={steps}",
            f"train.checkpoint_every={steps}",
            "eval.every=0",
            f"storage.path={out / 'runs'}",
            *overrides,
        ],
        env,
        "distalign train",
    )
    wall = time.time() - start
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("distalign")
    assert experiment is not None, "the run made no MLflow experiment 'distalign'"
    (logged,) = client.search_runs([experiment.experiment_id], f"attributes.run_name = '{name}'")
    phases = {
        k.removeprefix("startup/").removesuffix("_s"): v
        for k, v in logged.data.metrics.items()
        if k.startswith("startup/")
    }
    return {"total_s": phases.pop("total")} | phases | {"wall_s": wall}


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    keys = dict.fromkeys(k for r in rounds for k in r)
    return {k: statistics.median(r[k] for r in rounds if k in r) for k in keys}


def format_table(report: dict) -> str:
    median, rounds = report["median"], report["rounds"]
    head = f"| seconds | {' | '.join(f'round {i + 1}' for i in range(len(rounds)))} | median |"
    lines = [
        f"start-up, {report['date']}, {report['machine']}, {report['ray']}, load {report['load_average_1m']:.1f}",
        "",
        head,
        "|---" * (len(rounds) + 2) + "|",
    ]
    rows = (
        [("bare Ray Train floor", "floor_s"), ("distalign train, command -> first step", "total_s")]
        + [(f"  {phase}", phase) for phase in PHASES if phase in median]
        + [("distalign train, whole command", "wall_s")]
    )
    for label, key in rows:
        cells = " | ".join(f"{r[key]:.1f}" if key in r else "" for r in rounds)
        lines.append(f"| {label} | {cells} | {median[key]:.1f} |")
    lines.append(f"\nratio to the floor (medians): {median['total_s'] / median['floor_s']:.2f}x")
    return "\n".join(lines)
