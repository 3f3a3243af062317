"""Apache RocketMQ's ``mqadmin`` controller commands against sievemq's automatic failover (issue 29).

RocketMQ 5.5.0's own ``mqadmin`` (tests/compat/mqadmin.py) asks a sievemq name server started with
``--etcd-endpoints`` (the ``fset`` fixture's) as its controller (``-a``): ``getControllerMetaData`` (1005),
``getSyncStateSet`` (1005, then 1006 to the leader it was told), ``electMaster`` (1005, then 1002), and asks each
broker ``getBrokerEpoch`` (1007). What it prints is parsed and compared with the set's state in etcd. The refusals of
electMaster are checked on a set written into etcd by the test (no broker of it runs, so the test plays its master);
their stable ``reason`` through sievemq's own remoting client (mqadmin prints the code and remark only). A name
server without etcd, and a broker not under failover, answer as RocketMQ's do without a controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aetcd
import orjson
import pytest

from sievemq.broker.processors.epoch import OPEN_EPOCH_END
from sievemq.ha.set_state import ReplicaInfo, SetState
from sievemq.namesrv.etcd_controller import HANDOVER_TIMEOUT_S
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from tests.compat.mqadmin import MqAdmin, Run
from tests.support.failover_sets import ROOT, FailoverSet
from tests.support.failover_workload import three
from tests.support.procs import Proc, broker_proc, free_port
from tests.support.replica_sets import until

CLUSTER = "DefaultCluster"
FAKE = "broker-z"
"""A set whose keys the test writes itself (no broker of it runs)."""
ANSWER_TIMEOUT = HANDOVER_TIMEOUT_S + 30.0
"""How long the raw client waits for an answer: a safety net, never a measure."""
REPLICA = re.compile(r"ReplicaIdentity\{brokerName='([^']*)', brokerId=(\d+), brokerAddress='([^']*)', alive=(\w+)\}")
EPOCH = re.compile(r"EpochEntry\{epoch=(\d+), startOffset=(\d+), endOffset=(\d+)\}")


@pytest.fixture(scope="module")
def mqadmin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MqAdmin]:
    with MqAdmin(tmp_path_factory.mktemp("controller-mqadmin")) as admin:
        yield admin


async def run(admin: MqAdmin, *args: str) -> Run:
    """``mqadmin args...`` in a thread (the event loop keeps serving the test's clients)."""
    return await asyncio.to_thread(admin.run, *args)


def ok(r: Run) -> str:
    """The output of a command that succeeded."""
    assert r.exit == 0 and "command failed" not in r.out + r.err and "Exception" not in r.err, r
    return r.out


def fields(text: str) -> dict[str, list[str]]:
    """``#Key<TAB>value`` lines (and ``#Key: value``) as ``{key: [values...]}``."""
    out: dict[str, list[str]] = {}
    for ln in text.splitlines():
        m = re.match(r"^\s*#([\w ]+?):?\t\s*(.*)$", ln) or re.match(r"^\s*#(\w+):\s+(.*)$", ln)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2).strip())
    return out


def replicas(text: str, kind: str) -> dict[int, tuple[str, str, bool]]:
    """``InSyncReplica`` or ``NotInSyncReplica`` lines: ``{brokerId: (brokerName, address, alive)}``."""
    found = {}
    for ln in text.splitlines():
        if ln.startswith(f"{kind}:"):
            m = REPLICA.search(ln)
            assert m, ln
            found[int(m.group(2))] = (m.group(1), m.group(3), m.group(4) == "true")
    return found


def epoch_blocks(text: str) -> dict[str, tuple[int, list[tuple[int, int, int]]]]:
    """getBrokerEpoch's output: ``{brokerAddr: (brokerId, [(epoch, startOffset, endOffset)...])}``."""
    blocks = {}
    for chunk in text.split("#clusterName")[1:]:
        f = fields("#clusterName" + chunk)
        entries = [(int(a), int(b), int(c)) for a, b, c in EPOCH.findall(chunk)]
        blocks[f["brokerAddr"][0]] = (int(f["brokerId"][0]), entries)
    return blocks


