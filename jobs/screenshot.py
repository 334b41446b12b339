"""Photograph a study's parent run in the MLflow UI: starts `mlflow ui` on loopback for the tracking store,
opens the run's pages in headless Chromium (Debian's `chromium`) and saves one PNG per page.

    python jobs/screenshot.py language-samples-tiny --tracking-uri sqlite:///$PWD/mlflow.db --out docs/img
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mlflow.tracking import MlflowClient

PAGES = {"overview": "", "artifacts": "/artifacts"}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", help="the study's name (its MLflow parent run)")
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", default="distalign")
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--artifact", default="", help="open this artifact of the run in the artifacts page")
    args = parser.parse_args(argv)

    client = MlflowClient(args.tracking_uri)
    experiment = client.get_experiment_by_name(args.experiment)
    runs = client.search_runs([experiment.experiment_id], f"attributes.run_name = '{args.study}'",
                              order_by=["attributes.start_time DESC"], max_results=1) if experiment else []
    if not runs:
        print(f"no run named {args.study} in experiment {args.experiment} of {args.tracking_uri}", file=sys.stderr)
        return 2
    run = runs[0].info
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", args.tracking_uri,
                           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for page, suffix in PAGES.items():
            path = suffix + (f"/{args.artifact}" if page == "artifacts" and args.artifact else "")
            target = out / f"{args.study}-{page}.png"
            subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--screenshot={target}", "--window-size=1600,1100", "--virtual-time-budget=20000",
                            f"{base}/#/experiments/{run.experiment_id}/runs/{run.run_id}{path}"],
                           check=True, capture_output=True, timeout=180)
            print(target)
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
