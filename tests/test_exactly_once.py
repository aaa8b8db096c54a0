"""End-to-end exactly-once into Spark's parquet file sink, under SIGKILL.

Each test runs a real streaming job (:mod:`helpers.kill_job`) in a subprocess
and kills part of it with SIGKILL: the whole driver (Python and its JVM) at
random moments, or one Python worker in the middle of a read. The sink is read
back with Spark, whose ``_spark_metadata`` log ignores the partial files a
killed job leaves behind; it must hold every number exactly once.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from helpers.jobs import Job, assert_every_number_once
from sources.testing.streams import last_batch

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = 20240627


@dataclass(frozen=True)
class Workload:
    """A stream of the numbers ``0 .. last`` in ``batches`` micro-batches, and its kills."""

    format: str
    options: dict[str, Any]
    last: int
    batches: int
    kills: int
    min_mid_batch: int
    schema: str | None = None
    extra_batches: int = 0
    """How many micro-batches more than ``batches`` the runs may take: an empty first one
    before discovery has run, short ones while records are still arriving."""
    select: tuple[str, ...] = ()
    """SQL expressions that turn the read into one ``value BIGINT`` column, if needed."""

    def feed(self, directory: Path, run: int) -> None:
        """Before run ``run``: give the source what it should find by then (files only)."""


@dataclass(frozen=True)
class FileWorkload(Workload):
    """CSV files of ``FILE_ROWS`` numbers each, half there at the start, more after each kill."""

    def feed(self, directory: Path, run: int) -> None:
        total = self.batches
        first_half = total // 2
        upto = min(total, first_half + run * ((total - first_half) // self.kills + 1))
        for index in range(upto):
            path = directory / f"numbers-{index:03d}.csv"
            if path.exists():
                continue
            low = index * FILE_ROWS
            staged = directory.parent / f".{path.name}"
            staged.write_text("value\n" + "".join(f"{n}\n" for n in range(low, low + FILE_ROWS)))
            staged.rename(path)  # appear whole, as a writer that renames into place


@dataclass(frozen=True)
class S3FileWorkload(FileWorkload):
    """The file workload on S3: objects written whole (a PUT is atomic), state beside them.
    ``server`` and ``root`` (``bucket/prefix``) are set by the test."""

    server: Any = None
    root: str = ""

    def feed(self, directory: Path, run: int) -> None:
        super().feed(directory, run)
        fs = self.server.fs()
        for path in sorted(directory.glob("numbers-*.csv")):
            target = f"{self.root}/incoming/{path.name}"
            if not fs.exists(target):
                fs.put_file(str(path), target)


@dataclass(frozen=True)
class KafkaWorkload(Workload):
    """Numbers as Kafka records in four partitions (``n % 4``), number ``n`` at event time
    ``n * 20`` ms after the first feed's hour-old start: half there at the start, more
    after each kill. ``broker`` and ``topic`` are set by the test."""

    broker: Any = None
    topic: str = ""

    def feed(self, directory: Path, run: int) -> None:
        total = self.last + 1
        upto = min(total, total // 2 + run * (total // 2 // self.kills + 1))
        produced, began = directory / "produced", directory / "began"
        if not began.exists():
            began.write_text(str((int(time.time()) - 3600) * 1000))
        start = int(produced.read_text()) if produced.exists() else 0
        base = int(began.read_text())
        if upto > start:
            self.broker.produce(
                self.topic,
                [
                    {"value": str(n), "partition": n % 4, "timestamp": base + n * 20}
                    for n in range(start, upto)
                ],
            )
            produced.write_text(str(upto))


FILE_ROWS = 2_500
NUMBERS = Workload(
    "numbers",
    {"to": 199_999, "splits": 4, "maxRecordsPerTrigger": 5_000},
    last=199_999,
    batches=40,  # of 5,000 numbers, 1,250 from each split; the kills land in the first 15
    kills=4,
    min_mid_batch=2,
)
FILES = FileWorkload(
    "files",
    {"format": "csv", "header": "true", "maxFilesPerTrigger": 1, "discoveryInterval": "200ms"},
    last=40 * FILE_ROWS - 1,
    batches=40,  # one file each
    kills=3,
    min_mid_batch=1,
    schema="value bigint",
    extra_batches=1,
)

S3_FILES = S3FileWorkload(
    "files",
    {"format": "csv", "header": "true", "maxFilesPerTrigger": 1, "discoveryInterval": "200ms"},
    last=20 * FILE_ROWS - 1,
    batches=20,
    kills=2,
    min_mid_batch=1,
    schema="value bigint",
    extra_batches=1,
)

KAFKA = KafkaWorkload(
    "kafka",
    {
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": 5_000,
        "discoveryInterval": "1s",
        # Aligned in event time: each batch cuts every partition at one time, which a
        # restart must replay from the logged offsets alone.
        "maxEventTimeDrift": "1 minute",
        "eventTimeIdleTimeout": "2s",
    },
    last=149_999,
    batches=30,  # of up to 5,000 records
    kills=3,
    min_mid_batch=1,
    # Each run may end on a short batch, the first one may be empty, and a cut in event
    # time reads a little less than the 5,000 records a batch may.
    extra_batches=9,
    select=("CAST(CAST(value AS STRING) AS BIGINT) AS value",),
)

PROGRESS_TIMEOUT = 180.0
"""Longest wait for a restarted job to log or commit a micro-batch (JVM start included)."""
FINAL_TIMEOUT = 300.0
MAX_KILL_DELAY = 2.0
"""A restarted query's first micro-batch takes a few seconds, later ones about half a
second on two cores: kills land in either, or between two."""


def wait_for(condition: Callable[[], bool], timeout: float, job: Job) -> None:
    """Poll ``condition`` until it holds; fail if ``job`` ends or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if not job.running():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"no progress within {timeout:.0f}s\n{job.tail()}")
        time.sleep(0.05)


