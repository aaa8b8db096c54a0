"""Hybrid sources: stages read one after another, such as an archive then Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource as ArchiveThenKafkaSource
    from sources.hybrid.source import HybridSource as HybridSource
    from sources.hybrid.source import HybridStage as HybridStage
    from sources.hybrid.source import SwitchContext as SwitchContext

__getattr__ = exported(
    __name__,
    {
        "HybridSource": "source",
        "HybridStage": "source",
        "SwitchContext": "source",
        "ArchiveThenKafkaSource": "archive_then_kafka",
    },
)
