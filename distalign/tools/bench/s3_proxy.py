"""An HTTP proxy on loopback in front of an S3 endpoint (moto's server): it counts what storage served, and it
can fail a share of the requests.

The streaming benchmark reads its corpus through it to count the bytes that left storage (the bodies of GET
responses, ranged or whole: what a reader really fetched, whatever the plan says it needs); the S3 fault test
puts it between the client and moto to answer some requests with HTTP 500 or to stall them past the client's
timeout. Requests are numbered in arrival order; request n is failed when ``n % period < burst`` (a burst of
``burst`` failures every ``period`` requests: a short outage, as S3 throttling comes in runs).
"""

from __future__ import annotations

import http.client
import http.server
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

CHUNK = 1 << 20
HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
REFRAMED = HOP_HEADERS | {"expect", "content-length"}  # a request's body is forwarded whole, with a length of its own


@dataclass
class Faults:
    """Which requests fail and how: ``period`` 0 fails none; ``stall_s`` > 0 holds a failing request that long
    and then drops the connection (a timeout), else it is answered HTTP 500."""

    period: int = 0
    burst: int = 1
    stall_s: float = 0.0

    def fails(self, n: int) -> bool:
        return self.period > 0 and n % self.period < self.burst


@dataclass
class Tally:
    """What went through: requests per method, GET body bytes per key (``bucket/key``), requests failed."""

    requests: Counter = field(default_factory=Counter)
    get_bytes: Counter = field(default_factory=Counter)
    failed: int = 0

    def bytes_under(self, prefix: str) -> int:
        return sum(n for key, n in self.get_bytes.items() if key.startswith(prefix))


class S3Proxy:
    """``with S3Proxy(upstream_url, faults) as proxy:`` clients use ``proxy.url``; ``proxy.tally`` counts."""

    def __init__(self, upstream: str, faults: Faults | None = None):
        self.upstream = urlsplit(upstream)
        self.faults = faults or Faults()
        self.tally = Tally()
        self._lock = threading.Lock()
        self._count = 0
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> S3Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.tally = Tally()

    def _number(self, method: str) -> int:
        with self._lock:
            n, self._count = self._count, self._count + 1
            self.tally.requests[method] += 1
            return n

    def _fail(self) -> None:
        with self._lock:
            self.tally.failed += 1

    def _served(self, key: str, size: int) -> None:
        with self._lock:
            self.tally.get_bytes[key] += size

    def _handler_class(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def forward(self) -> None:
                n = proxy._number(self.command)
                body = self.read_body()
                if proxy.faults.fails(n):
                    proxy._fail()
                    if proxy.faults.stall_s > 0:
                        time.sleep(proxy.faults.stall_s)
                        self.close_connection = True
                        return
                    message = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
                    self.send_response(500)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(message)))
                    self.end_headers()
                    if self.command != "HEAD":  # a HEAD answer has no body (the next answer would read it)
                        self.wfile.write(message)
                    return
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in REFRAMED}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    self.send_response(response.status)
                    length = response.getheader("Content-Length")
                    for k, v in response.getheaders():
                        if k.lower() not in HOP_HEADERS:
                            self.send_header(k, v)
                    if length is None:  # re-framed: the body is read whole below
                        data = response.read()
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.send_body(data)
                    else:
                        self.end_headers()
                        while chunk := response.read(CHUNK):
                            self.send_body(chunk)
                finally:
                    upstream.close()

            def read_body(self) -> bytes:
                """The request's body, whole: by its length, or de-chunked (the AWS SDK streams uploads chunked)."""
                if "chunked" not in self.headers.get("Transfer-Encoding", ""):
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after a chunk
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(parts)

            def send_body(self, data: bytes) -> None:
                if self.command == "GET":  # counted before it is sent: a client never sees bytes not yet counted
                    proxy._served(unquote(urlsplit(self.path).path).lstrip("/"), len(data))
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward

        return Handler
