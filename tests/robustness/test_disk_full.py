"""A full disk, with a real broker on a small tmpfs: it never dies, refuses sends with code 14 and reason DISK_FULL,
keeps every acknowledged message and keeps serving reads; sends work again once space is back, without a restart;
restarted on a full disk it starts read-only and becomes writable when space returns.

The tmpfs is mounted by the test (root only; otherwise the test is skipped with the reason). The store settings
go through ``SIEVEMQ_*`` environment variables, so that the same test can run against a broker that does not know
them. (Before the store allocated its files, this broker died of SIGBUS within the first fill.)
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import (
    assert_found_by_key_and_id,
    create_topic,
    eventually,
    max_offset,
    pull_all,
)
from tests.support import wire
from tests.support.procs import Proc

TOPIC = "FullDisk"
QUEUES = 4
SENDERS = 4
DISK = 6 * 1024 * 1024
SEGMENT = 512 * 1024
BALLAST = 1024 * 1024
SETTINGS = {
    "SIEVEMQ_DISK_FULL_RESERVE_BYTES": str(128 * 1024),
    "SIEVEMQ_MAX_HASH_SLOT_NUM": "1024",
    "SIEVEMQ_MAX_INDEX_NUM": "4096",  # index files of ~100 KiB: several roll during a fill
    "SIEVEMQ_DISK_SPACE_CLEAN_FORCIBLY_RATIO": "100",  # retention must not delete what the test compares
    "PYTHONFAULTHANDLER": "1",  # a fault (SIGBUS) prints where it happened into the broker's log
}
REFUSALS_PER_SENDER = 5
REFUSED_FOR_S = 1.5
"""A sender stops once refused for this long in a row: longer than the store's free-space re-check (1 s)."""


