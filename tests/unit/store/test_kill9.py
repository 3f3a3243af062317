"""The kill -9 promise: every message acknowledged under SYNC_FLUSH survives a SIGKILL of the writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from sievemq.protocol.message import decode_record
from sievemq.store import GetStatus, MessageStore

from .conftest import HOST, make_config

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from sievemq.protocol.message import MessageExt
    from sievemq.store import MessageStore, PutStatus, StoreConfig

    async def writer(store, qid):
        seq = 0
        while True:
            body = (b"q%d-%d|" % (qid, seq)) * (1 + seq % 7)
            m = MessageExt("KILL", body, properties={"TAGS": "t", "KEYS": "q%d-%d" % (qid, seq)}, queue_id=qid)
            r = await store.put_message(m)
            if r.status is not PutStatus.PUT_OK:
                print("FAIL", r.status, flush=True)
                return
            print("ACK", qid, seq, m.queue_offset, m.commit_log_offset, flush=True)
            seq += 1

    async def main():
        cfg = StoreConfig(root=Path(sys.argv[1]), commitlog_file_size=64 * 1024, cq_entries_per_file=50,
                          flush_disk_type="SYNC_FLUSH", index_hash_slots=64, index_max_entries=500)
        store = MessageStore(cfg, ("10.1.2.3", 10911))
        store.load()
        await store.start()
        print("READY", flush=True)
        await asyncio.gather(*(writer(store, q) for q in range(4)))

    asyncio.run(main())
    """
)


def parse_ack(line: str) -> tuple[int, int, int, int]:
    """``ACK queue seq queue_offset phy`` -> the four numbers."""
    _, q, seq, qoff, phy = line.split()
    return int(q), int(seq), int(qoff), int(phy)


def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    root = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acks: list[tuple[int, int, int, int]] = []
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == "READY", first + (proc.stderr.read() if proc.stderr else "")
        while len(acks) < 600:
            line = proc.stdout.readline()
            assert line.startswith("ACK"), line
            acks.append(parse_ack(line))
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: the writers are still putting
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    for line in rest.splitlines(keepends=True):  # acknowledgements printed before the kill landed
        if line.startswith("ACK") and line.endswith("\n"):  # a line the kill cut short was never told
            acks.append(parse_ack(line))
    assert (root / "abort").exists()
    assert any(phy >= 64 * 1024 for *_, phy in acks)  # the run crossed segment boundaries

    store = MessageStore(make_config(root, commitlog_file_size=64 * 1024, cq_entries_per_file=50,
                                     index_hash_slots=64, index_max_entries=500), HOST)  # fmt: skip
    store.load()
    try:
        assert store.recovery_report is not None and store.recovery_report.abnormal
        per_queue: dict[int, int] = {}
        for q, seq, qoff, phy in acks:
            body = (b"q%d-%d|" % (q, seq)) * (1 + seq % 7)
            rec = store.look_message_by_offset(phy)
            assert rec is not None, (q, seq, phy)
            m, _ = decode_record(rec)
            assert (m.body, m.queue_id, m.queue_offset) == (body, q, qoff)
            r = store.get_message("KILL", q, qoff, 1, None)
            assert r.status is GetStatus.FOUND and r.records == [rec]
            assert [
                decode_record(x)[0].commit_log_offset for x in store.query_message("KILL", f"q{q}-{seq}", 4, 0, 1 << 62)
            ] == [phy]
            per_queue[q] = max(per_queue.get(q, -1), qoff)
        for q, top in per_queue.items():
            assert store.get_max_offset("KILL", q) >= top + 1
            # queue offsets are dense: nothing missing below the max
            got = store.get_message("KILL", q, 0, 32, None)
            assert got.status is GetStatus.FOUND
    finally:
        store.abandon()
