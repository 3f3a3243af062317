"""Issue 26's holes in the ACL, each against a real broker and name server with ``aclEnable`` on: the replication
codes as a byte oracle and an offset mover, a send-back that copies another topic's record into the caller's retry
topic, an END_TRANSACTION of another producer's topic, captured requests replayed or turned into others, and a name
server's liveness refreshed by anyone. Every test here failed before the fix."""

from __future__ import annotations

import zlib
from pathlib import Path

import orjson

from sievemq import Message, Producer
from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.message import MessageExt, encode_record
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.names import retry_topic
from sievemq.protocol.reasons import Reason, reason_of
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.integration.acl_cluster import (
    ACL,
    ADMIN,
    USER,
    acl_args,
    collecting_consumer,
    route_or_none_via,
    signed_conn,
)
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, eventually
from tests.support import wire
from tests.support.procs import Proc

SECRET = b"VICTIM-CARD=4111111111111111"


def refused(resp: RemotingCommand, reason: Reason = Reason.NO_PERMISSION) -> bool:
    return (resp.code, reason_of(resp.ext_fields)) == (ResponseCode.NO_PERMISSION, reason)


async def phy_of(conn: Connection, topic: str, body: bytes, **kw: object) -> int:
    sent = await wire.send_message(conn, topic, body, queue_id=0, **kw)  # type: ignore[arg-type]
    return parse_offset_msg_id(sent.msg_id)[2]


async def test_replication_codes_are_refused_to_an_ordinary_account(
    acl: tuple[Proc, Proc, Path], open_conn: OpenConn
) -> None:
    """HA_CHECK was a byte oracle (one crc of 256 answered SUCCESS), 30022 raised any group's offsets, 43 and 30021
    gave away every group's offsets and filters: all are for the brokers' own (admin) account now."""
    _, broker, _ = acl
    user, admin = [await signed_conn(open_conn, broker, a) for a in (USER, ADMIN)]
    await phy_of(admin, "TopicDeny", SECRET)
    answers = {(r.code, reason_of(r.ext_fields)) for r in
               [await call(user, RequestCode.HA_CHECK, {"offset": 1, "length": 1, "crc": zlib.crc32(bytes([b]))})
                for b in range(256)]}  # fmt: skip
    assert answers == {(ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION)}, answers
    await call(admin, RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GroupOK", "topic": "TopicOK",
                                                            "queueId": 0, "commitOffset": 0})  # fmt: skip
    body = orjson.dumps({"offsetTable": {"TopicOK@GroupOK": {"0": 999999}}})
    assert refused(await call(user, RequestCode.MERGE_CONSUMER_OFFSET, body=body))
    r = await call(admin, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GroupOK", "topic": "TopicOK",
                                                               "queueId": 0})  # fmt: skip
    assert r.ext_fields.get("offset") == "0", "the victim group's offset moved"
    for code in (RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_ALL_CONSUMER_FILTER,
                 RequestCode.GET_ALL_DELAY_OFFSET, RequestCode.GET_ALL_TOPIC_CONFIG,
                 RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG):  # fmt: skip
        assert refused(await call(user, code)), code
        assert (await call(admin, code)).code == ResponseCode.SUCCESS, code


async def join(conn: Connection, group: str, topic: str) -> None:
    data = HeartbeatData("attacker@1", consumers=[ConsumerData(group, subscriptions=[Subscription(topic, "*")])])
    await wire.heartbeat(conn, data)