@dataclass(frozen=True)
class KillPoint:
    """Where the checkpoint stood when a kill landed (read after the kill, when it is frozen)."""

    offsets: int
    commits: int
    sink: int

    @property
    def mid_batch(self) -> bool:
        """A batch was planned and logged but not committed: the restart must replay it."""
        return self.offsets > self.commits

    @property
    def sink_ahead(self) -> bool:
        """The sink committed a batch the checkpoint had not: the replay must not rewrite it."""
        return self.sink > self.commits


@pytest.mark.timeout(1200)  # about 4 minutes alone on two cores; far more when they are busy
@pytest.mark.parametrize(
    "workload",
    [NUMBERS, FILES, S3_FILES, KAFKA],
    ids=["numbers", "files", "files-on-s3", "kafka"],
)
def test_driver_sigkill_at_random_moments_loses_and_duplicates_nothing(
    tmp_path: Path, jobs: list[Job], request: pytest.FixtureRequest, workload: Workload
) -> None:
    """SIGKILL the driver (Python and JVM) at random moments, then finish the stream.

    The restarts must replay a logged but uncommitted micro-batch with exactly the
    records it had (the source plans it from its logged offsets alone), and the sink
    must not keep a batch twice. The file workload also gets new files between runs.
    """
    rng = random.Random(SEED)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    options = dict(workload.options)
    if isinstance(workload, S3FileWorkload):
        server, bucket = request.getfixturevalue("s3"), request.getfixturevalue("bucket")
        workload = replace(workload, server=server, root=bucket)
        options.update(
            path=f"s3://{bucket}/incoming",
            stateLocation=f"s3://{bucket}/state",
            storageOptions=json.dumps(server.storage_options()),
        )
    elif isinstance(workload, FileWorkload):
        options.update(path=str(incoming), stateLocation=str(tmp_path / "state"))
    if isinstance(workload, KafkaWorkload):
        broker = request.getfixturevalue("kafka_broker")
        topic = f"exactly-once-{tmp_path.name}"
        broker.create_topic(topic, 4)
        workload = replace(workload, broker=broker, topic=topic)
        options.update(subscribe=topic, **{"kafka.bootstrap.servers": broker.bootstrap})
    settings: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "output": str(output),
        "format": workload.format,
        "options": options,
    }
    if workload.schema:
        settings["schema"] = workload.schema
    if workload.select:
        settings["select"] = list(workload.select)
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    sink = output / "_spark_metadata"
    kill_points: list[KillPoint] = []

    def progress_since(logged: int, committed: int) -> Callable[[], bool]:
        """A new micro-batch logged, or the replayed one committed."""
        return lambda: last_batch(offsets) > logged or last_batch(commits) > committed

    def standing_by(name: str) -> Job:
        """A job that starts Spark and waits for its go file; see :mod:`helpers.kill_job`."""
        jobs.append(Job.standing_by(settings, tmp_path, name))
        return jobs[-1]

    # Each run starts Spark while the previous one runs, and goes once that one is dead.
    upcoming = standing_by("run-0")
    for run in range(workload.kills):
        workload.feed(incoming, run)
        job = upcoming
        job.wait_until_ready(PROGRESS_TIMEOUT)
        logged, committed = last_batch(offsets), last_batch(commits)
        job.go("continuous")
        upcoming = standing_by(f"run-{run + 1}" if run + 1 < workload.kills else "final")
        wait_for(progress_since(logged, committed), PROGRESS_TIMEOUT, job)
        time.sleep(rng.uniform(0.0, MAX_KILL_DELAY))
        if not job.running():
            assert job.wait(10) == 0 and job.done(), job.tail()
            break  # the input ran out before this kill: enough kills are asserted below
        job.kill()
        kill_points.append(KillPoint(last_batch(offsets), last_batch(commits), last_batch(sink)))

    final = upcoming
    workload.feed(incoming, workload.kills)
    final.wait_until_ready(PROGRESS_TIMEOUT)
    final.go("availableNow")
    assert final.wait(FINAL_TIMEOUT) == 0, final.tail()
    assert final.done() is not None, final.tail()

    mid_batch = sum(p.mid_batch for p in kill_points)
    summary = (
        f"{len(kill_points)} kills, {mid_batch} mid-batch, "
        f"{sum(p.sink_ahead for p in kill_points)} after the sink's commit; last batch in "
        f"(offsets, commits, sink) at each: {[(p.offsets, p.commits, p.sink) for p in kill_points]}"
    )
    print(summary)
    assert len(kill_points) >= workload.kills, summary
    # The kills must hit the window that makes exactly-once hard: a micro-batch
    # logged in offsets/ but not committed, which the restart re-plans from its
    # logged offsets and must read identically.
    assert mid_batch >= workload.min_mid_batch, summary
    most = workload.batches - 1 + workload.extra_batches
    assert workload.batches - 1 <= last_batch(commits) <= most, "replays must not add batches"
    if isinstance(workload, KafkaWorkload):  # aligned: each offset says where partitions stood
        assert '"eventTimes"' in (offsets / str(last_batch(offsets))).read_text()

    assert_every_number_once(request.getfixturevalue("spark"), output, workload.last)


