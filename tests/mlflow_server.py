"""A real MLflow tracking server on loopback, started as infra/ deploys it (infra/mlflow/serve.sh: basic auth,
artifacts proxied to S3), on a sqlite store or a PostgreSQL database (``postgres``), which outlive restarts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO

SERVE = REPO / "infra" / "mlflow" / "serve.sh"
ADMIN = "admin"


@dataclass
class TrackingServer:
    """``serve.sh`` with its environment; ``start``/``stop`` may be called again (same port, same stores)."""

    directory: Path
    port: int
    artifacts: str  # s3://bucket/prefix, or a local directory
    password: str
    s3_endpoint: str = ""
    aws: dict[str, str] = field(default_factory=dict)
    # runs and users in this database, as infra/ keeps them (one database); empty: sqlite files in ``directory``
    database: str = ""
    process: subprocess.Popen | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def client_env(self) -> dict[str, str]:
        """What a client sets to reach it: the URI and the basic-auth user."""
        return {
            "MLFLOW_TRACKING_URI": self.url,
            "MLFLOW_TRACKING_USERNAME": ADMIN,
            "MLFLOW_TRACKING_PASSWORD": self.password,
        }

    def start(self, timeout: float = 120) -> None:
        env = {
            **os.environ,
            **self.aws,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            **(
                {"MLFLOW_BACKEND_STORE_URI": self.database}
                if self.database
                else {
                    "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{self.directory}/mlflow.db",
                    "MLFLOW_AUTH_DATABASE_URI": f"sqlite:///{self.directory}/auth.db",
                }
            ),
            "MLFLOW_ARTIFACTS_DESTINATION": self.artifacts,
            "MLFLOW_S3_ENDPOINT_URL": self.s3_endpoint,
            "MLFLOW_AUTH_ADMIN_PASSWORD": self.password,
            "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-secret-key",
            "MLFLOW_HOST": "127.0.0.1",
            "MLFLOW_PORT": str(self.port),
            "MLFLOW_WORKERS": "1",
        }
        for key in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            env.pop(key, None)
        log = open(self.directory / "server.log", "a")
        self.process = subprocess.Popen(
            ["sh", str(SERVE)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(self.directory / 'server.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=2)
                return
            except urllib.error.HTTPError:
                return  # answering
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"mlflow server on {self.url} did not answer in {timeout}s")

    def stop(self, crash: bool = False) -> None:
        """SIGTERM the server's process group (its workers too), SIGKILL what is left; ``crash``: SIGKILL at once."""
        if self.process is None:
            return
        for sig, grace in ((signal.SIGKILL, 10),) if crash else ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        self.process = None


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A real PostgreSQL server (the ``pgserver`` wheel's binaries) on a Unix socket, its data in a fresh temporary
    directory (run as root, pgserver starts it as its own user, which cannot enter pytest's directories); yields the
    URI of its database ``mlflow`` (``postgresql://``, as infra/ writes it), stops it and removes it at the end."""
    import pgserver

    with tempfile.TemporaryDirectory(prefix="distalign-pg-") as directory:
        server = pgserver.get_server(directory, cleanup_mode="stop")
        try:
            server.psql("CREATE DATABASE mlflow;")
            yield server.get_uri("mlflow")
        finally:
            server.cleanup()
