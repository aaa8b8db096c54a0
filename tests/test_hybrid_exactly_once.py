"""``splitsource.hybrid`` end to end under driver SIGKILLs: before, at and after the switch.

A topic of numbers, whose first part is archived in Parquet files, is streamed
archive-then-Kafka into Spark's parquet sink by a job (:mod:`helpers.kill_job`)
that is SIGKILLed (Python driver and JVM): by the test when the checkpoint
reaches chosen batches (in the archive, at its last batch, at the first Kafka
batch), and once by the source itself at the switch
(``splitsource.killoncehybrid``), between the commit of the batch that finishes
the archive and the logging of the first Kafka batch. More records reach Kafka
between runs. The sink, read with Spark, must hold every number once.
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


def sources_read(offsets: Path, batch: int) -> set[int]:
    """The hybrid's sources (0: the archive, 1: Kafka) whose splits batch ``batch`` lists."""
    logged = json.loads((offsets / str(batch)).read_text().splitlines()[2])
    return {int(split_id.split(":", 1)[0]) for split_id in logged["positions"]}


def kafka_batches(offsets: Path) -> list[int]:
    """The logged batches that read Kafka."""
    return [batch for batch in batch_ids(offsets) if 1 in sources_read(offsets, batch)]


def wait_until(condition: Any, job: Job) -> None:
    """Poll ``condition`` every 10 ms while ``job`` runs; fail if it ends first."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT
    while not condition():
        assert job.running(), f"the run ended before the test killed it\n{job.tail()}"
        if time.monotonic() > deadline:
            pytest.fail(f"no progress within {PROGRESS_TIMEOUT:.0f}s\n{job.tail()}")
        time.sleep(0.01)


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
    marker = tmp_path / "killed-at-switch"
    settings: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "output": str(output),
        "format": "killoncehybrid",
        "select": ["CAST(value AS BIGINT) AS value"],
        "options": {
            "archive.format": "parquet",
            "archive.path": str(tmp_path / "archive"),
            "live.kafka.bootstrap.servers": kafka_broker.bootstrap,
            "live.subscribe": topic,
            "maxFilesPerTrigger": "1",
            "maxOffsetsPerTrigger": "4000",
            "stateLocation": str(tmp_path / "state"),
            "killMarker": str(marker),
        },
    }
    seam = ARCHIVE_FILES  # the first Kafka batch: every archive batch reads one file
    # Each run is killed by the test once its condition holds, or (None) by the source
    # itself at the switch.
    kills = [
        lambda: last_batch(offsets) >= 2,  # in the archive
        lambda: last_batch(offsets) >= seam - 1,  # logged the archive's last batch
        None,  # at the switch
        lambda: bool(kafka_batches(offsets)),  # logged the first Kafka batch
    ]
    produced = ARCHIVED

    def standing_by(name: str) -> Job:
        jobs.append(Job.standing_by(settings, tmp_path, name))
        return jobs[-1]

    upcoming = standing_by("run-0")
    for run, condition in enumerate(kills):
        more = produced + LIVE // len(kills)
        kafka_broker.produce(topic, [str(n) for n in range(produced, more)])
        produced = more
        job = upcoming
        job.wait_until_ready(PROGRESS_TIMEOUT)
        job.go("continuous")
        upcoming = standing_by(f"run-{run + 1}")
        if condition is not None:
            wait_until(condition, job)
            job.kill()
            continue
        assert job.wait(PROGRESS_TIMEOUT) != 0, job.tail()
        job.kill()  # what the switch's kill left of the run's process group
        assert marker.exists(), f"the run ended, but not at the switch\n{job.tail()}"
        # The batch that finished the archive is committed; no Kafka batch is logged.
        assert (last_batch(offsets), last_batch(commits)) == (seam - 1, seam - 1)
        assert sources_read(offsets, seam - 1) == {0}
    final = upcoming
    final.wait_until_ready(PROGRESS_TIMEOUT)
    final.go("availableNow")
    assert final.wait(FINAL_TIMEOUT) == 0, final.tail()

    # The restart after the switch went on with Kafka: no later batch reads the archive.
    after = {batch: sources_read(offsets, batch) for batch in batch_ids(offsets)[seam:]}
    assert min(after) == seam and all(read == {1} for read in after.values()), after
    assert_every_number_once(spark, output, produced - 1)
