"""Two hostile tenants on one filter server: an uploaded function runs only in workers of its own tenant (upload
account, group, topic, source), so one that monkeypatches its worker never sees or changes another's messages, one
that crashes or exhausts its worker leaves the other's results alone, and the tenants past ``maxUploadWorkers`` are
refused with FILTER_WORKERS_FULL (docs/protocol/filter-server.md §8).

Real name server, broker and filter server processes; uploads are signed 302 requests as a client sends them. The
filter server has one shared worker (``--worker-count 1``), so code that shared workers would certainly meet.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import orjson
import pytest

from sievemq.cli.filtersrv import fetch_status, print_status
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import SECRET, FilterCluster, open_conn
from tests.filtersrv.helpers import class_pull, drain, register, signed, until
from tests.support import wire
from tests.support.metrics import scrape
from tests.support.procs import Proc, free_port

ATTACKER, VICTIM, THIRD = "tenant-a", "tenant-b", "tenant-c"
ACCOUNTS = f"{ATTACKER},{VICTIM},{THIRD}"

HOSTILE = """
import json
import sys

_sandbox = sys.modules["sievemq.filtersrv.sandbox"]
_original = _sandbox.run_batch
SEEN = []


def _spy(loaded, blob):
    SEEN.append(bytes(blob))                       # caches every batch this interpreter runs
    if loaded.fn is not Evil:
        return []                                  # another function's verdicts: reject everything
    return _original(loaded, blob)


_sandbox.run_batch = _spy                          # replaces the worker's batch runner
json.loads = lambda *a, **k: {"id": -1, "card": "forged"}   # and a module global other functions use


def Evil(msg):
    if msg.keys == ["canary"]:
        return len(SEEN) > 0                       # proof that the patched runner is live in its worker
    others = [m for m in sys.modules if m.startswith("sievemq_upload_") and m != __name__]
    return any(b"VICTIM-CARD" in b for b in SEEN) or bool(others)   # one bit out: it met another tenant
"""
CARDS = """
import json

def Cards(msg):
    card = json.loads(msg.body)
    return card["card"].startswith("VICTIM-CARD=") and card["id"] % 2 == 0
"""
SPIN = "def Spin(msg):\n    while True:\n        pass\n"
QUIT = "import os\n\ndef Quit(msg):\n    os._exit(3)\n"
HOG = "def Hog(msg):\n    h = []\n    while True:\n        h.append(bytearray(1 << 24))\n"
YES = "def Yes(msg):\n    return True\n"


def fs_args(*extra: str) -> list[str]:
    """A filter server taking uploads from the three accounts, with one shared worker."""
    return [
        "--client-upload-filter-enable", "true",
        "--upload-secret", SECRET,
        "--upload-accounts", ACCOUNTS,
        "--sandbox-require", "basic",
        "--worker-count", "1",
        "--batch-timeout-seconds", "1",
        *extra,
    ]  # fmt: skip


async def upload(conn: Connection, fs: Proc, account: str, group: str, topic: str, name: str, source: str) -> Any:
    """A signed 302 of ``source`` defining ``name`` by ``account`` for (topic, group)."""
    extra = signed(account, SECRET, group, topic, name, source, to=fs.addr)
    return await register(conn, group, topic, name, source, extra=extra)


async def send_cards(bconn: Connection, n: int) -> None:
    """The victim's topic: card numbers, one queue."""
    for i in range(n):
        body = orjson.dumps({"id": i, "card": f"VICTIM-CARD=4111-0000-0000-{i:04d}"})
        await wire.send_message(bconn, "Cards", body, queue_id=0, keys=[f"card-{i}"])


async def send_plain(bconn: Connection, topic: str, n: int, *, canary: bool = False) -> None:
    """``n`` messages of no value on ``topic`` (queue 0); the first keyed ``canary`` when asked."""
    for i in range(n):
        key = "canary" if canary and i == 0 else f"probe-{i}"
        await wire.send_message(bconn, topic, orjson.dumps({"id": i, "card": ""}), queue_id=0, keys=[key])


async def tenants(fs: Proc) -> dict[str, dict[str, Any]]:
    """The status's upload tenants by group."""
    st = await fetch_status(fs.addr)
    return {t["consumerGroup"]: t for t in st["workers"]["uploads"]["tenants"]}


def ids(msgs: list[Any]) -> list[int]:
    return [orjson.loads(m.body)["id"] for m in msgs]