@pytest.mark.parametrize("format_name", ["killonce", "killoncekafka"])
def test_python_worker_killed_mid_read_is_retried_exactly_once(
    tmp_path: Path, jobs: list[Job], request: pytest.FixtureRequest, format_name: str
) -> None:
    """A reader SIGKILLs its Python worker after handing Spark part of its range.

    Spark retries the task (``local[2,4]``: four attempts); the retry reads the same
    range from the split in the partition, and the sink keeps only the retry's rows.
    """
    last = 399_999
    marker = tmp_path / "killed"
    # Two micro-batches, each two tasks of 100,000 records: two fetches and more.
    options: dict[str, Any] = {"maxRecordsPerTrigger": 200_000, "killMarker": str(marker)}
    settings: dict[str, Any] = {
        "checkpoint": str(tmp_path / "checkpoint"),
        "output": str(tmp_path / "output"),
        "format": format_name,
        "master": "local[2,4]",  # up to 4 attempts per task
        "trigger": "availableNow",
        "options": options,
    }
    if format_name == "killonce":
        options.update(to=last, splits=2)
    else:
        broker = request.getfixturevalue("kafka_broker")
        topic = f"worker-kill-{tmp_path.name}"
        broker.create_topic(topic, 2)
        broker.produce(topic, [str(n) for n in range(last + 1)])
        options.update(subscribe=topic, startingOffsets="earliest")
        options["kafka.bootstrap.servers"] = broker.bootstrap
        settings["select"] = ["CAST(CAST(value AS STRING) AS BIGINT) AS value"]
    job = Job.start(settings, tmp_path / "job.log")
    jobs.append(job)
    assert job.wait(FINAL_TIMEOUT) == 0, job.tail()
    report = job.done()
    assert report is not None, job.tail()

    assert marker.exists(), "no reader killed its Python worker"
    assert "Python worker exited unexpectedly" in job.output(), job.tail()
    assert report["batches"] == [0, 1], report
    assert_every_number_once(request.getfixturevalue("spark"), tmp_path / "output", last)


def test_a_driver_killed_mid_batch_replays_splits_kept_in_the_state_store(
    tmp_path: Path, jobs: list[Job], request: pytest.FixtureRequest
) -> None:
    """600 splits in flight make the offset keep them in the state store (a reference in
    the offset); the driver dies after logging batch 0, and the restart replays it from
    the store."""
    last = 59_999
    marker, checkpoint = tmp_path / "killed", tmp_path / "checkpoint"
    settings: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "output": str(tmp_path / "output"),
        "format": "killonce",
        "trigger": "availableNow",
        "options": {
            "to": last,
            "splits": 600,
            "maxRecordsPerTrigger": 30_000,  # 50 numbers of each split per batch
            "numPartitions": 2,
            "stateLocation": str(tmp_path / "state"),
            "killMarker": str(marker),
            "killDriver": "true",
        },
    }
    killed = Job.start(settings, tmp_path / "killed.log")
    jobs.append(killed)
    assert killed.wait(FINAL_TIMEOUT) != 0, killed.tail()
    assert marker.exists(), "no reader killed the driver"
    # What the killed driver could not remove stays beside its log, not in /tmp.
    assert list((tmp_path / "killed.tmp").glob("blockmgr-*")), killed.tail()
    logged = (checkpoint / "offsets" / "0").read_text()
    assert last_batch(checkpoint / "commits") == -1, "the kill came after the commit"
    assert '"splitsRef"' in logged and '"splitCount":600' in logged.replace(" ", "")

    restarted = Job.start(settings, tmp_path / "restarted.log")
    jobs.append(restarted)
    assert restarted.wait(FINAL_TIMEOUT) == 0, restarted.tail()
    report = restarted.done()
    assert report is not None, restarted.tail()
    assert (checkpoint / "offsets" / "0").read_text() == logged  # replayed, not re-planned
    assert_every_number_once(request.getfixturevalue("spark"), tmp_path / "output", last)
