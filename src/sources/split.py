"""Splits and boundedness: the vocabulary shared by enumerators and readers."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod

__all__ = ["Boundedness", "SourceSplit"]


class Boundedness(enum.Enum):
    """Whether a read ends by itself."""

    BOUNDED = "bounded"
    """The enumerator reaches an end of input: ``spark.read`` and ``Trigger.AvailableNow``."""

    CONTINUOUS_UNBOUNDED = "continuous_unbounded"
    """New splits or records keep coming: ``spark.readStream``."""


class SourceSplit(ABC):
    """A unit of work that one split reader reads: a file range, a Kafka partition, ...

    Splits are value objects: immutable, picklable and comparable, planned on
    the driver and read on an executor.
    """

    @property
    @abstractmethod
    def split_id(self) -> str:
        """An identifier that stays the same for the life of the split, across restarts."""

    def estimated_bytes(self) -> int | None:
        """How many bytes reading this split produces, or ``None`` if unknown.

        Used only to balance splits across Spark partitions.
        """
        return None
