"""Photograph a run in the MLflow UI, as a trainer reviews it: starts `mlflow ui` on loopback for the tracking
store, opens the run's pages in headless Chromium (Debian's `chromium`, driven by Playwright) in the UI's
model-training view, waits for what each page must show and saves one PNG per page.

    python jobs/screenshot.py quickstart-tune-000 --tracking-uri sqlite:///$PWD/mlflow.db --out docs/img
    python jobs/screenshot.py quickstart-tune --tracking-uri ... --pages artifacts --artifact trials.png
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from mlflow.tracking import MlflowClient

ML_VIEW = "workflowType=machine_learning"  # distalign.tracking.ML_VIEW (this script needs no distalign import)
# page -> (path under the run, the text the page shows once drawn); "runs" is the experiment's run list
PAGES = {
    "runs": ("", "Run Name"),
    "overview": ("", "Parameters"),
    "metrics": ("/model-metrics", "Step"),  # a line chart drawn
    "system": ("/system-metrics", "system/"),
    "artifacts": ("/artifacts", "config.yaml"),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def mlflow_ui(tracking_uri: str, timeout_s: float = 120) -> Iterator[str]:
    """`mlflow ui` for the store on a free loopback port; yields its base URL."""
    port = free_port()
    ui = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "ui",
            "--backend-store-uri",
            tracking_uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        # no background job runner (GenAI scorers): it only slows the start
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                if ui.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mlflow ui for {tracking_uri} did not answer on {base}") from None
                time.sleep(0.3)
        yield base
    finally:  # the server's whole process group: uvicorn's workers and MLflow's job runner too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
            ui.wait(timeout=15)


def page_url(base: str, experiment_id: str, run_id: str, page: str, artifact: str = "") -> str:
    if page == "runs":
        return f"{base}/#/experiments/{experiment_id}/runs?{ML_VIEW}"
    path = PAGES[page][0] + (f"/{artifact}" if page == "artifacts" and artifact else "")
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}{path}?{ML_VIEW}"


def visit(
    urls: dict[str, tuple[str, str]], out: Path | None = None, timeout_s: float = 30, height: int = 1000
) -> dict[str, str]:
    """Open each page (name -> (URL, text to wait for)) in headless Chromium; returns each page's visible text,
    and saves ``<out>/<name>.png`` when ``out`` is given."""
    from playwright.sync_api import sync_playwright

    texts = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1600, "height": height})
            for name, (url, text) in urls.items():
                page.goto(url)
                page.get_by_text(text, exact=False).first.wait_for(timeout=timeout_s * 1000)
                page.wait_for_timeout(500)  # the charts draw after their section headers (the UI keeps polling)
                texts[name] = page.inner_text("body")
                if out is not None:
                    page.screenshot(path=str(out / f"{name}.png"))
        finally:
            browser.close()
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="the run's name (a training run, a trial, or a study's parent run)")
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", default="distalign")
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--pages", default="runs,metrics", help=f"comma-separated, of {', '.join(PAGES)}")
    parser.add_argument("--artifact", default="", help="open this artifact of the run in the artifacts page")
    parser.add_argument("--height", type=int, default=1000, help="the window's height (more chart sections)")
    args = parser.parse_args(argv)

    client = MlflowClient(args.tracking_uri)
    experiment = client.get_experiment_by_name(args.experiment)
    runs = (
        client.search_runs(
            [experiment.experiment_id],
            f"attributes.run_name = '{args.run}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if experiment
        else []
    )
    if not runs:
        print(f"no run named {args.run} in experiment {args.experiment} of {args.tracking_uri}", file=sys.stderr)
        return 2
    run = runs[0].info
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with mlflow_ui(args.tracking_uri) as base:
        urls = {
            f"{args.run}-{page}": (page_url(base, run.experiment_id, run.run_id, page, args.artifact), PAGES[page][1])
            for page in args.pages.split(",")
        }
        visit(urls, out, height=args.height)
    for name in urls:
        print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
