"""Faults at the HTTP boundary of an S3 endpoint: a forwarding proxy that answers chosen
requests with an error instead of passing them on.

Clients are pointed at the proxy's endpoint instead of the server's; everything
else is forwarded unchanged. A fault is armed for the next ``count`` requests
that match, e.g. throttling on listings::

    proxy.inject(Fault(503, "SlowDown", count=2, method="GET", query="list-type"))
"""

from __future__ import annotations

import http.client
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from helpers.service import Service

__all__ = ["Fault", "FaultyProxy"]


@dataclass
class Fault:
    """Answer the next ``count`` matching requests with ``status`` and S3 error ``code``.

    A request matches when its method is ``method`` (any if empty), its path contains
    ``path`` and its query string contains ``query``.
    """

    status: int
    code: str
    count: int = 1
    method: str = ""
    path: str = ""
    query: str = ""
    hits: int = 0

    def matches(self, method: str, target: str) -> bool:
        path, _, query = target.partition("?")
        return (
            self.hits < self.count
            and (not self.method or method == self.method)
            and self.path in path
            and self.query in query
        )


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Say nothing when a client hung up, as clients do when a test cuts them off.

        Printing a traceback from a server thread also parses source on Python 3.11,
        which can race a test's own parsing into a spurious ``SystemError`` (CPython
        gh-106905): a hypothesis test failed on it once.
        """
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultyProxy(Service):
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (``host:port``)."""

    def __init__(self, upstream_port: int) -> None:
        self._faults: list[Fault] = []
        self._received = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(_Forwarder):
            upstream = upstream_port
            owner = proxy

        self._handler = Handler
        self._server = _Server(("127.0.0.1", 0), Handler)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.down = False
        """While True the endpoint is gone: connections are refused, and those kept open
        are dropped at their next request."""

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def go_down(self) -> None:
        """Stop answering, as an endpoint that stopped: refuse and drop every connection."""
        self.down = True
        self.stop()

    def come_back(self) -> None:
        """Answer again on the same port."""
        self._server = _Server(("127.0.0.1", self._port), self._handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.down = False
        self.start()

    def inject(self, fault: Fault) -> Fault:
        """Arm ``fault``; its ``hits`` count the requests it answered."""
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def requests(self) -> int:
        """How many requests the proxy has received."""
        with self._lock:
            return self._received

    def take_fault(self, method: str, target: str) -> Fault | None:
        """The armed fault that answers this request, counting it and the hit."""
        with self._lock:
            self._received += 1
            for fault in self._faults:
                if fault.matches(method, target):
                    fault.hits += 1
                    return fault
        return None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Forwarder(BaseHTTPRequestHandler):
    upstream: ClassVar[int]
    owner: ClassVar[Any]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read outcomes, not access logs."""

    def _handle(self) -> None:
        if self.owner.down:  # a connection kept open from before: dropped unanswered
            self.close_connection = True
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = self.owner.take_fault(self.command, self.path)
        if fault is not None:
            message = (
                f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{fault.code}</Code>"
                f"<Message>injected by the test</Message></Error>"
            ).encode()
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(message)
            return
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            content = answer.read()
            self.send_response(answer.status, answer.reason)
            # A HEAD answer keeps the upstream's Content-Length: it is the object's size.
            dropped = {"transfer-encoding", "connection"}
            if self.command != "HEAD":
                dropped.add("content-length")
            for key, value in answer.getheaders():
                if key.lower() not in dropped:
                    self.send_header(key, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)
        finally:
            upstream.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle
