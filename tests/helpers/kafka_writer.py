"""A writer that produces numbered records to a topic on a thread of its own, through outages."""

from __future__ import annotations

import threading
from typing import Any


class KafkaWriter:
    """Produces ``w<n>`` every ``interval`` seconds until stopped; ``delivered`` are the values
    the broker acknowledged. Idempotent, and patient without limit, so that a broker that
    is gone for a while gets each record once when it is back."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.01) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "message.timeout.ms": 0,  # no limit: a record waits for the broker to be back
                "linger.ms": 5,
            }
        )
        self._topic = topic
        self._interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-writer", daemon=True)
        self.delivered: list[str] = []
        self.failed: list[Any] = []
        self.sent = 0

    def __enter__(self) -> KafkaWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> list[str]:
        """Stop writing, wait for every record sent to be acknowledged; the values delivered."""
        self._stopping.set()
        self._thread.join()
        remaining = self._producer.flush(600)
        assert remaining == 0 and not self.failed, (remaining, self.failed[:3])
        return self.delivered

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            value = f"w{self.sent:07d}"
            self._producer.produce(self._topic, value.encode(), on_delivery=self._on_delivery)
            self.sent += 1
            self._producer.poll(0)

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is None:
            self.delivered.append(message.value().decode())
        else:
            self.failed.append(error)
