"""Kafka consumers kept between the tasks of one Python worker. Executor only.

Spark runs task after task in the same Python worker process, micro-batch after
micro-batch. A consumer made for a task and closed at its end costs a connection,
metadata and a first fetch in every task of every batch; kept here, assigned to its
partition, it goes on fetching while the worker waits, and the next task that reads
the partition from where it stopped finds the records already there.

A consumer is lent to one reader at a time, for one topic partition. It is kept under
its whole configuration (group, brokers, security, every ``kafka.*`` option) and that
partition, so that no reader gets a consumer made with other settings. It comes back
with the offset its next message will have and the messages it fetched past the end
of the range just read, which the next reader of that offset takes first. A consumer
idle for its ``idle_timeout`` is closed by a timer thread (librdkafka's consumers keep
fetching while idle, unlike Java's); past ``capacity``, the one idle longest is. A
reader that failed closes its consumer instead of returning it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition

__all__ = ["CONSUMERS", "ConsumerPool", "LentConsumer"]

ConfigKey = tuple[tuple[str, str], ...]


@dataclass(eq=False)
class LentConsumer:
    """A consumer assigned to one partition, with what it fetched past a range's end."""

    consumer: Consumer
    config: ConfigKey
    topic: str
    partition: int
    next_offset: int
    """The offset of the next record this consumer delivers (of ``leftover``'s first)."""

    idle_timeout: float
    """Seconds this consumer may wait idle in the pool before it is closed."""

    leftover: list[Message] = field(default_factory=list)
    """Records fetched past the end of the last range read, in offset order."""

    idle_since: float = 0.0

    def move_to(self, topic: str, partition: int, offset: int) -> None:
        """Assign the consumer to ``offset`` of ``topic``/``partition``."""
        self.consumer.assign([TopicPartition(topic, partition, offset)])
        self.topic, self.partition, self.next_offset = topic, partition, offset
        self.leftover = []


class ConsumerPool:
    """The idle consumers of this process, by configuration and partition. Thread-safe."""

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._idle: list[LentConsumer] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self.created = 0
        """How many consumers this pool has made, for tests and the curious."""

    def lend(
        self,
        config: Mapping[str, Any],
        topic: str,
        partition: int,
        offset: int,
        idle_timeout: float,
        spare: LentConsumer | None = None,
    ) -> LentConsumer:
        """A consumer of ``config`` that delivers ``topic``/``partition`` from ``offset``.

        One an earlier task left on that partition if there is one (at ``offset``
        first), and then ``spare``, the caller's consumer it no longer needs, goes back
        to the pool; else ``spare`` moved there; else a new one.
        """
        key = _key(config)
        with self._lock:
            where = (key, topic, partition)
            exact = [c for c in self._idle if (c.config, c.topic, c.partition) == where]
            chosen = next((c for c in exact if c.next_offset == offset), None)
            chosen = chosen or (exact[0] if exact else None)
            if chosen is not None:
                self._idle.remove(chosen)
        if chosen is None and spare is not None:
            chosen = spare
        elif chosen is None:
            chosen = LentConsumer(Consumer(dict(config)), key, topic, partition, -1, idle_timeout)
            with self._lock:
                self.created += 1
        elif spare is not None:
            self.give_back(spare)
        chosen.idle_timeout = idle_timeout
        if (chosen.topic, chosen.partition, chosen.next_offset) != (topic, partition, offset):
            chosen.move_to(topic, partition, offset)
        return chosen

    def give_back(self, lent: LentConsumer) -> None:
        """Keep ``lent`` for a later reader; close the one idle longest past capacity."""
        lent.idle_since = time.monotonic()
        with self._lock:
            self._idle.append(lent)
            evicted = self._idle[: max(0, len(self._idle) - self._capacity)]
            del self._idle[: len(evicted)]
            self._start_timer()
            self._changed.notify()
        for stale in evicted:
            _close(stale)

    def discard(self, lent: LentConsumer) -> None:
        """Close ``lent``: its reader failed, so its state is not trusted."""
        _close(lent)

    def idle_count(self, group_id: str | None = None) -> int:
        """How many consumers (of ``group_id``, if given) wait for a reader."""
        with self._lock:
            return sum(group_id in (None, dict(c.config).get("group.id")) for c in self._idle)

    def close_idle(self) -> int:
        """Close the consumers idle for their ``idle_timeout`` or longer; how many."""
        now = time.monotonic()
        with self._lock:
            stale = [c for c in self._idle if now - c.idle_since >= c.idle_timeout]
            self._idle = [c for c in self._idle if c not in stale]
        for lent in stale:
            _close(lent)
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


def _close(lent: LentConsumer) -> None:
    lent.leftover = []
    with contextlib.suppress(Exception):  # one that cannot close is dropped all the same
        lent.consumer.close()


CONSUMERS = ConsumerPool()
"""The pool of this process, shared by every Kafka split reader in it."""