# ------------------------------------------------------------------------------------------ a real set
async def test_mqadmin_reads_the_set_and_hands_it_over_to_a_replica(fset: FailoverSet, mqadmin: MqAdmin) -> None:
    master = await three(fset)
    target = next(b for b in (1, 2, 3) if b != master)
    st = await fset.wait_in_sync(1, 2, 3)
    ns = fset.namesrv

    meta = fields(ok(await run(mqadmin, "getControllerMetaData", "-a", ns)))
    assert meta["ControllerLeaderAddress"] == [ns] and meta["ControllerGroup"] == [ROOT], meta
    assert "Peer" not in meta, meta

    out = ok(await run(mqadmin, "getSyncStateSet", "-a", ns, "-b", "broker-a"))
    f = fields(out)
    assert f["brokerName"] == ["broker-a"] and f["MasterBrokerId"] == [str(st.master_id)], out
    assert f["MasterAddr"] == [fset.addr(master)], out
    assert f["MasterEpoch"] == [str(st.master_epoch)] and f["SyncStateSetEpoch"] == [str(st.sync_state_set_epoch)]
    assert f["SyncStateSetNums"] == ["3"], out
    assert replicas(out, "InSyncReplica") == {b: ("broker-a", fset.addr(b), True) for b in (1, 2, 3)}, out
    assert replicas(out, "NotInSyncReplica") == {}, out

    async def epochs_of_all(n: int) -> dict[str, tuple[int, list[tuple[int, int, int]]]] | None:
        r = await run(mqadmin, "getBrokerEpoch", "-n", ns, "-b", "broker-a")
        blocks = epoch_blocks(r.out) if r.exit == 0 else {}
        full = len(blocks) == 3 and all(len(e) == n for _, e in blocks.values())
        return blocks if full else None

    ids = {fset.addr(b): b for b in (1, 2, 3)}
    blocks = await until(lambda: epochs_of_all(1), 60.0, "getBrokerEpoch lists the three brokers")
    for addr, (bid, entries) in blocks.items():
        assert bid == (0 if ids[addr] == master else ids[addr]), blocks  # RocketMQ's master says brokerId 0
        ((epoch, start, end),) = entries
        assert (epoch, start) == (1, 0) and end < OPEN_EPOCH_END, entries  # the open one ends at maxOffset (mqadmin)

    r = await run(mqadmin, "electMaster", "-a", ns, "-c", CLUSTER, "-bn", "broker-a", "-b", str(target))
    new = await fset.wait_state(lambda s: s.master_epoch > st.master_epoch, "the handover's new epoch")
    assert new.master_id == target and new.master_epoch == st.master_epoch + 1, new
    out = ok(r)
    f = fields(out)
    assert f["ClusterName"] == [CLUSTER] and f["BrokerName"] == ["broker-a"], out
    assert f["BrokerMasterAddr"] == [fset.addr(target)], out
    assert f["MasterEpoch"] == [str(new.master_epoch)], out
    assert f["SyncStateSetEpoch"] == [str(new.sync_state_set_epoch)], out
    members = dict(re.findall(r"#Broker\t(\d+)\t(\S+)", out))
    assert members.get(str(target)) == fset.addr(target), out

    # the next epoch starts where the old master's log ended: every broker's history says so once it follows it
    ((_, switch),) = [e for e in new.epochs if e[0] == new.master_epoch]
    blocks = await until(lambda: epochs_of_all(2), 60.0, "every broker in the new epoch")
    for addr, (bid, entries) in blocks.items():
        assert bid == (0 if ids[addr] == target else ids[addr]), blocks
        assert [(e, s) for e, s, _ in entries] == [(1, 0), (new.master_epoch, switch)], (addr, entries)
        assert entries[0][2] == switch <= entries[1][2] < OPEN_EPOCH_END, entries  # ends where the next starts

    out = ok(await run(mqadmin, "getSyncStateSet", "-a", ns, "-b", "broker-a"))
    f = fields(out)
    assert f["MasterBrokerId"] == [str(target)] and f["MasterAddr"] == [fset.addr(target)], out
    assert f["MasterEpoch"] == [str(new.master_epoch)], out

    r = await run(mqadmin, "electMaster", "-a", ns, "-c", CLUSTER, "-bn", "broker-a", "-b", str(target))
    assert "CODE: 2011" in r.out + r.err, r  # CONTROLLER_MASTER_STILL_EXIST, as RocketMQ's controller answers