async def test_a_send_back_copies_only_what_the_account_may_read(
    acl: tuple[Proc, Proc, Path], open_conn: OpenConn
) -> None:
    """CONSUMER_SEND_MSG_BACK with the offset of a record of a topic the account may not read copied it into the
    account's own retry topic, where a pull read it. Now the record's topic needs SUB, and an offset inside a body
    (bytes that look like a record) is no record at all."""
    _, broker, _ = acl
    user, admin = [await signed_conn(open_conn, broker, a) for a in (USER, ADMIN)]
    secret_at = await phy_of(admin, "TopicDeny", SECRET)
    await join(user, "GroupOK", "TopicOK")
    try:
        await api.send_back(user, offset=secret_at, group="GroupOK", delay_level=-1)  # straight to its DLQ
    except RemotingError as e:
        assert (e.code, e.reason) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION), e
        assert "TopicDeny" in e.remark
    else:
        raise AssertionError("a record of TopicDeny was sent back into GroupOK's retry/DLQ topics")
    # a record forged inside a body of a topic the account may read, claiming to be TopicOK's: not a record
    fake = encode_record(MessageExt(topic="TopicOK", body=SECRET, queue_id=0, queue_offset=0))
    pad_at = await phy_of(user, "TopicOK", b"pad" + fake)
    raw = (await call(admin, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": pad_at})).body
    try:
        await api.send_back(user, offset=pad_at + raw.index(fake), group="GroupOK")
    except RemotingError as e:
        assert e.code == ResponseCode.SYSTEM_ERROR and "look message by offset failed" in e.remark, e  # 4.x's remark
    else:
        raise AssertionError("bytes inside a body were taken for a record")
    # the account's own record goes back as before, and comes back through the group's retry topic
    await api.send_back(user, offset=pad_at, group="GroupOK", delay_level=-1)
    dlq = await call(admin, RequestCode.GET_MAX_OFFSET, {"topic": "%DLQ%GroupOK", "queueId": 0})
    assert dlq.ext_fields.get("offset") == "1", dlq.remark
    assert (await call(admin, RequestCode.GET_MAX_OFFSET, {"topic": retry_topic("GroupOK"), "queueId": 0})).code in (
        ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)  # fmt: skip


async def test_end_transaction_needs_pub_on_the_half_messages_topic(
    acl: tuple[Proc, Proc, Path], open_conn: OpenConn
) -> None:
    """Any signed account that learnt a producer group and two offsets could commit or roll back another tenant's
    transaction; now it needs PUB on the half message's topic."""
    _, broker, _ = acl
    user, admin = [await signed_conn(open_conn, broker, a) for a in (USER, ADMIN)]
    half = {"TRAN_MSG": "true", "PGROUP": "tx-victim"}
    sent = await wire.send_message(admin, "TopicDeny", b"half", properties=half, queue_id=0)
    phy = parse_offset_msg_id(sent.msg_id)[2]
    try:
        await api.end_transaction(user, "tx-victim", sent.queue_offset, phy, 8, sent.msg_id)  # 8: commit
    except RemotingError as e:
        assert (e.code, e.reason) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION), e
    else:
        raise AssertionError("an account without PUB on TopicDeny committed its transaction")
    r = await call(admin, RequestCode.GET_MAX_OFFSET, {"topic": "TopicDeny", "queueId": 0})
    assert r.ext_fields.get("offset") == "0", "the half message was committed"
    await api.end_transaction(admin, "tx-victim", sent.queue_offset, phy, 8, sent.msg_id)
    r = await call(admin, RequestCode.GET_MAX_OFFSET, {"topic": "TopicDeny", "queueId": 0})
    assert r.ext_fields.get("offset") == "1"


async def captured(conn: Connection, code: int, fields: dict[str, object], signer: RequestSigner) -> RemotingCommand:
    """A request as an eavesdropper saw it go by: signed, then sent."""
    cmd = RemotingCommand.request(code, fields)
    signer(cmd)
    conn.rpc_hook = None  # the attacker sends the bytes as they were
    return cmd


async def resend(conn: Connection, cmd: RemotingCommand, code: int | None = None) -> RemotingCommand:
    again = RemotingCommand.request(cmd.code if code is None else code, dict(cmd.ext_fields), cmd.body)
    return await conn.request(again, 5.0)


async def test_captured_requests_are_not_replayed_nor_turned_into_others(
    cluster: Cluster, tmp_path: Path, open_conn: OpenConn
) -> None:
    """A captured admin GET_TOPIC_STATS_INFO (202) resent as 215 deleted the topic. sievemq's signers sign the
    code, the field names, a time and a nonce: the changed code and the replay are refused. With
    ``aclStrictSignatures = admin`` an admin's plain (RocketMQ-style) signature is refused outright."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", *acl_args(path), "--acl-strict-signatures", "admin")
    conn = await open_conn(broker)
    admin = RequestSigner(*ADMIN)
    create = await captured(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Kept", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}, admin)  # fmt: skip
    assert (await resend(conn, create)).code == ResponseCode.SUCCESS
    assert refused(await resend(conn, create), Reason.ACL_REPLAYED)
    stats = await captured(conn, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Kept"}, admin)
    assert refused(await resend(conn, stats, RequestCode.DELETE_TOPIC_IN_BROKER), Reason.ACL_SIGNATURE)
    assert (await resend(conn, stats)).code == ResponseCode.SUCCESS  # the topic is still there
    # an admin request signed the RocketMQ way (as mqadmin does) is refused under aclStrictSignatures = admin ...
    plain = await captured(conn, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Kept"}, RequestSigner(*ADMIN,
                                                                                                     strict=False))
    assert refused(await resend(conn, plain), Reason.ACL_STRICT_REQUIRED)
    # ... while an ordinary account's plain signature is still accepted (RocketMQ's clients keep working)
    user_plain = await captured(conn, RequestCode.GET_TOPIC_NAME_LIST, {}, RequestSigner(*USER, strict=False))
    assert (await resend(conn, user_plain)).code == ResponseCode.SUCCESS


async def test_plain_admin_requests_with_unknown_fields_are_refused(
    acl: tuple[Proc, Proc, Path], open_conn: OpenConn
) -> None:
    """A plain signature covers the fields' values only: an added empty field, or a value split across an added
    field, passes it. An admin code refuses plainly signed requests with fields it does not know."""
    _, broker, _ = acl
    conn = await open_conn(broker)
    plain = RequestSigner(*ADMIN, strict=False)
    for fields in ({"topic": "TopicNew", "zz": ""}, {"topic": "TopicN", "zz": "ew"}):
        cmd = await captured(conn, RequestCode.DELETE_TOPIC_IN_BROKER, fields, plain)
        assert refused(await resend(conn, cmd), Reason.ACL_STRICT_REQUIRED), fields
    ok = await captured(conn, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "TopicNew"}, plain)
    assert (await resend(conn, ok)).code == ResponseCode.SUCCESS  # the topic survived


async def test_the_name_servers_liveness_check_needs_the_brokers_account(
    cluster: Cluster, tmp_path: Path, open_conn: OpenConn
) -> None:
    """QUERY_DATA_VERSION (322) refreshes a broker's last-seen time: unsigned, it kept a dead broker in routes."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    ns = cluster.namesrv("ns", *acl_args(path))
    conn = await open_conn(ns)
    fields = {"brokerName": "broker-x", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": 0}
    assert refused(await call(conn, RequestCode.QUERY_DATA_VERSION, fields, b"{}"), Reason.ACL_NO_CREDENTIALS)
    conn.rpc_hook = RequestSigner(*USER)
    assert refused(await call(conn, RequestCode.QUERY_DATA_VERSION, fields, b"{}"))
    conn.rpc_hook = RequestSigner(*ADMIN)
    assert (await call(conn, RequestCode.QUERY_DATA_VERSION, fields, b"{}")).code != ResponseCode.NO_PERMISSION


async def test_with_strict_signatures_required_sievemqs_clients_and_tools_still_work(
    cluster: Cluster, tmp_path: Path, open_conn: OpenConn
) -> None:
    """``aclStrictSignatures = all`` on the name server and the broker: registrations, sievemq's producer and
    consumer, and the admin API all sign strictly and get in; a plainly signed request does not."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    strict = ("--acl-strict-signatures", "all")
    ns = cluster.namesrv("ns", *acl_args(path), *strict)
    broker = cluster.broker(ns.addr, "broker-a", *acl_args(path), *strict, "--acl-access-key", ADMIN[0],
                            "--acl-secret-key", ADMIN[1])  # fmt: skip
    async with AdminClient(ns.addr, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        await eventually(admin.brokers, timeout=20, what="the broker registered with a strict signature")
        await admin.create_topic("TopicOK", queues=1)
        await eventually(lambda: route_or_none_via(admin, "TopicOK"), what="the topic's route")
    consumer, got = collecting_consumer(ns.addr, "GroupOK", "TopicOK", USER)
    async with consumer, Producer(ns.addr, "PG", access_key=USER[0], secret_key=USER[1]) as producer:
        await producer.send(Message("TopicOK", b"strictly signed"))
        await eventually(lambda: got, timeout=20, what="the message consumed")
    assert got[0].body == b"strictly signed"
    conn = await open_conn(broker)
    plain = await captured(conn, RequestCode.GET_TOPIC_NAME_LIST, {}, RequestSigner(*USER, strict=False))
    assert refused(await resend(conn, plain), Reason.ACL_STRICT_REQUIRED)
