"""``splitsource.hybrid`` end to end under driver SIGKILLs: before, at and after the switch.

A topic of numbers, whose first part is archived in Parquet files, is streamed
archive-then-Kafka into Spark's parquet sink by a job (:mod:`helpers.kill_job`)
that is SIGKILLed (Python driver and JVM) when the checkpoint reaches chosen
batches: in the archive, at its last batch, between the batch that finishes it
and the first Kafka batch, at the first Kafka batch and after; more records
reach Kafka between runs. The sink, read with Spark, must hold every number once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.archives import archive_in_files
from helpers.jobs import Job, assert_every_number_once
from sources.testing.streams import batch_ids, last_batch

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

ARCHIVE_FILES = 6
"""Archive batches, one file each (``maxFilesPerTrigger=1``): batches 0 .. 5."""
ARCHIVED = 30_000
LIVE = 30_000
PROGRESS_TIMEOUT = 180.0
FINAL_TIMEOUT = 300.0


def kafka_batches(offsets: Path) -> list[int]:
    """The logged batches whose end offset reads Kafka (split ids of source 1)."""
    found = []
    for batch in batch_ids(offsets):
        lines = (offsets / str(batch)).read_text().splitlines()
        if any('"1:' in line for line in lines[2:]):
            found.append(batch)
    return found


def wait_until(condition: Any, job: Job) -> bool:
    """Poll ``condition`` every 10 ms while ``job`` runs; False if it ended first."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT
    while not condition():
        if not job.running():
            return False
        if time.monotonic() > deadline:
            pytest.fail(f"no progress within {PROGRESS_TIMEOUT:.0f}s\n{job.tail()}")
        time.sleep(0.01)
    return True


@pytest.mark.timeout(1500)
def test_driver_sigkills_around_the_switch_lose_and_duplicate_nothing(
    tmp_path: Path, jobs: list[Job], kafka_broker: Any, spark: Any
) -> None:
    topic = f"hybrid-kills-{tmp_path.name}"
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [str(n) for n in range(ARCHIVED)])
    assert archive_in_files(kafka_broker, topic, tmp_path / "archive", ARCHIVE_FILES) == ARCHIVED
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    settings: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "output": str(output),
        "format": "hybrid",
        "select": ["CAST(value AS BIGINT) AS value"],
        "options": {
            "archive.format": "parquet",
            "archive.path": str(tmp_path / "archive"),
            "live.kafka.bootstrap.servers": kafka_broker.bootstrap,
            "live.subscribe": topic,
            "maxFilesPerTrigger": "1",
            "maxOffsetsPerTrigger": "4000",
            "stateLocation": str(tmp_path / "state"),
        },
    }
    seam = ARCHIVE_FILES  # the first Kafka batch, if every archive batch reads one file
    # (what to wait for, what it is): each run is killed once its condition holds.
    kills = [
        (lambda: last_batch(offsets) >= 2, "in the archive"),
        (lambda: last_batch(offsets) >= seam - 1, "at the archive's last batch"),
        (lambda: last_batch(commits) >= seam - 1, "after the archive's last commit"),
        (lambda: bool(kafka_batches(offsets)), "at the first Kafka batch"),
        (lambda: last_batch(commits) >= seam + 2, "after the switch"),
    ]
    produced = ARCHIVED
    points = []

    def standing_by(name: str) -> Job:
        jobs.append(Job.standing_by(settings, tmp_path, name))
        return jobs[-1]

    upcoming = standing_by("run-0")
    for run, (condition, moment) in enumerate(kills):
        more = produced + LIVE // len(kills)
        kafka_broker.produce(topic, [str(n) for n in range(produced, more)])
        produced = more
        job = upcoming
        job.wait_until_ready(PROGRESS_TIMEOUT)
        job.go("continuous")
        upcoming = standing_by(f"run-{run + 1}")
        if not wait_until(condition, job):
            assert job.wait(10) == 0, job.tail()
            continue
        job.kill()
        points.append((moment, last_batch(offsets), last_batch(commits)))
    final = upcoming
    final.wait_until_ready(PROGRESS_TIMEOUT)
    final.go("availableNow")
    assert final.wait(FINAL_TIMEOUT) == 0, final.tail()
    print(json.dumps(points))

    first_kafka = min(kafka_batches(offsets))
    assert first_kafka >= ARCHIVE_FILES, "the archive's batches each read a file"
    logged_at_kill = [logged for _, logged, _ in points]
    assert any(logged < first_kafka - 1 for logged in logged_at_kill), points
    assert any(logged == first_kafka - 1 for logged in logged_at_kill), points
    assert any(logged >= first_kafka for logged in logged_at_kill), points
    assert_every_number_once(spark, output, produced - 1)
