"""Arrow batch shaping for the reader runtime: exact schema, bounded size.

Spark checks the first batch of a task against the declared schema (names,
types, order, nullability) and trusts the rest; :func:`conform` makes every
batch pass that check, and :class:`BatchAssembler` cuts and coalesces batches
to at most ``max_rows`` rows and about ``max_bytes`` bytes.
"""

from __future__ import annotations

import pyarrow as pa

from sources.errors import SchemaMismatchError

__all__ = ["BatchAssembler", "conform"]


def conform(batch: pa.RecordBatch, schema: pa.Schema, origin: str) -> pa.RecordBatch:
    """Return ``batch`` with exactly ``schema``: columns selected by name and cast safely.

    ``origin`` names where the batch came from (a split) in error messages.
    """
    if batch.schema.equals(schema):
        return batch
    columns = []
    for target in schema:
        index = batch.schema.get_field_index(target.name)
        if index < 0:
            raise SchemaMismatchError(
                f"{origin} produced no column '{target.name}' "
                f"(it produced {batch.schema.names}); the declared schema is {schema}."
            )
        column = batch.column(index)
        if not column.type.equals(target.type):
            try:
                column = column.cast(target.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                produced = batch.schema.field(index).type
                raise SchemaMismatchError(
                    f"{origin} produced column '{target.name}' as {produced}, "
                    f"which does not convert to the declared {target.type}: {error}"
                ) from None
        if not target.nullable and column.null_count:
            raise SchemaMismatchError(
                f"{origin} produced {column.null_count} null values in column "
                f"'{target.name}', which is declared NOT NULL."
            )
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class BatchAssembler:
    """Cuts large batches and coalesces small ones to a bounded size.

    Batches of one schema go in with ``add``; ready batches come out of ``add``
    and, at the end, ``flush``.
    """

    def __init__(self, schema: pa.Schema, max_rows: int, max_bytes: int) -> None:
        self._schema = schema
        self._max_rows = max_rows
        self._max_bytes = max_bytes
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def add(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """Take ``batch``; return the batches that are now full."""
        ready: list[pa.RecordBatch] = []
        if batch.num_rows == 0:
            return ready
        bytes_per_row = max(1, batch.nbytes // batch.num_rows)
        rows_limit = max(1, min(self._max_rows, self._max_bytes // bytes_per_row))
        offset = 0
        while offset < batch.num_rows:
            room = rows_limit - self._pending_rows
            if room <= 0:
                ready.append(self._take_pending())
                continue
            piece = batch.slice(offset, room)
            offset += piece.num_rows
            self._pending.append(piece)
            self._pending_rows += piece.num_rows
            self._pending_bytes += piece.num_rows * bytes_per_row
            if self._pending_rows >= rows_limit or self._pending_bytes >= self._max_bytes:
                ready.append(self._take_pending())
        return ready

    def flush(self) -> list[pa.RecordBatch]:
        """Return what is still buffered, as at most one batch."""
        return [self._take_pending()] if self._pending else []

    def _take_pending(self) -> pa.RecordBatch:
        pieces = self._pending
        self._pending = []
        self._pending_rows = 0
        self._pending_bytes = 0
        if len(pieces) == 1:
            return pieces[0]
        return pa.concat_batches(pieces)