async def test_hostile_tenant_never_sees_nor_changes_another(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker, *fs_args())
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_cards(bconn, 10)
    await send_plain(bconn, "Public", 4, canary=True)

    # The attacker's upload goes first, so that today it would be in every worker the victim's function meets.
    resp = await upload(fconn, fs, ATTACKER, "prying", "Public", "Evil", HOSTILE)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await upload(fconn, fs, VICTIM, "payments", "Cards", "Cards", CARDS)
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    # The victim's verdicts are its own function's: the even card ids, read through the real json.loads.
    got, end = await drain(fconn, "payments", "Cards", 0)
    assert ids(got) == [0, 2, 4, 6, 8] and end == 10, ids(got)

    # The attacker's patched runner is live in its own worker (the canary passes), yet it met no other tenant.
    mine, _ = await drain(fconn, "prying", "Public", 0)
    assert [m.keys for m in mine] == [["canary"]], [m.keys for m in mine]

    # Each tenant has workers of its own; neither runs in the shared pool of named functions.
    st = await fetch_status(fs.addr)
    by_group = {t["consumerGroup"]: t for t in st["workers"]["uploads"]["tenants"]}
    a, b = set(by_group["prying"]["pids"]), set(by_group["payments"]["pids"])
    shared = set(st["workers"]["pids"])
    assert a and b and not a & b and not (a | b) & shared, (a, b, shared)
    assert (by_group["prying"]["account"], by_group["payments"]["account"]) == (ATTACKER, VICTIM)
    assert by_group["payments"]["topic"] == "Cards" and by_group["payments"]["className"] == "Cards"

    # Again, after the victim's function was used in between: still its own verdicts, still nothing leaked.
    again, _ = await drain(fconn, "payments", "Cards", 0)
    assert ids(again) == [0, 2, 4, 6, 8]
    mine, _ = await drain(fconn, "prying", "Public", 0)
    assert [m.keys for m in mine] == [["canary"]]


async def test_a_tenant_crashing_or_exhausting_its_worker_leaves_another_alone(
    fc: FilterCluster, conns: list[Connection]
) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker, *fs_args())
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_cards(bconn, 10)
    await send_plain(bconn, "Noise", 2)
    bad = {"spinner": ("Spin", SPIN), "quitter": ("Quit", QUIT), "hog": ("Hog", HOG)}
    for group, (name, source) in bad.items():
        resp = await upload(fconn, fs, ATTACKER, group, "Noise", name, source)
        assert resp.code == ResponseCode.SUCCESS, (group, resp.remark)
    resp = await upload(fconn, fs, VICTIM, "payments", "Cards", "Cards", CARDS)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    victim_pids = set((await tenants(fs))["payments"]["pids"])
    attacker_pids: set[int] = set()
    for group in bad:
        attacker_pids |= set((await tenants(fs))[group]["pids"])

    # While the attacker's worker spins, the victim is served, by its own worker, at once.
    started = time.monotonic()
    spinning = asyncio.create_task(class_pull(fconn, "spinner", "Noise", 0, 0))
    await asyncio.sleep(0.1)
    got, _ = await drain(fconn, "payments", "Cards", 0)
    assert ids(got) == [0, 2, 4, 6, 8]
    assert not spinning.done(), "the victim waited for the attacker's spinning worker"
    p = await spinning
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_FAILED), p
    assert "1 s time limit" in (p.remark or ""), p.remark  # the remark names the limit that stopped it
    assert time.monotonic() - started < 4.0

    # A worker that exits, and one that runs out of memory: the attacker's own, replaced; the victim's untouched.
    p = await class_pull(fconn, "quitter", "Noise", 0, 0)
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_FAILED), p
    assert "exited (code 3)" in (p.remark or ""), p.remark
    p = await class_pull(fconn, "hog", "Noise", 0, 0)
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_FAILED), p
    assert "memory limit" in (p.remark or ""), p.remark
    got, _ = await drain(fconn, "payments", "Cards", 0)
    assert ids(got) == [0, 2, 4, 6, 8]

    async def replaced() -> dict[str, dict[str, Any]] | None:
        now = await tenants(fs)
        fresh = {g: set(now[g]["pids"]) for g in bad}
        return now if all(fresh[g] and not fresh[g] & attacker_pids for g in bad) else None

    now = await until(replaced, timeout=10.0, what="the attacker's three workers replaced")
    assert set(now["payments"]["pids"]) == victim_pids, "the victim's worker was touched"
    for group in bad:
        assert not set(now[group]["pids"]) & victim_pids
    assert all(now[g]["replaced"] for g in bad) and not now["payments"]["replaced"]


