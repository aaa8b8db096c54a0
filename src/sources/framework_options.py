"""The options splitsource takes on every source, beside the source's own.

:data:`READ_OPTIONS` matter to any read, :data:`STREAM_OPTIONS` to ``spark.readStream``;
:func:`framework_options` gives both for one source class, which
:meth:`~sources.api.Source.from_spark_options` parses with the source's own options, in
Spark and in plain Python alike.
"""

from __future__ import annotations

from sources.capabilities import proportional_record_limit
from sources.options import Option
from sources.outages import OUTAGE_TIMEOUT

__all__ = [
    "MAX_BYTES_PER_BATCH",
    "MAX_RECORDS_PER_BATCH",
    "READ_OPTIONS",
    "STREAM_OPTIONS",
    "framework_options",
    "stream_options_of",
]

MAX_RECORDS_PER_BATCH = 10_000
"""The most rows in one Arrow batch handed to Spark when neither the user nor the source
says (``maxRecordsPerBatch``)."""
MAX_BYTES_PER_BATCH = 16 << 20
"""The default of ``maxBytesPerBatch``: about the most bytes in one Arrow batch."""

READ_OPTIONS: tuple[Option, ...] = (
    Option.integer(
        "numPartitions",
        "spread the splits over this many Spark partitions, balanced by size",
        default=None,
        minimum=1,
    ).listed(
        "spread the splits over this many partitions (fewer if there are fewer splits), "
        "balanced by estimated size; at least 1"
    ),
    Option.size(
        "maxPartitionBytes",
        "pack consecutive splits into partitions of at most this size",
        default=None,
    ).listed(
        "pack consecutive splits into partitions of at most this estimated size; ignored "
        "when `numPartitions` is set"
    ),
    Option.integer(
        "maxRecordsPerBatch",
        "most rows in one Arrow batch handed to Spark "
        f"(default: the source's, else {MAX_RECORDS_PER_BATCH})",
        default=None,
        minimum=1,
    ).listed(
        "most rows in one Arrow batch handed to Spark; at least 1",
        shown="the source's (`splitsource.kafka`: `50000`, `splitsource.files`: `65536`), "
        f"else `{MAX_RECORDS_PER_BATCH}`",
    ),
    Option.size(
        "maxBytesPerBatch",
        "about the most bytes in one Arrow batch handed to Spark",
        default=MAX_BYTES_PER_BATCH,
    ).listed(
        "about the most bytes in one Arrow batch handed to Spark",
        shown=f"`16m` ({MAX_BYTES_PER_BATCH})",
    ),
    Option.choice(
        "pushFilters",
        "let the source use the query's filters to read less: auto (where Spark allows it "
        "safely), true, false",
        ("auto", "true", "false"),
        default="auto",
    ).listed(
        "bounded reads: let a source that can (`splitsource.files`, `splitsource.kafka`) use "
        "the query's filters to read less; `auto` does where Spark plans each query afresh "
        "after a pushdown (not up to Spark 4.3, see [files.md](files.md#reading-less)), "
        "`true` always (needs `spark.sql.python.filterPushdown.enabled=true`), `false` never"
    ),
    Option.duration(
        "outageTimeout",
        "how long a read waits out an outage of the system it reads before it fails",
        default=OUTAGE_TIMEOUT,
    ).listed(
        "how long the driver's calls and each reader task wait out an outage of the "
        "system the source reads (a refused connection, a server restarting, a broker "
        "without leaders), trying again with backoff, before the read fails; see "
        "[what a stream survives](operations.md) (a duration)",
        shown="`15m`",
    ),
    Option.integer(
        "fetchQueueCapacity",
        "Arrow batches a task reads ahead of Spark on a thread of its own; 0: none, the "
        "task's thread reads (default: the source's)",
        default=None,
        minimum=0,
    ).listed(
        "Arrow batches a task reads ahead of Spark, on a thread of its own; `0` reads on "
        "the task's own thread, with none read ahead",
        shown="the source's (`splitsource.numbers` and local files: `0`), else `4`",
    ),
)
"""Options every splitsource format accepts, besides the source's own."""