# ------------------------------------------------------------------------------------------ a set the test plays
@contextlib.asynccontextmanager
async def etcd_client(fset: FailoverSet) -> AsyncIterator[aetcd.Client]:
    host, _, port = fset.etcd.endpoints[0].rpartition(":")
    async with aetcd.Client(host=host, port=int(port), timeout=5) as c:
        yield c


def fake_key(name: str) -> bytes:
    return f"{ROOT}/{CLUSTER}/{FAKE}/{name}".encode()


async def fake_set(fset: FailoverSet, state: SetState, alive: list[int]) -> None:
    """Write a set's state and its live brokers' keys (addresses 10.9.9.<id>:10911) as its brokers would."""
    async with etcd_client(fset) as c:
        await c.put(fake_key("state"), state.to_json())
        for bid in alive:
            info = ReplicaInfo(bid, f"10.9.9.{bid}:10911", f"10.9.9.{bid}:10912", state.master_epoch, 100)
            await c.put(fake_key(f"brokers/{bid}"), info.to_json())


async def handover_value(fset: FailoverSet) -> tuple[dict[str, int], int] | None:
    """The pending handover request and its lease, None when there is none."""
    async with etcd_client(fset) as c:
        kv = await c.get(fake_key("handover"))
    return (orjson.loads(kv.value), int(kv.lease)) if kv is not None else None


async def elect(conn: Connection, target: int, name: str = FAKE) -> RemotingCommand:
    cmd = RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, {
        "clusterName": CLUSTER, "brokerName": name, "brokerId": target, "designateElect": True,
        "invokeTime": int(time.time() * 1000)})  # fmt: skip
    return await conn.request(cmd, ANSWER_TIMEOUT)


@contextlib.asynccontextmanager
async def ns_conn(fset: FailoverSet) -> AsyncIterator[Connection]:
    host, _, port = fset.namesrv.rpartition(":")
    conn = await connect(host, int(port))
    try:
        yield conn
    finally:
        conn.close()


STATE = SetState(1, "10.9.9.1:10911", "10.9.9.1:10912", 3, frozenset({1, 2}), 5, ((1, 0), (3, 4096)))
"""broker-z: broker 1 master of epoch 3, brokers 1 and 2 in sync, 3 alive but behind, 4 gone."""


async def test_electmaster_refusals_say_why(fset: FailoverSet, mqadmin: MqAdmin) -> None:
    ns = fset.namesrv
    await fake_set(fset, STATE, [1, 2, 3])
    out = ok(await run(mqadmin, "getSyncStateSet", "-a", ns, "-b", FAKE))
    assert replicas(out, "InSyncReplica") == {1: (FAKE, "10.9.9.1:10911", True), 2: (FAKE, "10.9.9.2:10911", True)}
    assert replicas(out, "NotInSyncReplica") == {3: (FAKE, "10.9.9.3:10911", True)}, out
    assert fields(out)["MasterEpoch"] == ["3"] and fields(out)["SyncStateSetEpoch"] == ["5"], out

    def elect_run(target: int, name: str = FAKE) -> Run:
        return mqadmin.run("electMaster", "-a", ns, "-c", CLUSTER, "-bn", name, "-b", str(target))

    cases = {1: (2011, Reason.ALREADY_MASTER), 3: (2012, Reason.HANDOVER_TARGET_NOT_IN_SYNC),
             4: (2012, Reason.HANDOVER_TARGET_NOT_ALIVE)}  # fmt: skip
    async with ns_conn(fset) as conn:
        for target, (code, reason) in cases.items():
            r = await asyncio.to_thread(elect_run, target)
            assert f"CODE: {code}" in r.out + r.err, (target, r)
            answer = await elect(conn, target)
            assert (answer.code, answer.ext_fields.get(REASON_FIELD)) == (code, reason), (target, answer)
        still = await elect(conn, 1)  # RocketMQ's controller names the master that stays
        assert still.ext_fields["masterBrokerId"] == "1" and still.ext_fields["masterEpoch"] == "3", still
        assert orjson.loads(still.body) == {"syncStateSet": [1, 2]}, still.body

        r = await asyncio.to_thread(elect_run, 2, "broker-nowhere")
        assert "CODE: 2010" in r.out + r.err, r  # CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        answer = await elect(conn, 2, "broker-nowhere")
        assert answer.ext_fields.get(REASON_FIELD) == Reason.SET_NOT_FOUND, answer
        assert await handover_value(fset) is None  # no refusal wrote anything


