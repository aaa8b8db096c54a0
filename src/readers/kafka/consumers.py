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

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException

from readers.idle_pool import IdlePool

__all__ = ["CONSUMERS", "ConsumerPool"]

ConfigKey = tuple[tuple[str, str], ...]


class ConsumerPool:
    """The idle consumers of this process, by configuration. Thread-safe."""

    def __init__(self, capacity: int = 64) -> None:
        self._idle = IdlePool[ConfigKey, Consumer](
            Consumer.close, "splitsource-kafka-consumers", capacity, idle_timeout=60.0
        )

    @property
    def created(self) -> int:
        """How many consumers this pool has made, for tests and the curious."""
        return self._idle.created

    def lend(self, config: Mapping[str, Any]) -> Consumer:
        """A consumer of ``config``: the one given back last, if any, else a new one."""
        return self._idle.lend(_key(config), lambda: Consumer(dict(config)))

    def give_back(self, consumer: Consumer, config: Mapping[str, Any], idle_timeout: float) -> None:
        """Keep ``consumer``, unassigned, for a later reader of ``config``; close it after
        ``idle_timeout`` seconds without one."""
        try:
            consumer.unassign()
        except KafkaException:  # a consumer that cannot let go of its partition is not kept
            self._idle.discard(consumer)
            return
        self._idle.give_back(_key(config), consumer, idle_timeout)

    def discard(self, consumer: Consumer) -> None:
        """Close ``consumer``: its reader failed, so its state is not trusted."""
        self._idle.discard(consumer)

    def idle_count(self, group_id: str | None = None) -> int:
        """How many consumers (of ``group_id``, if given) wait for a reader."""
        if group_id is None:
            return self._idle.idle_count()
        return self._idle.idle_count(lambda key: dict(key).get("group.id") == group_id)

    def close_idle(self) -> int:
        """Close the consumers idle for their ``idle_timeout`` or longer; how many."""
        return self._idle.close_idle()


def _key(config: Mapping[str, Any]) -> ConfigKey:
    return tuple(sorted((name, str(value)) for name, value in config.items()))


CONSUMERS = ConsumerPool()
"""The pool of this process, shared by every Kafka split reader in it."""