async def test_upload_workers_are_capped_and_idle_ones_stop(
    fc: FilterCluster, conns: list[Connection], capsys: pytest.CaptureFixture[str]
) -> None:
    idle = 3.0
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    http = free_port()
    fs = fc.filtersrv(
        broker,
        *fs_args("--max-upload-workers", "2", "--upload-idle-seconds", str(idle), "--http-listen-port", str(http)),
    )
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_plain(bconn, "Capped", 3)
    for account, group in ((ATTACKER, "first"), (VICTIM, "second")):
        resp = await upload(fconn, fs, account, group, "Capped", "Yes", YES)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    first_pids = set((await tenants(fs))["first"]["pids"])

    # A third tenant would go past maxUploadWorkers 2: refused, with the reason, and nothing registered.
    resp = await upload(fconn, fs, THIRD, "third", "Capped", "Yes", YES)
    assert resp.code == ResponseCode.SYSTEM_BUSY, resp.remark
    assert resp.ext_fields.get(REASON_FIELD) == Reason.FILTER_WORKERS_FULL, resp.ext_fields
    assert "maxUploadWorkers 2" in (resp.remark or ""), resp.remark  # names the setting to raise
    p = await class_pull(fconn, "third", "Capped", 0, 0)
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_NOT_REGISTERED), p
    st = await fetch_status(fs.addr)
    up = st["workers"]["uploads"]
    assert (up["workers"], up["refused"], len(up["tenants"])) == (2, 1, 2), up
    print_status(st)
    assert "upload workers: 2 of at most 2" in capsys.readouterr().out
    m = await scrape(f"http://127.0.0.1:{http}")
    assert m.value("sievemq_filtersrv_upload_workers") == 2 and m.value("sievemq_filtersrv_upload_tenants") == 2
    assert m.value("sievemq_filtersrv_upload_refusals_total") == 1
    assert m.value("sievemq_filtersrv_workers") == len(st["workers"]["pids"]) == 1

    # Idle tenants give their workers back; the processes are gone.
    async def all_idle() -> dict[str, Any] | None:
        u: dict[str, Any] = (await fetch_status(fs.addr))["workers"]["uploads"]
        return u if not u["tenants"] else None

    up = await until(all_idle, timeout=idle + 5.0, what="idle upload workers stopped")
    assert up["workers"] == 0 and up["retired"].get("idle") == 2, up
    await until(lambda: asyncio.sleep(0, not any(os.path.exists(f"/proc/{p}") for p in first_pids)),
                what="the idle workers' processes gone")  # fmt: skip

    # Room again: the third tenant is taken; the first one's next pull starts fresh workers of its own.
    resp = await upload(fconn, fs, THIRD, "third", "Capped", "Yes", YES)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    got, _ = await drain(fconn, "first", "Capped", 0)
    assert ids(got) == [0, 1, 2]
    now = await tenants(fs)
    assert set(now) == {"first", "third"} and not set(now["first"]["pids"]) & first_pids

    # The second tenant's pull now finds no room: 2 with the reason, the offset kept, not counted as a failure.
    p = await class_pull(fconn, "second", "Capped", 0, 0)
    assert (p.code, p.reason, p.next_begin_offset) == (ResponseCode.SYSTEM_BUSY, Reason.FILTER_WORKERS_FULL, 0), p
    second = next(f for f in (await fetch_status(fs.addr))["functions"] if f["consumerGroup"] == "second")
    assert second["enabled"] and second["errors"] == 0 and second["account"] == VICTIM, second

    # Replacing a tenant's function for its group stops the old tenant's workers at once, freeing its slot.
    third_pids = set(now["third"]["pids"])
    resp = await upload(fconn, fs, THIRD, "third", "Capped", "Other", YES.replace("Yes", "Other"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    now = await tenants(fs)
    assert now["third"]["className"] == "Other" and not set(now["third"]["pids"]) & third_pids
    await until(lambda: asyncio.sleep(0, not any(os.path.exists(f"/proc/{p}") for p in third_pids)),
                what="the replaced function's workers gone")  # fmt: skip
