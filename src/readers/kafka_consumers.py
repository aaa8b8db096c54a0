"""Kafka consumers kept between the tasks of one Python worker. Executor only.

Spark runs task after task in the same Python worker process, micro-batch after
micro-batch. A consumer made for a task and closed at its end costs a connection
and metadata in every task of every batch; kept here, the next task of the same
settings borrows it connected.

A consumer is lent to one reader at a time and kept under its whole configuration
(group, brokers, security, every ``kafka.*`` option), so that no reader gets a
consumer made with other settings. It comes back unassigned: an idle consumer
fetches nothing, so it costs the brokers no requests and the worker no memory for
records nobody reads (librdkafka's consumers fetch in the background while assigned,
unlike Java's). A consumer idle for its ``idle_timeout`` is closed by a timer thread;
past ``capacity`` idle consumers, the one idle longest is. A reader that failed closes
its consumer instead of returning it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException

__all__ = ["CONSUMERS", "ConsumerPool"]

ConfigKey = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Idle:
    consumer: Consumer
    config: ConfigKey
    idle_timeout: float
    since: float


class ConsumerPool:
    """The idle consumers of this process, by configuration. Thread-safe."""

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._idle: list[_Idle] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self.created = 0
        """How many consumers this pool has made, for tests and the curious."""

    def lend(self, config: Mapping[str, Any]) -> Consumer:
        """A consumer of ``config``: the one given back last, if any, else a new one."""
        key = _key(config)
        with self._lock:
            kept = next((c for c in reversed(self._idle) if c.config == key), None)
            if kept is not None:
                self._idle.remove(kept)
                return kept.consumer
            self.created += 1
        return Consumer(dict(config))

    def give_back(self, consumer: Consumer, config: Mapping[str, Any], idle_timeout: float) -> None:
        """Keep ``consumer``, unassigned, for a later reader of ``config``; close it after
        ``idle_timeout`` seconds without one."""
        try:
            consumer.unassign()
        except KafkaException:  # a consumer that cannot let go of its partition is not kept
            _close(consumer)
            return
        with self._lock:
            self._idle.append(_Idle(consumer, _key(config), idle_timeout, time.monotonic()))
            evicted = self._idle[: max(0, len(self._idle) - self._capacity)]
            del self._idle[: len(evicted)]
            self._start_timer()
            self._changed.notify()
        for stale in evicted:
            _close(stale.consumer)

    @staticmethod
    def discard(consumer: Consumer) -> None:
        """Close ``consumer``: its reader failed, so its state is not trusted."""
        _close(consumer)

    def idle_count(self, group_id: str | None = None) -> int:
        """How many consumers (of ``group_id``, if given) wait for a reader."""
        with self._lock:
            return sum(group_id in (None, dict(c.config).get("group.id")) for c in self._idle)

    def close_idle(self) -> int:
        """Close the consumers idle for their ``idle_timeout`` or longer; how many."""
        now = time.monotonic()
        with self._lock:
            stale = [c for c in self._idle if now - c.since >= c.idle_timeout]
            self._idle = [c for c in self._idle if c not in stale]
        for idle in stale:
            _close(idle.consumer)
        return len(stale)

    def _start_timer(self) -> None:
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Thread(
                target=self._expire, name="splitsource-kafka-consumers", daemon=True
            )
            self._timer.start()

    def _expire(self) -> None:
        """Close idle consumers as they time out; end when none is left."""
        while True:
            with self._changed:
                if not self._idle:
                    self._timer = None
                    return
                wait = min(c.idle_timeout for c in self._idle) / 4
                self._changed.wait(min(max(wait, 0.05), 5.0))
            self.close_idle()


def _key(config: Mapping[str, Any]) -> ConfigKey:
    return tuple(sorted((name, str(value)) for name, value in config.items()))


def _close(consumer: Consumer) -> None:
    with contextlib.suppress(Exception):  # one that cannot close is dropped all the same
        consumer.close()


CONSUMERS = ConsumerPool()
"""The pool of this process, shared by every Kafka split reader in it."""
