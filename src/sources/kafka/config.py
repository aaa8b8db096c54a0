"""Kafka client settings from ``kafka.*`` options: checked, translated, and never printed.

Driver and executors build their confluent-kafka clients from one
:class:`KafkaClientConfig`. It refuses the settings splitsource must own (as
Spark's Kafka source does), turns a Java ``sasl.jaas.config`` for PLAIN or SCRAM
into librdkafka's ``sasl.username`` / ``sasl.password``, and hides secret values
from ``repr`` so that they cannot reach logs, offsets or error messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from sources.errors import InvalidOptionError

__all__ = ["KafkaClientConfig", "is_secret"]

_OWNED = MappingProxyType(
    {
        "auto.offset.reset": "set startingOffsets instead",
        "enable.auto.commit": "offsets are tracked in Spark's checkpoint; see commitOffsets",
        "enable.auto.offset.store": "offsets are tracked in Spark's checkpoint",
        "key.deserializer": "keys are always returned as binary; cast or decode them in Spark",
        "value.deserializer": "values are always returned as binary; cast or decode them in Spark",
        "interceptor.classes": "Java interceptors do not exist in confluent-kafka",
        "enable.partition.eof": "the reader relies on its own setting",
    }
)
_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential", "key.pem", "keystore")
_JAAS_FIELD = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MECHANISMS = MappingProxyType({"PlainLoginModule": "PLAIN", "ScramLoginModule": None})


def is_secret(key: str) -> bool:
    """True if the value of the Kafka setting ``key`` must never be shown."""
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS)


class KafkaClientConfig(Mapping[str, str]):
    """The librdkafka settings the user gave as ``kafka.*`` options; secrets hidden in ``repr``."""

    def __init__(self, settings: Mapping[str, str], source: str = "splitsource.kafka") -> None:
        values = {key.lower(): value for key, value in settings.items()}
        for key, why in _OWNED.items():
            if key in values:
                raise InvalidOptionError(source, f"kafka.{key}", f"is not supported: {why}")
        if not values.get("bootstrap.servers", "").strip():
            raise InvalidOptionError(
                source,
                "kafka.bootstrap.servers",
                "is required: a comma-separated list of host:port of the Kafka brokers",
            )
        if "sasl.jaas.config" in values:
            values = {**_from_jaas(values.pop("sasl.jaas.config"), source), **values}
        self._values = values

    @property
    def bootstrap_servers(self) -> str:
        """The brokers to connect to, as given."""
        return self._values["bootstrap.servers"]

    def client(self, **overrides: Any) -> dict[str, Any]:
        """A confluent-kafka configuration: these settings with ``overrides`` on top."""
        return {**self._values, **overrides}

    def consumer(self, group_id: str) -> dict[str, Any]:
        """A consumer's configuration: these settings, for a consumer that is assigned
        offsets, never joins or commits to ``group_id``, and reports each partition's end."""
        return self.client(
            **{
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                "isolation.level": self.get("isolation.level", "read_uncommitted"),
            }
        )

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {key: "***" if is_secret(key) else value for key, value in self._values.items()}
        return f"KafkaClientConfig({shown})"


def _from_jaas(jaas: str, source: str) -> dict[str, str]:
    """librdkafka settings for a Java JAAS line of the PLAIN or SCRAM login module."""
    module = next((name for name in _JAAS_MECHANISMS if name in jaas), None)
    fields = dict(_JAAS_FIELD.findall(jaas))
    if module is None or "username" not in fields or "password" not in fields:
        raise InvalidOptionError(
            source,
            "kafka.sasl.jaas.config",
            "only the PlainLoginModule and ScramLoginModule with username and password can "
            "be translated for confluent-kafka; give kafka.sasl.username and "
            "kafka.sasl.password instead",
        )
    translated = {"sasl.username": fields["username"], "sasl.password": fields["password"]}
    mechanism = _JAAS_MECHANISMS[module]
    if mechanism is not None:
        translated["sasl.mechanism"] = mechanism
    return translated
