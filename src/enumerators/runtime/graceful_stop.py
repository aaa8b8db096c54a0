"""Graceful stop: a stream stops admitting data once asked, so a restart replays nothing.

The protocol, through two control markers in the state store at ``stateLocation``:

1. :meth:`GracefulStop.request` (the user's side, :func:`sources.spark.stop_gracefully`)
   writes ``stop-request``: a token and an expiry time.
2. The stream's next planning call, which Spark makes only once the batch in flight
   has committed, sees the request in :meth:`GracefulStop.requested`: it admits
   nothing more and acknowledges by copying the request to ``stop-ack``.
3. The user's side sees its token acknowledged, stops the query and :meth:`clear`\\ s
   both markers.

A request older than its expiry was left by a ``stop_gracefully`` that died; the
stream deletes it instead of honouring it, so it cannot stall a later run.
"""

from __future__ import annotations

import json
import time
import uuid

from enumerators.runtime.state_store import StateStore

__all__ = ["GracefulStop"]

STOP_REQUEST = "stop-request"
STOP_ACK = "stop-ack"


class GracefulStop:
    """Both sides of the graceful-stop protocol over ``store``; see the module docstring."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def request(self, timeout: float) -> str:
        """Ask the stream to stop admitting data; the request expires after ``timeout`` s.

        Returns the token that :meth:`acknowledged` looks for.
        """
        token = uuid.uuid4().hex
        request = {"token": token, "expires_at": time.time() + timeout}
        self._store.write_marker(STOP_REQUEST, json.dumps(request).encode())
        return token

    def acknowledged(self, token: str) -> bool:
        """Whether the stream has acknowledged the request with ``token``."""
        ack = self._store.read_marker(STOP_ACK)
        return ack is not None and json.loads(ack).get("token") == token

    def clear(self) -> None:
        """Remove the request and its acknowledgement."""
        self._store.delete_marker(STOP_REQUEST)
        self._store.delete_marker(STOP_ACK)

    def requested(self) -> bool:
        """The stream's side: whether a live stop is requested; if so, acknowledge it."""
        request = self._store.read_marker(STOP_REQUEST)
        if request is None:
            return False
        if json.loads(request)["expires_at"] < time.time():
            self._store.delete_marker(STOP_REQUEST)
            return False
        self._store.write_marker(STOP_ACK, request)
        return True
