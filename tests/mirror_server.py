"""A local HTTP mirror of the benchmark catalogue's upstream files on 127.0.0.1, for ``distalign data fetch``.

It serves a folder in the data-home layout (the project's ../shared/data) under the upstream relative paths
(``/<owner>/<repo>/<commit>/<path>``), answers ``Range: bytes=N-`` requests with 206, records each request's
Range header, and can misbehave on purpose: serve a path with one byte changed (``corrupt``) or close the
connection after some bytes of its next response (``drop_after``).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from distalign.benchmark_data.catalog import RESOURCES, DataFile, all_files, upstream_url


@dataclass
class Mirror:
    url: str
    files: dict[str, Path]  # URL path -> file served
    corrupt: set[str] = field(default_factory=set)
    drop_after: dict[str, int] = field(
        default_factory=dict
    )  # URL path -> bytes sent before the connection drops (once)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (URL path, Range header)

    def path_of(self, home_path: str) -> str:
        """The URL path of the catalogued file at ``home_path`` (relative to the data home)."""
        return _url_path(next(f for f in all_files() if f.path == home_path))


def _url_path(file: DataFile) -> str:
    return upstream_url(RESOURCES[file.resource], file, "http://mirror").removeprefix("http://mirror")


class _Handler(BaseHTTPRequestHandler):
    mirror: Mirror

    def do_GET(self):
        mirror = self.mirror
        mirror.requests.append((self.path, self.headers.get("Range")))
        if self.path not in mirror.files:
            self.send_error(404)
            return
        body = mirror.files[self.path].read_bytes()
        if self.path in mirror.corrupt:
            body = bytes([body[0] ^ 1]) + body[1:]
        start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-")) if self.headers.get("Range") else 0
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        drop = mirror.drop_after.pop(self.path, None)
        if drop is None:
            self.wfile.write(body[start:])
        else:  # part of the promised bytes, then the connection closes
            self.wfile.write(body[start : start + drop])
            self.wfile.flush()
            self.close_connection = True

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def mirror_server(data_root: Path):
    """A ``Mirror`` of every catalogued file found under ``data_root``, served until the block ends."""
    mirror = Mirror("", {_url_path(f): data_root / f.path for f in all_files() if (data_root / f.path).is_file()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"mirror": mirror}))
    mirror.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield mirror
    finally:
        server.shutdown()
        server.server_close()
