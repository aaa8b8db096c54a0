"""Arrow batch shaping for the reader runtime: exact schema, bounded size.

Spark checks the first batch of a task against the declared schema (names,
types, order, nullability) and trusts the rest; :func:`conform` makes every
batch pass that check, and :class:`BatchAssembler` cuts and coalesces batches
to at most ``max_rows`` rows and about ``max_bytes`` bytes. :func:`fit_columns`
is the column matching both :func:`conform` and the file formats use.
"""

from __future__ import annotations

from typing import TypeVar

import pyarrow as pa

from sources.errors import SchemaMismatchError

__all__ = [
    "BatchAssembler",
    "ColumnMismatch",
    "MissingColumn",
    "NullsInNotNullColumn",
    "UnconvertibleColumn",
    "conform",
    "fit_columns",
]

Data = TypeVar("Data", pa.Table, pa.RecordBatch)


class ColumnMismatch(ValueError):
    """A column of some data does not fit the field of a schema it should have."""

    def __init__(self, target: pa.Field) -> None:
        super().__init__(target.name)
        self.target = target


class MissingColumn(ColumnMismatch):
    """The data has no column named as the field."""


class UnconvertibleColumn(ColumnMismatch):
    """The column's type does not cast safely to the field's."""

    def __init__(self, target: pa.Field, produced: pa.DataType, error: pa.ArrowException) -> None:
        super().__init__(target)
        self.produced = produced
        self.error = error


class NullsInNotNullColumn(ColumnMismatch):
    """The column has nulls, and the field is NOT NULL."""

    def __init__(self, target: pa.Field, null_count: int) -> None:
        super().__init__(target)
        self.null_count = null_count


def fit_columns(data: Data, schema: pa.Schema, *, missing_as_nulls: bool) -> list[pa.Array]:
    """The columns of ``data`` for each field of ``schema``: selected by name and cast safely.

    A column missing from ``data`` is all nulls if ``missing_as_nulls`` and the
    field is nullable. Raises the :class:`ColumnMismatch` of the first field
    that does not fit.
    """
    columns = []
    for target in schema:
        index = data.schema.get_field_index(target.name)
        if index < 0:
            if not (missing_as_nulls and target.nullable):
                raise MissingColumn(target)
            columns.append(pa.nulls(data.num_rows, target.type))
            continue
        column = data.column(index)
        if not column.type.equals(target.type):
            try:
                column = column.cast(target.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise UnconvertibleColumn(target, column.type, error) from None
        if not target.nullable and column.null_count:
            raise NullsInNotNullColumn(target, column.null_count)
        columns.append(column)
    return columns


def conform(batch: pa.RecordBatch, schema: pa.Schema, origin: str) -> pa.RecordBatch:
    """Return ``batch`` with exactly ``schema``: columns selected by name and cast safely.

    ``origin`` names where the batch came from (a split) in error messages.
    """
    if batch.schema.equals(schema):
        return batch
    try:
        columns = fit_columns(batch, schema, missing_as_nulls=False)
    except MissingColumn as problem:
        raise SchemaMismatchError(
            f"{origin} produced no column '{problem.target.name}' "
            f"(it produced {batch.schema.names}); the declared schema is {schema}."
        ) from None
    except UnconvertibleColumn as problem:
        raise SchemaMismatchError(
            f"{origin} produced column '{problem.target.name}' as {problem.produced}, "
            f"which does not convert to the declared {problem.target.type}: {problem.error}"
        ) from None
    except NullsInNotNullColumn as problem:
        raise SchemaMismatchError(
            f"{origin} produced {problem.null_count} null values in column "
            f"'{problem.target.name}', which is declared NOT NULL."
        ) from None
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class BatchAssembler:
    """Cuts large batches and coalesces small ones to a bounded size.

    Batches of one schema go in with ``add``; ready batches come out of ``add``
    and, at the end, ``flush``. A batch within the bounds comes out whole, alone or
    joined with its neighbours while they fit together; a batch over the bounds is
    cut, its first piece topping up what is waiting. So the assembler copies only
    batches it joins, and never cuts one that fits.
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
        if batch.num_rows <= rows_limit:
            if self._pending_rows + batch.num_rows > rows_limit or (
                self._pending_bytes + batch.num_rows * bytes_per_row > self._max_bytes
            ):
                ready.extend(self.flush())
            self._keep(batch, bytes_per_row, rows_limit, ready)
            return ready
        if self._pending_rows >= rows_limit:  # waiting rows of narrower batches
            ready.extend(self.flush())
        offset = 0
        while offset < batch.num_rows:
            piece = batch.slice(offset, rows_limit - self._pending_rows)
            offset += piece.num_rows
            self._keep(piece, bytes_per_row, rows_limit, ready)
        return ready

    def _keep(
        self,
        piece: pa.RecordBatch,
        bytes_per_row: int,
        rows_limit: int,
        ready: list[pa.RecordBatch],
    ) -> None:
        """Add ``piece`` to what is waiting; once that is full, move it to ``ready``."""
        self._pending.append(piece)
        self._pending_rows += piece.num_rows
        self._pending_bytes += piece.num_rows * bytes_per_row
        if self._pending_rows >= rows_limit or self._pending_bytes >= self._max_bytes:
            ready.extend(self.flush())

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