async def test_electmaster_waits_for_the_master_to_hand_over(fset: FailoverSet) -> None:
    """The name server writes the request and answers once the state names the broker asked for; the test plays the
    set's master (it writes the next epoch and clears the request, as ``FailoverBroker`` does)."""
    await fake_set(fset, STATE, [1, 2, 3])
    async with ns_conn(fset) as conn:
        answer = asyncio.create_task(elect(conn, 2))
        (request, lease) = await until(lambda: handover_value(fset), 30.0, "the handover request in etcd")
        assert request["brokerId"] == 2 and request["requestedAt"] > 0 and lease != 0, request
        assert not answer.done()
        new = SetState(2, "10.9.9.2:10911", "10.9.9.2:10912", 4, frozenset({2}), 6, (*STATE.epochs, (4, 8192)))
        async with etcd_client(fset) as c:
            take = [c.transactions.put(fake_key("state"), new.to_json()), c.transactions.delete(fake_key("handover"))]
            await c.transaction(compare=[], success=take, failure=[])
        done = await answer
    assert done.code == ResponseCode.SUCCESS, done
    header = {k: done.ext_fields[k] for k in ("masterBrokerId", "masterAddress", "masterEpoch", "syncStateSetEpoch")}
    assert header == {"masterBrokerId": "2", "masterAddress": "10.9.9.2:10911", "masterEpoch": "4",
                      "syncStateSetEpoch": "6"}  # fmt: skip
    body = orjson.loads(done.body)
    group = {"cluster": CLUSTER, "brokerName": FAKE,
             "brokerAddrs": {"1": "10.9.9.1:10911", "2": "10.9.9.2:10911", "3": "10.9.9.3:10911"}}  # fmt: skip
    assert body == {"brokerMemberGroup": group, "syncStateSet": [2], **group}, body


async def test_electmaster_reports_a_withdrawn_request_and_withdraws_its_own_in_time(fset: FailoverSet) -> None:
    await fake_set(fset, STATE, [1, 2, 3])
    async with ns_conn(fset) as conn:
        answer = asyncio.create_task(elect(conn, 2))
        await until(lambda: handover_value(fset), 30.0, "the handover request in etcd")
        async with etcd_client(fset) as c:
            await c.delete(fake_key("handover"))  # the master refuses (its target fell behind)
        refused = await answer
        assert (refused.code, refused.ext_fields.get(REASON_FIELD)) == (2012, Reason.HANDOVER_REFUSED), refused

        asked = time.monotonic()
        answer = asyncio.create_task(elect(conn, 2))
        await until(lambda: handover_value(fset), 30.0, "the handover request in etcd")
        again = asyncio.create_task(elect(conn, 2))  # asked again meanwhile: it waits with the pending request
        late = await answer  # nobody hands over
        joined = await again
        assert (joined.code, joined.ext_fields.get(REASON_FIELD)) == (2012, Reason.HANDOVER_REFUSED), joined
        assert time.monotonic() - asked >= HANDOVER_TIMEOUT_S
        assert (late.code, late.ext_fields.get(REASON_FIELD)) == (2012, Reason.HANDOVER_TIMEOUT), late
    assert await handover_value(fset) is None  # withdrawn
    assert await fset_state(fset) == STATE  # and nothing else changed


async def fset_state(fset: FailoverSet) -> SetState | None:
    async with etcd_client(fset) as c:
        kv = await c.get(fake_key("state"))
    return SetState.from_json(kv.value) if kv is not None else None


