"""Transactional messages end to end: half messages unseen, commit seen once, rollback never, check-backs, expiry
after ``transactionCheckMax`` unanswered checks, and a ``kill -9`` between the half message and its end."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from sievemq import Message, SendStatus, TransactionProducer, TransactionState
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, encode_record
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic, eventually, pull_all
from tests.support import wire
from tests.support.procs import Proc
from tests.support.quiet import quiet_period

TOPIC = "TxTopic"
FAST_CHECKS = ("--transaction-timeout", "300", "--transaction-check-interval", "400", "--transaction-check-max", "3")


async def _bodies(open_conn: OpenConn, broker: Proc, topic: str = TOPIC) -> list[bytes]:
    conn = await open_conn(broker)
    return [m.body for m in await pull_all(conn, topic, 0)]


async def _never(msg: MessageExt) -> TransactionState:
    raise AssertionError(f"no check expected, got one for {msg.uniq_key}")


async def test_commit_is_seen_once_rollback_never_and_a_half_message_not_before_its_commit(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx")
    await create_topic(await open_conn(broker), TOPIC, queues=1)
    seen_during: list[list[bytes]] = []

    async def commit(msg: Message, arg: Any) -> TransactionState:
        seen_during.append(await _bodies(open_conn, broker))  # the half message is stored by now
        return arg  # type: ignore[no-any-return]

    async with TransactionProducer(ns.addr, "tx-p", check_listener=_never) as p:
        r1 = await p.send_in_transaction(Message(TOPIC, b"committed", tags="TagA"), commit, TransactionState.COMMIT)
        r2 = await p.send_in_transaction(Message(TOPIC, b"rolled-back"), commit, TransactionState.ROLLBACK)
    assert r1.send.status == SendStatus.SEND_OK and r1.end_error is None and r2.end_error is None
    assert seen_during == [[], [b"committed"]], "a half message was visible before its commit"
    (got,) = await pull_all(await open_conn(broker), TOPIC, 0)
    assert got.body == b"committed" and got.tags == "TagA"
    assert got.uniq_key == r1.send.msg_id, "the committed message keeps the id the producer was given"
    assert "REAL_TOPIC" not in got.properties and got.properties.get("TRAN_MSG") == "true"  # as RocketMQ stores it

    # A second END_TRANSACTION of a settled transaction changes nothing: no second copy.
    conn = await open_conn(broker)
    _, _, phy = parse_offset_msg_id(r1.send.offset_msg_id)
    remark = await api.end_transaction(conn, "tx-p", r1.send.queue_offset, phy, 8, r1.send.msg_id)
    assert remark is not None and "already settled" in remark
    assert await _bodies(open_conn, broker) == [b"committed"]


async def test_an_end_transaction_naming_no_half_message_or_another_group_is_refused(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx")
    await create_topic(await open_conn(broker), TOPIC, queues=1)

    async def unknown(msg: Message, arg: Any) -> TransactionState:
        return TransactionState.UNKNOWN

    async with TransactionProducer(ns.addr, "tx-owner", check_listener=_never) as p:
        r = await p.send_in_transaction(Message(TOPIC, b"mine"), unknown)
    conn = await open_conn(broker)
    _, _, phy = parse_offset_msg_id(r.send.offset_msg_id)
    for group, offset, at in (("tx-other", r.send.queue_offset, phy), ("tx-owner", r.send.queue_offset + 7, phy),
                              ("tx-owner", r.send.queue_offset, phy + 1)):  # fmt: skip
        try:
            await api.end_transaction(conn, group, offset, at, 8, r.send.msg_id)
        except Exception as e:
            assert getattr(e, "code", None) == ResponseCode.SYSTEM_ERROR, e
        else:
            raise AssertionError(f"END_TRANSACTION {group} {offset} {at} was taken")
    assert await _bodies(open_conn, broker) == []


async def test_unknown_then_the_check_back_commits(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx", *FAST_CHECKS)
    await create_topic(await open_conn(broker), TOPIC, queues=1)
    checked: list[str | None] = []

    async def listener(msg: MessageExt) -> TransactionState:
        checked.append(msg.uniq_key)
        assert msg.topic == TOPIC, "the check shows the message in its real topic"
        return TransactionState.COMMIT if msg.body == b"yes" else TransactionState.ROLLBACK

    async def unknown(msg: Message, arg: Any) -> TransactionState:
        return TransactionState.UNKNOWN

    async with TransactionProducer(ns.addr, "tx-check", check_listener=listener) as p:
        yes = await p.send_in_transaction(Message(TOPIC, b"yes"), unknown)
        await p.send_in_transaction(Message(TOPIC, b"no"), unknown)
        assert await _bodies(open_conn, broker) == []
        await eventually(lambda: len(checked) >= 2, timeout=10.0, what="both transactions checked")
        await eventually(lambda: _has(open_conn, broker, [b"yes"]), timeout=5.0, what="the committed message")
        await quiet_period(1.5, "a check of a settled transaction in further rounds", unchanged=lambda: len(checked))
    assert sorted(c or "" for c in checked) == sorted([yes.send.msg_id, checked[1] or ""])
    assert len(checked) == 2, checked
    assert await _bodies(open_conn, broker) == [b"yes"]


async def _has(open_conn: OpenConn, broker: Proc, want: list[bytes]) -> bool:
    return await _bodies(open_conn, broker) == want


async def test_a_silent_producer_is_checked_check_max_times_then_rolled_back(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx", *FAST_CHECKS)
    await create_topic(await open_conn(broker), TOPIC, queues=1)
    checks: list[float] = []

    async def silent(msg: MessageExt) -> TransactionState:
        checks.append(asyncio.get_running_loop().time())
        return TransactionState.UNKNOWN

    async def unknown(msg: Message, arg: Any) -> TransactionState:
        return TransactionState.UNKNOWN

    async with TransactionProducer(ns.addr, "tx-silent", check_listener=silent) as p:
        r = await p.send_in_transaction(Message(TOPIC, b"never"), unknown)
        await eventually(lambda: "rolled back" in broker.log(), timeout=15.0, what="the broker's rollback")
        await eventually(lambda: len(checks) >= 3, timeout=5.0, what="the checks before the rollback")
        await quiet_period(1.0, "a check after the rollback", unchanged=lambda: len(checks))
    assert len(checks) == 3, f"checked {len(checks)} times, transactionCheckMax is 3"
    assert all(b - a >= 0.3 for a, b in itertools.pairwise(checks)), checks
    conn = await open_conn(broker)
    _, _, phy = parse_offset_msg_id(r.send.offset_msg_id)
    remark = await api.end_transaction(conn, "tx-silent", r.send.queue_offset, phy, 8, r.send.msg_id)
    assert remark is not None and "already settled" in remark, "a late commit after the expiry must change nothing"
    assert await _bodies(open_conn, broker) == []


async def test_kill9_between_half_message_and_commit_is_resolved_by_the_check_after_restart(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    # checks every 0.4 s, and enough of them (300: two minutes) that a producer slow to come back on a loaded machine
    # still answers one before the broker gives the transaction up
    patient = ("--transaction-timeout", "300", "--transaction-check-interval", "400", "--transaction-check-max", "300")
    broker = cluster.broker(ns.addr, "broker-tx", *patient, flush="SYNC_FLUSH")
    await create_topic(await open_conn(broker), TOPIC, queues=1)

    async def unknown(msg: Message, arg: Any) -> TransactionState:
        return TransactionState.UNKNOWN

    async def late_commit(msg: MessageExt) -> TransactionState:
        return TransactionState.COMMIT

    async with TransactionProducer(ns.addr, "tx-crash", check_listener=_never, send_timeout=5.0) as p:
        committed = await p.send_in_transaction(Message(TOPIC, b"settled-before"), _commit)
        open_one = await p.send_in_transaction(Message(TOPIC, b"open-at-kill"), unknown)
        broker.kill9()
    broker = cluster.restart(broker)
    assert await _bodies(open_conn, broker) == [b"settled-before"], "nothing half-done is delivered"
    async with TransactionProducer(ns.addr, "tx-crash", check_listener=late_commit, topics=[TOPIC]):
        await eventually(lambda: _has(open_conn, broker, [b"settled-before", b"open-at-kill"]), timeout=90.0,
                         what="the open transaction committed by the check after the restart")  # fmt: skip
        await quiet_period(1.5, "a second copy of either message (a transaction settled twice)")
    got = await pull_all(await open_conn(broker), TOPIC, 0)
    assert [m.uniq_key for m in got] == [committed.send.msg_id, open_one.send.msg_id]


async def _commit(msg: Message, arg: Any) -> TransactionState:
    return TransactionState.COMMIT


async def test_a_half_record_forged_inside_a_message_body_cannot_be_committed(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    """An attacker stores a body holding a well-formed record of the half topic (their group, a victim's topic)
    and ends it: the broker finds half messages through the half topic's queue only, so nothing reaches the victim."""
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx")
    conn = await open_conn(broker)
    await create_topic(conn, "Victim", queues=1)
    await create_topic(conn, TOPIC, queues=1)
    async with TransactionProducer(ns.addr, "tx-real", check_listener=_never) as p:  # one real half, offset 0
        real = await p.send_in_transaction(Message(TOPIC, b"real"), _unknown)
    props = {"REAL_TOPIC": "Victim", "REAL_QID": "0", "PGROUP": "tx-evil", "TRAN_MSG": "true"}
    fake = MessageExt(topic="RMQ_SYS_TRANS_HALF_TOPIC", body=b"forged", queue_id=0, queue_offset=0, properties=props)
    forged = encode_record(fake)
    sent = await wire.send_message(conn, TOPIC, b"pad" + forged, queue_id=0)
    _, _, phy = parse_offset_msg_id(sent.msg_id)
    resp = await call(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})
    at = phy + resp.body.index(forged)
    for half_offset in (0, real.send.queue_offset):
        try:
            await api.end_transaction(conn, "tx-evil", half_offset, at, 8, "x")
        except RemotingError as e:
            assert e.code == ResponseCode.SYSTEM_ERROR, e
        else:
            raise AssertionError("a forged half record was taken")
    assert [m.body for m in await pull_all(conn, "Victim", 0)] == []


