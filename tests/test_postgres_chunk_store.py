"""The write-once store of a stream's chunk copies: the first copy published is the one every
attempt gets."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from readers.postgres.chunk_store import ChunkCopy, ChunkStore
from sources.postgres.splits import TransactionSnapshot


def copy_of(rows: list[int], snapshot: str = "700:710:705", high: int = 123) -> ChunkCopy:
    table = pa.table({"id": pa.array(rows, pa.int64())})
    return ChunkCopy(table, TransactionSnapshot.parse(snapshot), high)


def test_a_copy_round_trips_with_its_snapshot_and_position() -> None:
    copy = copy_of([1, 2, 3], "1:9:4,6", 2**40)
    assert ChunkCopy.from_bytes(copy.to_bytes()) == copy


def test_the_first_copy_published_is_the_one_every_attempt_gets(tmp_path: Path) -> None:
    store = ChunkStore(str(tmp_path / "chunks"))
    first, later = copy_of([1, 2]), copy_of([1, 2, 3], "800:801:")
    assert store.read("public.items#00000001") is None
    assert store.publish("public.items#00000001", first) == first
    assert store.publish("public.items#00000001", later) == first
    assert store.read("public.items#00000001") == first
    assert sorted(p.name for p in (tmp_path / "chunks").iterdir()) == [
        "public.items%2300000001.arrow"  # no temporary file left
    ]
    store.delete("public.items#00000001")
    store.delete("public.items#00000001")  # again: nothing to do
    assert store.read("public.items#00000001") is None


def test_attempts_publishing_at_once_all_get_one_copy(tmp_path: Path) -> None:
    store = ChunkStore(str(tmp_path))
    got: list[ChunkCopy] = []

    def attempt(n: int) -> None:
        got.append(store.publish("chunk", copy_of(list(range(n * 1000)), high=n)))

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(copy == got[0] for copy in got)


def test_a_filesystem_without_exclusive_create_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot create a file only if it is absent"):
        ChunkStore("memory://chunks")
