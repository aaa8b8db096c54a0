"""Spark's watermark over a stream's micro-batches, for tests of event-time alignment."""

from __future__ import annotations

from collections.abc import Sequence


def late_records(batches: Sequence[Sequence[int]], delay_ms: int) -> int:
    """Records Spark drops as late when micro-batches read records of these event times
    (ms) in this order: those at or behind the watermark the batches before set (the
    largest event time read, minus ``delay_ms``)."""
    watermark, late = None, 0
    for batch in batches:
        if watermark is not None:
            late += sum(1 for event_time in batch if event_time <= watermark)
        if batch:
            newest = max(batch) - delay_ms
            watermark = newest if watermark is None else max(watermark, newest)
    return late