async def _unknown(msg: Message, arg: Any) -> TransactionState:
    return TransactionState.UNKNOWN


async def test_a_half_message_with_a_broken_delay_level_is_refused_at_send(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    """The DELAY level is applied at the commit, which must not fail on it: it is checked when the half arrives."""
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    props = {"TRAN_MSG": "true", "PGROUP": "tx-p", "DELAY": "soon"}
    try:
        await wire.send_message(conn, TOPIC, b"x", properties=props, queue_id=0)
    except RemotingError as e:
        assert e.code == ResponseCode.MESSAGE_ILLEGAL, e
    else:
        raise AssertionError("a half message with DELAY=soon was taken")
    no_group = {"TRAN_MSG": "true"}
    try:
        await wire.send_message(conn, TOPIC, b"x", properties=no_group, queue_id=0)
    except RemotingError as e:
        assert e.code == ResponseCode.MESSAGE_ILLEGAL, e
    else:
        raise AssertionError("a half message without PGROUP was taken")


async def test_half_messages_beyond_transaction_open_max_are_refused_with_a_reason(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    """A producer that never ends its transactions cannot grow the broker's memory past ``transactionOpenMax``."""
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-tx", "--transaction-open-max", "3")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    props = {"TRAN_MSG": "true", "PGROUP": "tx-flood"}
    for i in range(3):
        await wire.send_message(conn, TOPIC, f"h{i}".encode(), properties=props, queue_id=0)
    try:
        await wire.send_message(conn, TOPIC, b"h3", properties=props, queue_id=0)
    except RemotingError as e:
        assert (e.code, e.reason) == (ResponseCode.SYSTEM_BUSY, Reason.TOO_MANY_OPEN_TRANSACTIONS), e
    else:
        raise AssertionError("a fourth open transaction was taken")
    async with TransactionProducer(ns.addr, "tx-other", check_listener=_never) as p:  # plain sends still work
        assert (await p.send(Message(TOPIC, b"plain"))).status == SendStatus.SEND_OK