@dataclass
class Disk:
    """The mounted tmpfs: the store lives in ``store/``, ballast files beside it."""

    root: Path
    ballast: list[Path] = field(default_factory=list)

    @property
    def store(self) -> Path:
        return self.root / "store"

    def free(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def add_ballast(self, size: int | None = None) -> Path:
        """A file of ``size`` bytes (None: until the filesystem is full)."""
        path = self.root / f"ballast-{len(self.ballast)}"
        self.ballast.append(path)
        chunk = b"\xab" * 65536
        try:
            f = open(path, "wb", buffering=0)  # noqa: SIM115 - closed below; unbuffered: close() has nothing to flush
        except OSError as e:  # so full that not even an empty file fits (its directory entry needs a block)
            assert e.errno == errno.ENOSPC and size is None, e
            return path
        with f:
            written = 0
            try:
                while size is None or written < size:
                    written += f.write(chunk if size is None else chunk[: min(len(chunk), size - written)]) or 0
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
        return path

    def drop_ballast(self) -> None:
        for p in self.ballast:
            p.unlink(missing_ok=True)
        self.ballast.clear()


@pytest.fixture
def disk(tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    """A ``DISK``-byte tmpfs at ``tmp_path/disk``; unmounted after the cluster's processes are stopped."""
    root = tmp_path / "disk"
    root.mkdir()
    if os.geteuid() != 0:
        print("skipped: mounting a tmpfs needs root")
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(root)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        print(f"skipped: mount -t tmpfs failed: {done.stderr.strip()}")
        pytest.skip(f"mount -t tmpfs failed: {done.stderr.strip()}")
    for k, v in SETTINGS.items():
        monkeypatch.setenv(k, v)
    try:
        yield Disk(root)
    finally:
        cluster.close()
        subprocess.run(["umount", str(root)], check=False)
        if os.path.ismount(root):
            subprocess.run(["umount", "-l", str(root)], check=False)


Acked = tuple[str, int, int, bytes, str]  # msgId, queue id, queue offset, body, key


@dataclass
class Fill:
    """What a fill saw: acknowledged sends and the refusals."""

    acked: list[Acked] = field(default_factory=list)
    refusals: list[RemotingError] = field(default_factory=list)
    n: int = 0


async def _sender(conn: Connection, k: int, fill: Fill, tag: str) -> None:
    in_a_row, since = 0, 0.0
    while in_a_row < REFUSALS_PER_SENDER or time.monotonic() - since < REFUSED_FOR_S:
        i = fill.n
        fill.n += 1
        key = f"{tag}-{k}-{i}"
        body = f"{key}-".encode() + bytes([i % 251]) * (900 + i % 200)
        try:
            r = await wire.send_message(conn, TOPIC, body, queue_id=k % QUEUES, keys=[key], timeout=5.0)
        except RemotingError as e:
            fill.refusals.append(e)
            since = since if in_a_row else time.monotonic()
            in_a_row += 1
            await asyncio.sleep(0.05)
            continue
        assert r.code == ResponseCode.SUCCESS, r
        fill.acked.append((r.msg_id, r.queue_id, r.queue_offset, body, key))
        in_a_row = 0


async def fill_until_refused(broker: Proc, tag: str, *, some_stored: bool = True) -> Fill:
    """Send from ``SENDERS`` connections until each is refused ``REFUSALS_PER_SENDER`` times in a row (``some_stored``:
    at least one send was stored first)."""
    conns = [await connect("127.0.0.1", broker.port) for _ in range(SENDERS)]
    fill = Fill()
    try:
        await asyncio.wait_for(asyncio.gather(*(_sender(c, k, fill, tag) for k, c in enumerate(conns))), 120)
    except SieveError as e:  # a closed connection: the broker died
        pytest.fail(f"the broker stopped answering ({e!r}); exit status {broker.popen and broker.popen.poll()}")
    finally:
        for c in conns:
            c.close()
    assert broker.popen is not None and broker.popen.poll() is None, f"the broker died: {broker.popen.poll()}"
    assert fill.acked or not some_stored, f"nothing was stored before the disk was full: {fill.refusals[:1]}"
    assert fill.refusals, "the disk never filled up"
    for e in fill.refusals:
        assert (e.code, e.reason) == (ResponseCode.SERVICE_NOT_AVAILABLE, Reason.DISK_FULL), e
    return fill


async def check_everything_readable(conn: Connection, acked: list[Acked]) -> None:
    """Every acknowledged message, and nothing else, is in its queue at its offset; lookups work."""
    stored = {q: {m.queue_offset: m for m in await pull_all(conn, TOPIC, q)} for q in range(QUEUES)}
    want = {(qid, qoff): body for _mid, qid, qoff, body, _k in acked}
    got = {(q, off): m.body for q, ms in stored.items() for off, m in ms.items()}
    assert got == want, f"{len(got)} stored, {len(want)} acknowledged; differ at {sorted(set(got) ^ set(want))[:5]}"
    for q in range(QUEUES):
        assert await max_offset(conn, TOPIC, q) == len(stored[q])
    for msg_id, _q, _o, body, key in acked[-3:]:
        await assert_found_by_key_and_id(conn, TOPIC, msg_id, key, body)


async def send_ok(conn: Connection, body: bytes) -> bool:
    """True once a send is stored (False while it is refused as disk full)."""
    try:
        r = await wire.send_message(conn, TOPIC, body, queue_id=0)
    except RemotingError as e:
        assert e.reason == Reason.DISK_FULL, e
        return False
    return r.code == ResponseCode.SUCCESS


def punch_hole(path: Path, offset: int) -> None:
    """Make ``[offset, end)`` of ``path`` sparse again (FALLOC_FL_PUNCH_HOLE | KEEP_SIZE): a pre-allocation file."""
    libc = ctypes.CDLL(None, use_errno=True)
    size = path.stat().st_size
    fd = os.open(path, os.O_RDWR)
    try:
        if libc.fallocate(fd, 3, ctypes.c_long(offset), ctypes.c_long(size - offset)) != 0:
            raise OSError(ctypes.get_errno(), "fallocate(PUNCH_HOLE)")
    finally:
        os.close(fd)


def make_sparse_like_an_older_version(store: Path) -> int:
    """Punch out the zeros after the data of every file written next (last segment, queues' last files, last index
    file), as an older sievemq left them (sparse, created by ftruncate); returns how many files have holes now."""
    folders = [store / "commitlog", store / "index", *(store / "consumequeue" / TOPIC).iterdir()]
    n = 0
    for folder in folders:
        last = sorted(p for p in folder.iterdir() if p.name.isdigit())[-1]
        end = -(-len(last.read_bytes().rstrip(b"\0")) // 4096) * 4096
        if end < last.stat().st_size:
            punch_hole(last, end)
            n += 1
    return n


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_full_disk_refuses_sends_keeps_everything_and_recovers_without_restart(
    disk: Disk, cluster: Cluster, open_conn: OpenConn, flush: str
) -> None:
    disk.add_ballast(BALLAST)
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-f", "--store-path-root-dir", str(disk.store), flush=flush, segment=SEGMENT)
    assert broker.popen is not None
    pid = broker.popen.pid
    admin = await open_conn(broker)
    await create_topic(admin, TOPIC, queues=QUEUES)

    first = await fill_until_refused(broker, "a")
    assert len(first.refusals) >= SENDERS * REFUSALS_PER_SENDER
    remark = first.refusals[0].remark
    assert str(disk.store) in remark and "bytes free" in remark, remark
    assert len(list((disk.store / "commitlog").iterdir())) >= 6, "the fill should roll several segments"
    print(f"{flush}: {len(first.acked)} sends stored, then refused with {disk.free()} bytes free: {remark}")
    await check_everything_readable(admin, first.acked)
    assert "store disk full" in broker.log()

    disk.drop_ballast()  # the operator frees space: no restart
    await eventually(lambda: send_ok(admin, b"space is back"), timeout=5.0, what="a send after space came back")
    q0 = await pull_all(admin, TOPIC, 0)
    back = [(m.msg_id, 0, m.queue_offset, m.body, "") for m in q0 if m.body == b"space is back"]
    again = await fill_until_refused(broker, "b")
    assert broker.popen.pid == pid and broker.popen.poll() is None
    await check_everything_readable(admin, [*first.acked, *back, *again.acked])


async def test_restart_on_a_full_disk_serves_reads_refuses_sends_and_becomes_writable(
    disk: Disk, cluster: Cluster, open_conn: OpenConn
) -> None:
    """(The store starts read-only when start-up itself must allocate, e.g. a sparse last segment larger than the
    free space: tests/unit/store/test_disk_full_store.py. Consume-queue files no longer need start-up to allocate
    them, docs/many-topics.md; either way a send is refused DISK_FULL until space comes back.)"""
    disk.add_ballast(BALLAST)  # freed at the end: room for a segment roll then, whatever the last segment holds
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-r", "--store-path-root-dir", str(disk.store), segment=SEGMENT)
    admin = await open_conn(broker)
    await create_topic(admin, TOPIC, queues=QUEUES)
    fill = await fill_until_refused(broker, "r")
    admin.close()
    assert broker.stop() == 0, "a clean stop on a full disk"

    # A store written by an older version: its last segment is sparse after the data. Then the disk fills up.
    assert make_sparse_like_an_older_version(disk.store) >= QUEUES
    disk.add_ballast(None)
    assert disk.free() < SEGMENT, disk.free()

    broker = cluster.restart(broker)
    assert broker.popen is not None
    pid = broker.popen.pid
    conn = await open_conn(broker)
    await check_everything_readable(conn, fill.acked)  # reads are served
    # sends go on while they fit in what the files have allocated (a page's rest), then are refused DISK_FULL
    more = await fill_until_refused(broker, "full", some_stored=False)
    await check_everything_readable(conn, [*fill.acked, *more.acked])

    disk.drop_ballast()
    await eventually(lambda: send_ok(conn, b"writable again"), timeout=5.0, what="a send after space came back")
    assert broker.popen.pid == pid and broker.popen.poll() is None
    q0 = await pull_all(conn, TOPIC, 0)
    assert q0[-1].body == b"writable again"
