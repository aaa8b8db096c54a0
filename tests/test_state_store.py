"""The driver-side state store: round trip, crash safety at every step, cleanup, bounded size.

Runs on real fsspec filesystems (a local directory and ``memory://``). Faults
are injected only at the filesystem boundary: ``faultymemory://`` and
``faultyfile://`` are the same filesystems with a :class:`Faults` plan that
makes one mutating call fail (and, for a crash, every call after it).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from enumerators.runtime.state_store import StateStore, epoch_of
from sources.errors import SplitSourceError, StateStoreError

# --- fault injection at the filesystem boundary ------------------------------


class InjectedCrash(OSError):
    """The driver process dies during this filesystem call."""


class DeadProcess(OSError):
    """A call after the crash: a dead process makes no more calls."""


@dataclass
class Faults:
    """When the filesystem under a store fails.

    ``crash_at``: the index of the mutating call that crashes the process
    (a write at that call lands torn, half its bytes). ``failing_deletes``:
    how many deletes of artifacts fail transiently, the process living on.
    """

    crash_at: int | None = None
    failing_deletes: int = 0
    calls: int = 0
    crashed: bool = False

    def before_mutation(self, path: str) -> None:
        if self.crashed:
            raise DeadProcess(f"injected: the process crashed before this call on {path}")
        index = self.calls
        self.calls += 1
        if index == self.crash_at:
            self.crashed = True
            raise InjectedCrash(f"injected crash at mutating call {index} on {path}")

    def before_delete(self, path: str) -> None:
        self.before_mutation(path)
        if self.failing_deletes and "/artifacts/" in path:
            self.failing_deletes -= 1
            raise OSError(f"injected transient delete failure on {path}")


class _FaultyMixin:
    """Every call a store makes to change the filesystem consults ``faults`` first."""

    faults: Faults

    def pipe_file(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        try:
            self.faults.before_mutation(path)
        except InjectedCrash:
            if value:  # the process dies half way through the write
                super().pipe_file(path, value[: len(value) // 2], *args, **kwargs)  # type: ignore[misc]
            raise
        super().pipe_file(path, value, *args, **kwargs)  # type: ignore[misc]

    def mv(self, path1: str, path2: str, *args: Any, **kwargs: Any) -> None:
        self.faults.before_mutation(path1)
        super().mv(path1, path2, *args, **kwargs)  # type: ignore[misc]

    def rm_file(self, path: str) -> None:
        self.faults.before_delete(path)
        super().rm_file(path)  # type: ignore[misc]


class FaultyMemoryFileSystem(_FaultyMixin, MemoryFileSystem):
    """``memory://`` (the same global store) with injected faults."""

    protocol = "faultymemory"

    def __init__(self, *args: Any, faults: Faults, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.faults = faults

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, str) and path.startswith("faultymemory://"):
            path = "memory://" + path.removeprefix("faultymemory://")
        return super()._strip_protocol(path)