async def test_a_pending_request_for_another_broker_is_not_overwritten(fset: FailoverSet) -> None:
    state = SetState(1, "10.9.9.1:10911", "10.9.9.1:10912", 3, frozenset({1, 2, 3}), 5, ((1, 0), (3, 4096)))
    await fake_set(fset, state, [1, 2, 3])
    pending = orjson.dumps({"brokerId": 3, "requestedAt": 1})
    async with etcd_client(fset) as c:
        await c.put(fake_key("handover"), pending)
    async with ns_conn(fset) as conn:
        answer = await elect(conn, 2)
        assert (answer.code, answer.ext_fields.get(REASON_FIELD)) == (2012, Reason.HANDOVER_PENDING), answer
        async with etcd_client(fset) as c:
            await c.delete(fake_key("brokers/1"))  # the master's lease expired
            await c.delete(fake_key("handover"))
        answer = await elect(conn, 2)
        assert answer.ext_fields.get(REASON_FIELD) == Reason.HANDOVER_NO_LIVE_MASTER, answer
    async with etcd_client(fset) as c:
        assert await c.get(fake_key("handover")) is None


# ------------------------------------------------------------------------------------------ etcd unreachable
async def test_a_name_server_whose_etcd_does_not_answer_says_so_in_time_and_keeps_serving(tmp_path: Path) -> None:
    """Two etcd endpoints that accept connections and never answer: CONTROLLER_GET_SYNC_STATE_DATA is refused with
    ``ETCD_UNAVAILABLE`` once the name server's budget is spent, and routes are served meanwhile."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)

    holes = [await asyncio.start_server(hold, "127.0.0.1", free_port()) for _ in range(2)]
    endpoints = ";".join(f"127.0.0.1:{h.sockets[0].getsockname()[1]}" for h in holes)
    port = free_port()
    ns = Proc(["namesrv", "--listen-port", str(port), "--etcd-endpoints", endpoints], port,
              tmp_path / "namesrv.log").start()  # fmt: skip
    try:
        conn = await connect("127.0.0.1", port)
        try:
            ask = RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=b'["broker-a"]')
            pending = asyncio.create_task(conn.request(ask, ANSWER_TIMEOUT))
            await until(lambda: asyncio.sleep(0, held or None), 30.0, "the name server calling etcd")
            info = await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), ANSWER_TIMEOUT)
            assert info.code == ResponseCode.SUCCESS and not pending.done()  # served while etcd is awaited
            answer = await pending
            assert (answer.code, answer.ext_fields.get(REASON_FIELD)) == (1, Reason.ETCD_UNAVAILABLE), answer
            meta = await conn.request(RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), ANSWER_TIMEOUT)
            assert meta.code == ResponseCode.SUCCESS and meta.ext_fields["controllerLeaderAddress"] == ns.addr, meta
        finally:
            conn.close()
    finally:
        ns.stop()
        for h in holes:
            h.close()
        for w in held:
            w.close()


# ------------------------------------------------------------------------------------------ without a controller
async def test_without_etcd_the_name_server_and_broker_answer_as_rocketmqs_without_a_controller(
    tmp_path: Path, mqadmin: MqAdmin
) -> None:
    port = free_port()
    ns = Proc(["namesrv", "--listen-port", str(port)], port, tmp_path / "namesrv.log").start()
    broker = broker_proc(tmp_path, ns.addr, "broker-plain")
    try:
        broker.start()
        for args in (("getControllerMetaData", "-a", ns.addr), ("getSyncStateSet", "-a", ns.addr, "-b", "broker-a"),
                     ("electMaster", "-a", ns.addr, "-c", CLUSTER, "-bn", "broker-a", "-b", "2")):  # fmt: skip
            r = await run(mqadmin, *args)
            assert "CODE: 3 " in r.out + r.err, (args, r)  # REQUEST_CODE_NOT_SUPPORTED, before the request proper

        async def answered() -> Run | None:  # once the broker registered, mqadmin finds it
            r = await run(mqadmin, "getBrokerEpoch", "-n", ns.addr, "-b", "broker-plain")
            return r if "CODE: 1 " in r.out + r.err else None

        r = await until(answered, 60.0, "getBrokerEpoch answered by the broker")
        assert "this request only for controllerMode" in r.out + r.err, r
    finally:
        broker.stop()
        ns.stop()
