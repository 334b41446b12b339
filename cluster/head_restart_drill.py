"""Head-restart drill on one machine (docs/guides/clusters.md, "Head-node fault tolerance"): a head with 0 CPUs
and one 1-CPU worker node on loopback, a detached actor on the worker called 5 times; then every process of the
head is SIGKILLed and the head started again on the same port. Prints whether the worker node rejoined and
whether the actor kept its state, with the GCS in an external Redis (`redis-server` on PATH, e.g. Debian's
redis-server package) and with the GCS in memory.

    python cluster/head_restart_drill.py            # both
    python cluster/head_restart_drill.py redis      # one
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distalign.tools.bench.loopback import BIN, free_port, start_node, stop_group, wait_for_nodes

ACTOR = """
import ray
ray.init(address='{address}', namespace='drill')
@ray.remote(num_cpus=1)
class Counter:
    def __init__(self): self.calls = 0
    def call(self): self.calls += 1; return self.calls
counter = Counter.options(name='counter', lifetime='detached').remote()
print([ray.get(counter.call.remote()) for _ in range(5)][-1])
"""
CALL_AGAIN = """
import ray
ray.init(address='{address}', namespace='drill')
try:
    print(ray.get(ray.get_actor('counter').call.remote(), timeout=60))
except Exception as error:
    print('lost (' + type(error).__name__ + ')')
"""


def drill(gcs_storage: str, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PATH=f"{BIN}{os.pathsep}{env['PATH']}", RAY_AUTH_MODE="token")
    head_env, head_args, redis = dict(env), [], None
    if gcs_storage == "redis":
        port = free_port()
        redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--requirepass",
                "drill",
                "--appendonly",
                "yes",
                "--dir",
                str(work),
            ],
            stdout=open(work / "redis.log", "w"),
            start_new_session=True,
        )
        head_env["RAY_REDIS_ADDRESS"], head_args = f"127.0.0.1:{port}", ["--redis-password=drill"]
    gcs_port = free_port()
    address = f"127.0.0.1:{gcs_port}"
    head_args = [f"--port={gcs_port}", "--include-dashboard=false", *head_args]
    head = start_node(["--head", *head_args], 0, head_env, work / "head.log")
    worker = None
    try:
        wait_for_nodes(address, 1, env=env)
        worker = start_node([f"--address={address}"], 1, env, work / "worker.log")
        wait_for_nodes(address, 2, env=env)

        def python(code: str) -> str:
            return subprocess.run(
                [sys.executable, "-c", code.format(address=address)],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            ).stdout.strip()

        before = python(ACTOR).splitlines()[-1]
        os.killpg(head.pid, signal.SIGKILL)  # a crashed head: no orderly shutdown
        head.wait()
        # the head's GCS leaves a moment after its process group; a GCS still bound to the port would refuse the
        # new head (and on one machine, the worker's processes name the same address: a fresh temp dir avoids
        # Ray mistaking them for a running head)
        while subprocess.run(["pgrep", "-f", f"gcs_server .*{gcs_port}"], capture_output=True).returncode == 0:
            time.sleep(0.5)
        head = start_node(
            ["--head", *head_args, f"--temp-dir={tempfile.mkdtemp(prefix='rd', dir='/tmp')}"],
            0,
            head_env,
            work / "head-again.log",
        )
        started = time.time()
        try:
            wait_for_nodes(address, 2, timeout=120, env=env)
            node = f"alive (rejoined {time.time() - started:.1f} s after the head started)"
        except TimeoutError:
            node = "gone (not back within 120 s)"
        return {
            "worker node after the head's restart": node,
            "the actor's state (5 calls, then one more)": f"{before} -> {python(CALL_AGAIN).splitlines()[-1]}",
        }
    finally:
        for process in (worker, head, redis):
            if process is not None:
                stop_group(process)


def main() -> None:
    storages = sys.argv[1:] or ["redis", "memory"]
    results = {}
    for storage in storages:
        with tempfile.TemporaryDirectory(prefix=f"drill-{storage}-") as work:
            results[storage] = drill(storage, Path(work))
    print("| | " + " | ".join(f"GCS in {s}" for s in storages) + " |")
    print("|---" * (len(storages) + 1) + "|")
    for row in next(iter(results.values())):
        print(f"| {row} | " + " | ".join(results[s][row] for s in storages) + " |")


if __name__ == "__main__":
    main()