class FaultyLocalFileSystem(_FaultyMixin, LocalFileSystem):
    """The local filesystem with injected faults."""

    protocol = ("faultyfile",)

    def __init__(self, *args: Any, faults: Faults, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.faults = faults


fsspec.register_implementation("faultymemory", FaultyMemoryFileSystem, clobber=True)
fsspec.register_implementation("faultyfile", FaultyLocalFileSystem, clobber=True)


# --- locations ----------------------------------------------------------------


@dataclass
class Location:
    """One state store location, reachable plainly and (but on S3) through a faulty
    filesystem; ``options`` are its fsspec storage options."""

    url: str
    faulty_prefix: str | None
    plain_prefix: str
    made: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def store(self, **kwargs: Any) -> StateStore:
        return StateStore(self.url, self.options, retry_wait=0, **kwargs)

    def faulty_store(self, faults: Faults, retries: int = 1) -> StateStore:
        if self.faulty_prefix is None:
            pytest.skip("on S3, faults are injected at the HTTP boundary: see test_s3.py")
        url = self.faulty_prefix + self.url.removeprefix(self.plain_prefix)
        options = {"faults": faults, "skip_instance_cache": True}
        return StateStore(url, options, retries=retries, retry_wait=0)

    def sub(self, name: str) -> Location:
        return Location(
            f"{self.url}/{name}", self.faulty_prefix, self.plain_prefix, options=self.options
        )

    def fs(self) -> tuple[Any, str]:
        """The filesystem, without listings cache, and the root path of the location."""
        fs, root = url_to_fs(self.url, **{"use_listings_cache": False, **self.options})
        return fs, root

    def files(self) -> dict[str, list[str]]:
        """Every file under the location, by area (artifacts, intents, ...)."""
        fs, root = self.fs()
        fs.invalidate_cache()
        found: dict[str, list[str]] = {}
        for path in fs.find(root):
            area, _, name = str(path)[len(root) :].strip("/").partition("/")
            found.setdefault(area, []).append(name)
        return {area: sorted(names) for area, names in found.items()}


@pytest.fixture(params=["memory", "local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Location]:
    if request.param == "local":
        yield Location(str(tmp_path / "state"), "faultyfile://", "")
        return
    if request.param == "s3":
        server, bucket = request.getfixturevalue("s3"), request.getfixturevalue("bucket")
        yield Location(f"s3://{bucket}/state", None, "s3://", options=server.storage_options())
        return
    url = f"memory://splitsource-state-store-tests/{uuid.uuid4().hex}"
    yield Location(url, "faultymemory://", "memory://")
    _forget(url)


def _forget(memory_url: str) -> None:
    fs, root = url_to_fs(memory_url)
    if fs.exists(root):
        fs.rm(root, recursive=True)


def key_for(epoch: int, data: bytes) -> str:
    return f"{epoch:020d}-{hashlib.sha256(data).hexdigest()[:16]}"


def payload(epoch: int, version: int = 0) -> bytes:
    return f"enumerator state of epoch {epoch}, version {version}; ".encode() * (epoch + 3)


# --- round trip ------------------------------------------------------------------


def test_put_then_get_returns_the_bytes(location: Location) -> None:
    store = location.store()
    key = store.put(4, b"pending splits")
    assert store.get(key) == b"pending splits"
    assert store.keys() == [key]


def test_keys_are_content_addressed_by_epoch_and_hash(location: Location) -> None:
    store = location.store()
    first = store.put(7, b"one")
    second = store.put(7, b"two")
    assert first == key_for(7, b"one")
    assert first != second
    assert epoch_of(first) == 7
    assert store.put(7, b"one") == first
    assert store.get(first) == b"one" and store.get(second) == b"two"
    assert store.keys() == sorted([first, second])


def test_a_new_store_on_the_same_url_reads_what_was_put(location: Location) -> None:
    key = location.store().put(1, b"x" * 100_000)
    assert location.store().get(key) == b"x" * 100_000


def test_missing_artifact_error_names_key_url_and_fix(location: Location) -> None:
    store = location.store()
    key = key_for(3, b"gone")
    with pytest.raises(StateStoreError) as raised:
        store.get(key)
    message = str(raised.value)
    assert key in message and location.url in message
    assert "stateLocation" in message and "cleaned by hand" in message
    assert isinstance(raised.value, SplitSourceError)


def test_damaged_artifact_is_reported_not_returned(location: Location) -> None:
    store = location.store()
    key = store.put(2, b"original bytes")
    fs, root = location.fs()
    fs.pipe_file(f"{root}/artifacts/{key}", b"original byteZ")
    with pytest.raises(StateStoreError, match="damaged"):
        store.get(key)


def test_a_malformed_key_is_rejected(location: Location) -> None:
    with pytest.raises(StateStoreError, match="not a state store key"):
        location.store().get("../control/secret")


def test_negative_epoch_is_rejected(location: Location) -> None:
    with pytest.raises(ValueError, match="epoch"):
        location.store().put(-1, b"")


def test_control_markers_round_trip(location: Location) -> None:
    store = location.store()
    assert store.read_marker("final-commit") is None
    store.write_marker("final-commit", b'{"epoch": 9}')
    store.write_marker("final-commit", b'{"epoch": 10}')
    assert location.store().read_marker("final-commit") == b'{"epoch": 10}'
    store.delete_marker("final-commit")
    store.delete_marker("final-commit")
    assert store.read_marker("final-commit") is None
    assert location.files().get("tmp", []) == []
    with pytest.raises(ValueError, match="marker name"):
        store.write_marker("../escape", b"")


# --- cleanup ---------------------------------------------------------------------


def test_committed_deletes_only_older_epochs(location: Location) -> None:
    store = location.store()
    keys = [store.put(epoch, payload(epoch)) for epoch in range(5)]
    store.committed(3)
    assert store.keys() == keys[3:]
    assert set(location.files()) <= {"artifacts"}


def test_committed_is_idempotent_and_tolerates_going_backwards(location: Location) -> None:
    store = location.store()
    keys = [store.put(epoch, payload(epoch)) for epoch in range(3)]
    store.committed(2)
    store.committed(2)
    store.committed(1)
    assert store.keys() == keys[2:]


def test_failed_deletes_stay_marked_and_finish_at_the_next_committed(location: Location) -> None:
    faults = Faults(failing_deletes=100)
    store = location.faulty_store(faults, retries=2)
    old = store.put(0, payload(0))
    new = store.put(1, payload(1))
    store.committed(1)
    assert faults.failing_deletes == 100 - 3  # one try and two retries
    assert location.files()["discard"] == [old]
    assert old in location.files()["artifacts"]
    assert store.keys() == [new]  # marked for discard: no longer live

    faults.failing_deletes = 0
    store.put(2, payload(2))
    store.committed(2)
    assert location.files() == {"artifacts": [key_for(2, payload(2))]}


def test_failed_deletes_finish_at_recover_in_a_new_driver(location: Location) -> None:
    store = location.faulty_store(Faults(failing_deletes=100), retries=0)
    old = store.put(0, payload(0))
    new = store.put(1, payload(1))
    store.committed(1)
    assert location.files()["discard"] == [old]

    location.store().recover(1)
    assert location.files() == {"artifacts": [new]}


def test_recover_keeps_a_logged_artifact_whose_key_was_put_again(location: Location) -> None:
    """A restarted driver may put the same bytes again; the re-put's intent must not doom them."""
    logged = location.store().put(5, payload(5))
    faults = Faults(crash_at=1)  # after the intent marker, before anything else
    with pytest.raises(StateStoreError):
        location.faulty_store(faults).put(5, payload(5))
    assert location.files()["intents"] == [logged]

    for committed_epoch in (4, 5):
        location.store().recover(committed_epoch)
        assert location.store().get(logged) == payload(5)
    assert location.files() == {"artifacts": [logged]}


def test_a_torn_write_at_a_kept_epoch_is_deleted_even_if_the_first_delete_fails(
    location: Location,
) -> None:
    """What a crash mid-write leaves on a store without rename: intent plus half the bytes."""
    good = location.store().put(4, payload(4))
    torn = key_for(4, payload(4, 1))
    fs, root = location.fs()
    fs.pipe_file(f"{root}/intents/{torn}", b"")
    fs.pipe_file(f"{root}/artifacts/{torn}", payload(4, 1)[:10])

    location.faulty_store(Faults(failing_deletes=100), retries=0).recover(3)
    assert torn in location.files()["artifacts"]
    location.store().recover(3)
    assert location.files() == {"artifacts": [good]}


def test_local_writes_never_leave_a_partial_artifact(tmp_path: Path) -> None:
    here = Location(str(tmp_path / "state"), "faultyfile://", "")
    with pytest.raises(StateStoreError):
        here.faulty_store(Faults(crash_at=2)).put(1, payload(1))  # dies writing the bytes
    files = here.files()
    assert "artifacts" not in files
    assert len(files["tmp"]) == 1
    here.store().recover(0)
    assert here.files() == {}


def test_a_discard_marker_never_overrides_the_epoch_rule(location: Location) -> None:
    store = location.store()
    keys = [store.put(epoch, payload(epoch)) for epoch in (3, 4)]
    fs, root = location.fs()
    for key in keys:
        fs.pipe_file(f"{root}/discard/{key}", b"")
    store.committed(3)
    assert location.files()["artifacts"] == keys
    location.store().recover(3)
    assert location.files() == {"artifacts": keys}


def test_recover_deletes_everything_outside_the_two_referable_epochs(location: Location) -> None:
    store = location.store()
    keys = {epoch: store.put(epoch, payload(epoch)) for epoch in range(7)}
    store.write_marker("keep-me", b"control is not swept")
    location.store().recover(3)
    assert location.store().keys() == [keys[3], keys[4]]
    assert location.store().read_marker("keep-me") == b"control is not swept"


def test_recover_before_any_commit_keeps_epoch_zero(location: Location) -> None:
    store = location.store()
    zero = store.put(0, payload(0))
    store.put(1, payload(1))
    location.store().recover(-1)
    assert location.store().keys() == [zero]


def test_put_clears_a_discard_marker_left_on_its_key(location: Location) -> None:
    store = location.store()
    key = key_for(3, payload(3))
    fs, root = location.fs()
    fs.pipe_file(f"{root}/discard/{key}", b"")
    assert store.put(3, payload(3)) == key
    store.committed(3)
    store.recover(2)
    assert store.keys() == [key]


# --- memory bound ----------------------------------------------------------------


def test_many_epochs_leave_at_most_two_artifacts(location: Location) -> None:
    store = location.store()
    epochs = 30 if location.url.startswith("s3://") else 200  # S3: ~6 requests per epoch
    for epoch in range(epochs):
        store.put(epoch, payload(epoch % 7, epoch))
        if epoch:
            store.committed(epoch - 1)
        assert len(store.keys()) <= 2
    files = location.files()
    assert len(files["artifacts"]) == 2
    assert set(files) == {"artifacts"}


# --- a crash at every mutating call ----------------------------------------------


@dataclass
class Run:
    """What the streaming layer and Spark know when the driver dies."""

    committed_epoch: int = -1  # the newest epoch Spark committed (its commit log)
    started: dict[str, bytes] = field(default_factory=dict)  # every put begun
    returned: dict[str, bytes] = field(default_factory=dict)  # every put that returned


def streaming_script(epochs: int) -> list[tuple[str, int, bytes]]:
    """The calls a stream makes: ``put`` per batch, Spark's commit, the late ``committed``.

    Spark commits batch e before planning e + 1, and the source hears
    ``commit`` for e only after ``latestOffset`` of e + 1 (DESIGN §2).
    """
    steps: list[tuple[str, int, bytes]] = []
    for epoch in range(epochs):
        if epoch == 2:  # latestOffset called twice; the second offset is the logged one
            steps.append(("put", epoch, payload(epoch, 1)))
        steps.append(("put", epoch, payload(epoch)))
        if epoch == 3:  # the same bytes again: the same key
            steps.append(("put", epoch, payload(epoch)))
        if epoch:
            steps.append(("committed", epoch - 1, b""))
        steps.append(("spark_commits", epoch, b""))
    steps.append(("committed", epochs - 1, b""))
    return steps


def run_until_crash(store: StateStore, faults: Faults, steps: list[tuple[str, int, bytes]]) -> Run:
    run = Run()
    for action, epoch, data in steps:
        if action == "spark_commits":
            run.committed_epoch = epoch
        elif action == "put":
            run.started[key_for(epoch, data)] = data
            try:
                key = store.put(epoch, data)
            except StateStoreError:
                assert faults.crashed
                return run
            run.returned[key] = data
        else:
            store.committed(epoch)  # never raises: a failure is only logged
        if faults.crashed:
            return run
    return run


def assert_recovered(location: Location, run: Run) -> None:
    committed = run.committed_epoch
    store = location.store()
    store.recover(committed)
    live = store.keys()
    # (a) nothing a logged offset can name was deleted
    for key in run.returned:
        if epoch_of(key) in (committed, committed + 1):
            assert key in live
    # (b) no orphan: no intents, temp files or discard markers; only the two epochs
    assert set(location.files()) <= {"artifacts"}, location.files()
    assert {epoch_of(key) for key in live} <= {committed, committed + 1}
    # (c) every live artifact holds the bytes that were put under its key
    for key in live:
        assert store.get(key) == run.started[key]
    # and the store keeps working
    resumed = store.put(committed + 2, b"after recovery")
    store.committed(committed + 2)
    assert store.keys() == [resumed]
    assert location.files() == {"artifacts": [resumed]}


def test_a_crash_at_every_mutating_call_is_recovered(location: Location) -> None:
    steps = streaming_script(epochs=5)
    dry = Faults()
    run_until_crash(location.sub("dry-run").faulty_store(dry), dry, steps)
    total = dry.calls
    assert total > 30

    for crash_at in range(total + 1):
        here = location.sub(f"crash-at-{crash_at}")
        faults = Faults(crash_at=crash_at)
        run = run_until_crash(here.faulty_store(faults), faults, steps)
        assert faults.crashed == (crash_at < total)
        try:
            assert_recovered(here, run)
        except AssertionError as error:
            raise AssertionError(f"after a crash at mutating call {crash_at}: {error}") from error


def test_a_crash_during_recovery_is_recovered_by_the_next_recovery(location: Location) -> None:
    def litter(here: Location) -> Run:
        """Epochs 0..4 put, Spark committed 3, a second put of epoch 4 torn by a crash."""
        store = here.store()
        run = Run(committed_epoch=3)
        for epoch in range(5):
            run.returned[store.put(epoch, payload(epoch))] = payload(epoch)
        run.started.update(run.returned)
        run.started[key_for(4, payload(4, 1))] = payload(4, 1)
        with pytest.raises(StateStoreError):
            here.faulty_store(Faults(crash_at=2)).put(4, payload(4, 1))
        return run

    dry = Faults()
    litter(location.sub("dry-run"))
    location.sub("dry-run").faulty_store(dry).recover(3)
    for crash_at in range(dry.calls + 1):
        here = location.sub(f"crash-at-{crash_at}")
        run = litter(here)
        faults = Faults(crash_at=crash_at)
        here.faulty_store(faults).recover(3)
        assert_recovered(here, run)


# --- the same invariants, in any order -------------------------------------------

payloads = st.sampled_from([b"", b"a", b"bb", b"state " * 40])


class StateStoreMachine(RuleBasedStateMachine):
    """A stream on ``memory://``: puts, Spark commits, late ``committed``, crashes anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.url = f"memory://splitsource-state-store-machine/{uuid.uuid4().hex}"
        self.location = Location(self.url, "faultymemory://", "memory://")
        self.store = self.location.store()
        self.spark_committed = -1
        self.logged: dict[int, str] = {}  # epoch -> key in the offset Spark logged
        self.started: dict[str, bytes] = {}

    @precondition(lambda self: self.spark_committed + 1 not in self.logged)
    @rule(data=payloads, logged=st.booleans())
    def put(self, data: bytes, logged: bool) -> None:
        epoch = self.spark_committed + 1
        self.started[key_for(epoch, data)] = data
        key = self.store.put(epoch, data)
        if logged:
            self.logged[epoch] = key

    @precondition(lambda self: self.spark_committed + 1 in self.logged)
    @rule()
    def spark_commits(self) -> None:
        self.spark_committed += 1

    @precondition(lambda self: self.spark_committed >= 0)
    @rule(failing_deletes=st.sampled_from([0, 0, 1, 5]))
    def committed(self, failing_deletes: int) -> None:
        faults = Faults(failing_deletes=failing_deletes)
        self.location.faulty_store(faults, retries=1).committed(self.spark_committed)
        if not failing_deletes:
            live = self.store.keys()
            assert all(epoch_of(key) >= self.spark_committed for key in live)

    @rule(
        during=st.sampled_from(["put", "committed", "recover"]),
        crash_at=st.integers(0, 8),
        data=payloads,
    )
    def crash_and_recover(self, during: str, crash_at: int, data: bytes) -> None:
        faults = Faults(crash_at=crash_at)
        doomed = self.location.faulty_store(faults)
        epoch = self.spark_committed + 1
        if during == "put" and epoch not in self.logged:
            self.started[key_for(epoch, data)] = data
            try:
                doomed.put(epoch, data)  # returned or not, Spark never logged it
            except StateStoreError:
                assert faults.crashed
        elif during == "committed":
            doomed.committed(self.spark_committed)
        else:
            doomed.recover(self.spark_committed)
        self.store = self.location.store()
        self.store.recover(self.spark_committed)
        kept = set(self.store.keys())
        assert {epoch_of(key) for key in kept} <= {self.spark_committed, self.spark_committed + 1}
        assert set(self.location.files()) <= {"artifacts"}
        for key in kept:
            assert self.store.get(key) == self.started[key]

    @invariant()
    def logged_offsets_can_be_restored(self) -> None:
        for epoch in (self.spark_committed, self.spark_committed + 1):
            if epoch in self.logged:
                key = self.logged[epoch]
                assert self.store.get(key) == self.started[key]

    def teardown(self) -> None:
        _forget(self.url)


StateStoreMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None
)
test_state_store_machine = StateStoreMachine.TestCase