STREAM_OPTIONS: tuple[Option, ...] = (
    Option.integer(
        "maxRecordsPerTrigger",
        "most records one micro-batch reads, shared fairly across splits",
        default=None,
        minimum=1,
    )
    .lands_in("max_records")
    .listed(
        "most records one micro-batch reads, over all splits in flight, shared max-min "
        "fairly; at least 1"
    ),
    Option.integer(
        "maxSplitsPerTrigger", "most new splits (files) one micro-batch takes", None, minimum=1
    )
    .lands_in("max_splits")
    .listed("most new splits (files, partitions) one micro-batch admits; at least 1"),
    Option.size(
        "maxBytesPerTrigger", "about the most bytes of new splits one micro-batch takes", None
    )
    .lands_in("max_bytes")
    .listed(
        "about the most bytes of new splits one micro-batch admits, by their "
        "`estimated_bytes()` (a size)"
    ),
    Option.integer(
        "minRecordsPerTrigger",
        "wait for at least this many records before a micro-batch, up to maxTriggerDelay",
        default=None,
        minimum=1,
    )
    .lands_in("min_records")
    .listed(
        "plan no micro-batch until at least this many records are waiting, or "
        "`maxTriggerDelay` has passed; at least 1"
    ),
    Option.duration("maxTriggerDelay", "longest wait for minRecordsPerTrigger", default=15 * 60.0)
    .lands_in("max_trigger_delay")
    .listed(
        "longest wait for `minRecordsPerTrigger`, counted from the last micro-batch (a duration)",
        shown="`15m`",
    ),
    Option.duration(
        "maxEventTimeDrift",
        "align splits in event time: read no record this far past the slowest split",
        default=None,
    ).listed(
        "keep splits together in event time: each micro-batch reads no record this far or "
        "further past the slowest split's event time (a duration such as `1 minute`; at "
        "most the watermark delay, so that a catch-up drops nothing as late); for sources "
        "that know event time (Kafka; sqlite with `eventTimeColumn`; files with `eventTime`); "
        "see [event-time alignment](event-time.md)"
    ),
    Option.duration(
        "eventTimeIdleTimeout",
        "how long a split with nothing to read holds the others back in event time",
        default=60.0,
    ).listed(
        "how long a split that has read all it could still holds the others back under "
        "`maxEventTimeDrift` (a duration)",
        shown="`1m`",
    ),
    Option.duration(
        "discoveryInterval", "time between two discoveries of new splits", default=10.0
    ).listed(
        "time between two discoveries of new splits by a periodic enumerator (a duration)",
        shown="`10s`",
    ),
    Option.string(
        "stateLocation",
        "directory (any fsspec URL) for enumerator state too large for an offset",
        default=None,
    ).listed(
        "directory, any fsspec URL, for enumerator state too large for an offset and for "
        "`stop_gracefully`"
    ),
    Option.secret_json_object(
        "stateStorageOptions",
        "JSON object of fsspec arguments for stateLocation (default: the source's own, "
        "for a location on the filesystem it reads)",
        default=None,
    ).listed(
        "JSON object of fsspec arguments for `stateLocation` (credentials, endpoint); never "
        "echoed in errors",
        shown="the source's own for a location on its filesystem (files: its "
        "`storageOptions`), else none",
    ),
)
"""Options of every splitsource format that matter to ``spark.readStream``."""


def stream_options_of(source_class: type) -> tuple[Option, ...]:
    """The stream options ``source_class`` takes: :data:`STREAM_OPTIONS`, and its
    ``proportional_record_limit`` (Kafka's ``maxOffsetsPerTrigger``) if it has one."""
    own = proportional_record_limit(source_class)
    return STREAM_OPTIONS if own is None else (*STREAM_OPTIONS, own)


def framework_options(source_class: type) -> tuple[Option, ...]:
    """Every option splitsource itself takes on ``source_class``: :data:`READ_OPTIONS` and
    its :func:`stream_options_of`."""
    return (*READ_OPTIONS, *stream_options_of(source_class))
