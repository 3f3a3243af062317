"""The operator's API (sievemq.admin: progress, reset, delete, peek, message lookup, DLQ resend) against a real
``sievemq dev``, with sievemq's own consumers running where the behaviour depends on them (docs/admin.md).

One ``sievemq dev`` serves the whole module; each test uses its own topic and group names.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

import orjson
import pytest

from sievemq import Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.admin.dlq import RESENT_FROM, resend
from sievemq.admin.errors import GroupNotFound, GroupOnline, MessageNotFound, TopicNotFound
from sievemq.admin.group_ops import delete_group, reset_offset
from sievemq.admin.message_view import TrackState
from sievemq.admin.messages import consumption, find_by_key, show
from sievemq.admin.peek import peek
from sievemq.admin.progress import GroupProgress, group_list, group_progress
from sievemq.admin.timespec import ResetPoint, parse_reset_point
from sievemq.client import api, pop_api
from sievemq.errors import RemotingError
from sievemq.protocol.admin_bodies import encode_reset_body
from sievemq.protocol.message import decode_records
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from tests.client.conftest import Collector, collecting, eventually, ready, routed, start_dev
from tests.integration.conftest import _CLUSTER_KEY, Cluster
from tests.support.procs import Proc
from tests.support.quiet import quiet_period

Names = Callable[[str], str]
EARLIEST, LATEST = parse_reset_point("earliest"), parse_reset_point("latest")
_n = iter(range(1, 10_000))


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    proc = start_dev(tmp_path_factory.mktemp("admin-dev"))
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest, dev: Proc) -> None:
    """A failed test gets the tail of the module's ``sievemq dev`` log (tests/integration/conftest.py's hook)."""
    holder = Cluster(dev.log_path.parent)
    holder.procs.append(dev)
    request.node.stash[_CLUSTER_KEY] = holder


@pytest.fixture
def namesrv(dev: Proc) -> str:
    return str(dev.extra["namesrv"])


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    n = next(_n)
    return lambda kind: f"{kind}-{request.node.name.removeprefix('test_')[:40]}-{n}"


@pytest.fixture
async def admin(namesrv: str) -> AsyncIterator[AdminClient]:
    async with AdminClient(namesrv) as a:
        yield a


@pytest.fixture
async def conn(dev: Proc) -> AsyncIterator[Connection]:
    c = await connect("127.0.0.1", dev.port)
    yield c
    c.close()


async def _fill(namesrv: str, topic: str, bodies: list[str], queue: int = 0, tags: str | None = None,
                keys: list[str] | None = None) -> list[str]:  # fmt: skip
    """Send ``bodies`` to one queue of ``topic`` (a 2-queue topic, created on first send); their message ids."""
    ids = []
    async with Producer(namesrv, f"p-{topic}", default_topic_queue_nums=2) as p:
        for b in bodies:
            r = await p.send(Message(topic, b.encode(), tags=tags, keys=keys), queue_selector=lambda qs, m: qs[queue])
            ids.append(r.msg_id)
    await routed(namesrv, topic)
    return ids


async def _consumer(
    namesrv: str, group: str, topic: str, expression: str = "*", fail: Callable[[MessageExt], bool] | None = None,
    **kw: object,
) -> tuple[PushConsumer, Collector]:
    consumer = PushConsumer(namesrv, group, consume_from="first", persist_interval=0.2, **kw)  # type: ignore[arg-type]
    consumer.subscribe(topic, expression)
    got = collecting(consumer, fail)
    await consumer.start()
    await ready(consumer, topic)
    return consumer, got


async def _caught_up(admin: AdminClient, group: str, topic: str) -> GroupProgress | None:
    p = await group_progress(admin, group)
    qs = [q for q in p.queues if q.topic == topic]
    return p if qs and all(q.lag == 0 for q in qs) else None


# ------------------------------------------------------------------------------------------------ progress
async def test_progress_per_queue_with_retry_topic_members_and_last_consume_time(
    namesrv: str, names: Names, admin: AdminClient
) -> None:
    topic, group = names("Prog"), names("g")
    await _fill(namesrv, topic, [f"m{i}" for i in range(5)], queue=0)
    await _fill(namesrv, topic, ["n0"], queue=1)
    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: len(got.msgs) >= 6, what="all six consumed")
        p = await eventually(lambda: _caught_up(admin, group, topic), what="offsets committed")
        assert [m.client_id for m in p.members] == [consumer.client_id]
        assert (p.consume_type, p.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
        assert p.subscriptions[topic] == "*" and f"%RETRY%{group}" in p.subscriptions
        assert f"%RETRY%{group}" in p.topics, "the retry topic is part of the group's progress, as in RocketMQ"
        q0 = next(q for q in p.queues if q.topic == topic and q.queue_id == 0)
        assert (q0.broker, q0.broker_offset, q0.consumer_offset, q0.lag) == ("broker-a", 5, 5, 0)
        last = (await peek(admin, topic, queue=0, count=1)).messages[0].msg
        assert last.queue_offset == 4 and q0.last_timestamp == last.store_timestamp
    finally:
        await consumer.close()
    await _fill(namesrv, topic, ["late0", "late1", "late2"], queue=0)
    p = await group_progress(admin, group)
    q0 = next(q for q in p.queues if q.topic == topic and q.queue_id == 0)
    assert (p.members, q0.broker_offset, q0.consumer_offset, q0.lag, p.lag) == ([], 8, 5, 3, 3)
    only = await group_progress(admin, group, topic)
    assert {q.topic for q in only.queues} == {topic}
    with pytest.raises(GroupNotFound):
        await group_progress(admin, names("nobody"))


async def test_group_list_shows_every_group_with_members_type_and_lag(
    namesrv: str, names: Names, admin: AdminClient
) -> None:
    topic, online, offline = names("List"), names("on"), names("off")
    await _fill(namesrv, topic, ["a", "b"])
    gone, _ = await _consumer(namesrv, offline, topic)
    await eventually(lambda: _caught_up(admin, offline, topic), what="offline group caught up")
    await gone.close()
    await _fill(namesrv, topic, ["c", "d", "e"])
    consumer, _ = await _consumer(namesrv, online, topic)
    try:
        await eventually(lambda: _caught_up(admin, online, topic), what="online group caught up")
        rows = {g.group: g for g in await group_list(admin)}
        assert (rows[online].members, rows[online].consume_type, rows[online].lag) == (1, "CONSUME_PASSIVELY", 0)
        assert (rows[offline].members, rows[offline].consume_type, rows[offline].lag) == (0, None, 3)
        assert topic in rows[offline].topics
    finally:
        await consumer.close()


# ------------------------------------------------------------------------------------------------ reset
async def test_reset_to_earliest_moves_a_running_push_consumer(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic, group = names("Reset"), names("g")
    await _fill(namesrv, topic, [f"r{i}" for i in range(4)], queue=0)
    await _fill(namesrv, topic, ["r4"], queue=1)
    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: len(got.msgs) >= 5, what="first delivery")
        await eventually(lambda: _caught_up(admin, group, topic), what="offsets committed")
        r = await reset_offset(admin, group, topic, EARLIEST)
        assert r.clients_told == [consumer.client_id]
        assert [(q.queue_id, q.before, q.after) for q in r.queues] == [(0, 4, 0), (1, 1, 0)]
        await eventually(lambda: all(n == 2 for n in Counter(got.bodies()).values()), what="everything again")
        assert sorted(Counter(got.bodies()).items()) == [(f"r{i}".encode(), 2) for i in range(5)]
        p = await eventually(lambda: _caught_up(admin, group, topic), what="consumed to the end again")
        assert {q.queue_id: q.consumer_offset for q in p.queues if q.topic == topic} == {0: 4, 1: 1}
        same = await reset_offset(admin, group, topic, LATEST)
        assert [(q.before, q.after) for q in same.queues] == [(4, 4), (1, 1)]
        assert same.clients_told == [], "nothing moved: no client is told to restart its queues"
        await quiet_period(0.5, "a delivery after a reset that moved nothing", unchanged=lambda: len(got.msgs))
        assert len(got.msgs) == 10, "and nothing is delivered again"
    finally:
        await consumer.close()


async def test_reset_to_a_time_redelivers_what_was_stored_since(
    namesrv: str, names: Names, admin: AdminClient
) -> None:
    topic, group = names("Time"), names("g")
    await _fill(namesrv, topic, ["old0", "old1"])
    await asyncio.sleep(0.05)  # the next messages are stored in a later millisecond
    await _fill(namesrv, topic, ["new0", "new1"])
    since = min(v.msg.store_timestamp for v in (await peek(admin, topic, queue=0)).messages if v.body[:3] == b"new")
    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: len(got.msgs) >= 4, what="first delivery")
        await eventually(lambda: _caught_up(admin, group, topic), what="offsets committed")
        r = await reset_offset(admin, group, topic, ResetPoint(since, str(since)))
        assert {(q.queue_id, q.after) for q in r.queues} == {(0, 2), (1, 0)}
        await eventually(lambda: len(got.msgs) >= 6, what="the new ones again")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
        assert Counter(got.bodies()) == {b"old0": 1, b"old1": 1, b"new0": 2, b"new1": 2}
    finally:
        await consumer.close()


async def test_reset_without_consumers_sets_offsets_where_a_later_consumer_starts(
    namesrv: str, names: Names, admin: AdminClient
) -> None:
    topic, group = names("Offline"), names("g")
    await _fill(namesrv, topic, ["a", "b", "c"])
    first, _ = await _consumer(namesrv, group, topic)
    await eventually(lambda: _caught_up(admin, group, topic), what="caught up")
    await first.close()
    r = await reset_offset(admin, group, topic, EARLIEST)
    assert r.clients_told == [] and [(q.queue_id, q.before, q.after) for q in r.queues] == [(0, 3, 0), (1, 0, 0)]
    assert (await group_progress(admin, group, topic)).lag == 3
    await reset_offset(admin, group, topic, LATEST)
    assert (await group_progress(admin, group, topic)).lag == 0
    await _fill(namesrv, topic, ["d"])
    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: got.msgs, what="the new message")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
        assert got.bodies() == [b"d"]
    finally:
        await consumer.close()
    with pytest.raises(GroupNotFound):
        await reset_offset(admin, names("nobody"), topic, EARLIEST)


async def test_a_broker_offset_reset_reaches_the_client_instance(namesrv: str, names: Names) -> None:
    """The client side of RESET_CONSUMER_CLIENT_OFFSET alone: the broker's offsets stay, the consumer moves."""
    topic, group = names("ClientReset"), names("g")
    await _fill(namesrv, topic, ["x0", "x1", "x2"])
    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: len(got.msgs) >= 3, what="first delivery")
        body = encode_reset_body({QueueKey(topic, "broker-a", 0): 1})
        cmd = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                      {"topic": topic, "group": group, "timestamp": 0, "isForce": True}, body,
                                      oneway=True)  # fmt: skip
        inst = consumer._instance
        assert inst is not None
        broker_conn = await inst.conn(inst.broker_addr("broker-a") or "")
        assert await inst.handle(broker_conn, cmd) is None
        await eventually(lambda: len(got.msgs) >= 5, what="x1 and x2 again")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
        assert Counter(got.bodies()) == {b"x0": 1, b"x1": 2, b"x2": 2}
    finally:
        await consumer.close()


async def test_reset_of_a_pop_group_moves_its_cursor_and_ends_its_leases(
    namesrv: str, names: Names, admin: AdminClient, conn: Connection
) -> None:
    topic, group = names("Pop"), names("g")
    await _fill(namesrv, topic, ["p0", "p1", "p2"])
    popped = await pop_api.pop_message(conn, group, topic, 0, max_nums=3, from_latest=False)
    assert [m.message.body for m in popped.messages] == [b"p0", b"p1", b"p2"]
    for m in popped.messages[:2]:
        await pop_api.ack_message(conn, group, m.handle)
    p = await group_progress(admin, group, topic)
    q0 = next(q for q in p.queues if q.queue_id == 0)
    assert (q0.consumer_offset, q0.inflight, q0.lag) == (2, 1, 1), "one message handed out and not acked"
    r = await reset_offset(admin, group, topic, EARLIEST)
    assert [(q.queue_id, q.after) for q in r.queues] == [(0, 0), (1, 0)]
    with pytest.raises(RemotingError) as e:
        await pop_api.ack_message(conn, group, popped.messages[2].handle)
    assert e.value.reason == Reason.RECEIPT_HANDLE_EXPIRED, "a lease of before the reset is gone"
    again = await pop_api.pop_message(conn, group, topic, 0, max_nums=3)
    assert [(m.message.body, m.attempt) for m in again.messages] == [(b"p0", 1), (b"p1", 1), (b"p2", 1)]


# ------------------------------------------------------------------------------------------------ peek, delete
async def _state(conn: Connection) -> tuple[set[str], set[str]]:
    groups = orjson.loads((await conn.request(RemotingCommand.request(
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), 5)).body)["subscriptionGroupTable"]  # fmt: skip
    offsets = orjson.loads((await conn.request(RemotingCommand.request(
        RequestCode.GET_ALL_CONSUMER_OFFSET), 5)).body)["offsetTable"]  # fmt: skip
    return set(groups), set(offsets)


async def test_peek_reads_without_creating_a_group_or_offsets(
    namesrv: str, names: Names, admin: AdminClient, conn: Connection
) -> None:
    topic = names("Peek")
    await _fill(namesrv, topic, [f"k{i}" for i in range(6)], queue=0)
    await _fill(namesrv, topic, ["q1"], queue=1)
    before = await _state(conn)
    last = await peek(admin, topic, count=2)
    assert [(v.msg.queue_id, v.body) for v in last.messages] == [(0, b"k4"), (0, b"k5"), (1, b"q1")]
    from_offset = await peek(admin, topic, queue=0, offset=1, count=3)
    assert [v.body for v in from_offset.messages] == [b"k1", b"k2", b"k3"]
    assert [v.body for v in (await peek(admin, topic, queue=0, offset=5, count=10)).messages] == [b"k5"]
    assert (await peek(admin, topic, queue=0, offset=6)).messages == []
    assert await _state(conn) == before, "no subscription group and no offset were created"
    # what the check sees: a plain pull of a new group does create one
    probe = names("probe")
    r = await api.pull_message(conn, probe, topic, 0, 0, subscription="*", commit_offset=1)
    assert r.code == ResponseCode.SUCCESS
    groups, _ = await _state(conn)
    assert probe in groups and "TOOLS_CONSUMER" not in groups


async def test_delete_group_refuses_online_then_removes_config_offsets_and_retry_topic(
    namesrv: str, names: Names, admin: AdminClient, conn: Connection
) -> None:
    topic, group = names("Del"), names("g")
    await _fill(namesrv, topic, ["a", "bad"])
    consumer, _ = await _consumer(namesrv, group, topic, fail=lambda m: m.body == b"bad", max_reconsume_times=0)
    try:
        await eventually(lambda: _dlq_size(admin, group, 1), what="the bad message dead-lettered")
        with pytest.raises(GroupOnline) as e:
            await delete_group(admin, group)
        assert e.value.members == [consumer.client_id]
    finally:
        await consumer.close()
    r = await delete_group(admin, group)
    assert (r.brokers, r.offsets_removed, r.retry_topic_deleted) == (["broker-a"], True, True)
    assert (r.dlq_topic, r.dlq_messages, r.dlq_deleted) == (f"%DLQ%{group}", 1, False)
    groups, offsets = await _state(conn)
    assert group not in groups and not [k for k in offsets if k.endswith("@" + group)]
    with pytest.raises(GroupNotFound):
        await group_progress(admin, group)
    with pytest.raises(GroupNotFound):
        await delete_group(admin, group)


async def _dlq_size(admin: AdminClient, group: str, n: int) -> bool:
    try:
        route = await admin.route(f"%DLQ%{group}")
    except RemotingError:
        return False
    addr = route.broker_datas[0].broker_addrs[0]
    return await admin.max_offset(addr, f"%DLQ%{group}", 0) >= n


# ------------------------------------------------------------------------------------------------ DLQ
async def test_dlq_resend_sends_each_dead_letter_back_once(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic, group = names("Dlq"), names("g")
    ids = await _fill(namesrv, topic, ["d0", "d1"], keys=["k1"])
    ids += await _fill(namesrv, topic, ["d2"], keys=["k2"])
    broken, _ = await _consumer(namesrv, group, topic, fail=lambda m: True, max_reconsume_times=0)
    await eventually(lambda: _dlq_size(admin, group, 3), what="three dead letters")
    await broken.close()

    dry = await resend(admin, group, dry_run=True)
    assert (dry.examined, dry.selected, len(dry.resent), dry.cursors) == (3, 3, 3, {"broker-a:0": [0, 0]})
    assert (await group_progress(admin, group, f"%RETRY%{group}")).lag == 0, "a dry run sends nothing"

    some = await resend(admin, group, key="k1")
    assert sorted(e["msgId"] for e in some.resent) == sorted(ids[:2])
    assert some.cursors == {"broker-a:0": [0, 2]}, "the cursor passes the resent prefix"
    rest = await resend(admin, group)
    assert ([e["msgId"] for e in rest.resent], rest.examined) == ([ids[2]], 1)
    again = await resend(admin, group)
    assert (again.examined, again.resent, again.cursors) == (0, [], {"broker-a:0": [3, 3]})

    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: len(got.msgs) >= 3, what="the resent messages consumed")
        await quiet_period(0.5, "a second delivery of a resent message", unchanged=lambda: len(got.msgs))
        assert sorted(got.bodies()) == [b"d0", b"d1", b"d2"], "each once, through the group's retry topic"
        assert {m.topic for m in got.msgs} == {topic} and sorted(m.msg_id for m in got.msgs) == sorted(ids)
        assert {m.reconsume_times for m in got.msgs} == {0} and all(RESENT_FROM in m.properties for m in got.msgs)
    finally:
        await consumer.close()
    assert "TOOLS_DLQ_RESEND" not in {g.group for g in await group_list(admin)}
    assert "TOOLS_DLQ_RESEND" in {g.group for g in await group_list(admin, include_system=True)}


async def test_dlq_resend_checks_its_marks_beyond_the_cursor(namesrv: str, names: Names, admin: AdminClient) -> None:
    """A run with --msg-id resends one dead letter past the cursor; a full run later does not resend it again."""
    topic, group = names("DlqMark"), names("g")
    ids = await _fill(namesrv, topic, ["e0", "e1", "e2"])
    broken, _ = await _consumer(namesrv, group, topic, fail=lambda m: True, max_reconsume_times=0)
    await eventually(lambda: _dlq_size(admin, group, 3), what="three dead letters")
    await broken.close()
    last = (await peek(admin, f"%DLQ%{group}", count=1)).messages[0].msg.msg_id
    one = await resend(admin, group, msg_id=last)
    assert [e["msgId"] for e in one.resent] == [last] and one.cursors == {"broker-a:0": [0, 0]}
    full = await resend(admin, group)
    assert (len(full.resent), full.already) == (2, 1) and full.cursors == {"broker-a:0": [0, 3]}
    assert sorted([last] + [e["msgId"] for e in full.resent]) == sorted(ids)
    with pytest.raises(GroupNotFound):
        await resend(admin, names("nobody"))


# ------------------------------------------------------------------------------------------------ messages
async def test_message_show_by_either_id_with_who_consumed_it(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic, done, filtered, behind = names("Show"), names("done"), names("filtered"), names("behind")
    (msg_id,) = await _fill(namesrv, topic, ["hello"], tags="TagB", keys=["order-1"])
    await _fill(namesrv, topic, ["other"], queue=1)
    for group, expr in ((done, "*"), (behind, "*")):
        c, _ = await _consumer(namesrv, group, topic, expr)
        await eventually(lambda g=group: _caught_up(admin, g, topic), what=f"{group} caught up")
        await c.close()
    await reset_offset(admin, behind, topic, EARLIEST)
    online, _ = await _consumer(namesrv, filtered, topic, "TagA")
    try:
        await eventually(lambda: _caught_up(admin, filtered, topic), what="filtered group past it")
        found = await show(admin, msg_id)
        (view,) = found.messages
        assert (view.msg.topic, view.msg.uniq_key, view.body, view.msg.tags, view.msg.keys) == (
            topic, msg_id, b"hello", "TagB", ["order-1"])  # fmt: skip
        by_offset = await show(admin, view.msg.offset_msg_id)
        assert [v.msg.uniq_key for v in by_offset.messages] == [msg_id]
        assert [v.msg.uniq_key for v in (await show(admin, msg_id.lower(), topic)).messages] == [msg_id]
        states = {t.group: (t.state, t.online) for t in await consumption(admin, view)}
        assert states == {done: (TrackState.CONSUMED, False), behind: (TrackState.NOT_CONSUME_YET, False),
                          filtered: (TrackState.CONSUMED_BUT_FILTERED, True)}  # fmt: skip
    finally:
        await online.close()
    with pytest.raises(MessageNotFound):
        await show(admin, "0" * 32)
    with pytest.raises(TopicNotFound):  # no such thing is an error of its own (docs/operations.md)
        await show(admin, msg_id, names("OtherTopic"))


async def test_find_by_key_newest_first_and_bounded(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic = names("Find")
    await _fill(namesrv, topic, [f"f{i}" for i in range(70)], keys=["hot"])
    await _fill(namesrv, topic, ["cold"], queue=1, keys=["cold", "also"])
    found = await find_by_key(admin, topic, "hot", limit=1000)
    assert len(found.messages) == 70, "more than one broker answer's worth (64) is gathered page by page"
    assert [v.body for v in found.messages[:2]] == [b"f69", b"f68"]
    assert len((await find_by_key(admin, topic, "hot", limit=5)).messages) == 5
    assert [v.body for v in (await find_by_key(admin, topic, "also")).messages] == [b"cold"]
    newest = found.messages[0].msg.store_timestamp
    assert (await find_by_key(admin, topic, "hot", begin=newest + 1)).messages == []


# ------------------------------------------------------------------------------------------------ the wire
async def test_consume_stats_and_reset_bodies_are_rocketmqs(
    namesrv: str, names: Names, admin: AdminClient, dev: Proc, conn: Connection
) -> None:
    """208's body has queue objects as keys (what RocketMQ's tools parse); 222 tells each online client with 220,
    a C++ client in the list form."""
    topic, group = names("Wire"), names("g")
    await _fill(namesrv, topic, ["w"])
    heard: dict[str, list[RemotingCommand]] = {"JAVA": [], "CPP": []}
    for language, inbox in heard.items():

        class Inbox:
            async def handle(self, c: Connection, cmd: RemotingCommand, inbox: list[RemotingCommand] = inbox) -> None:
                inbox.append(cmd)

        client = await connect("127.0.0.1", dev.port, handler=Inbox())
        beat = {"clientID": f"{language}@1", "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": topic, "subString": "*", "expressionType": "TAG", "subVersion": 1,
                                     "tagsSet": [], "codeSet": [], "classFilterMode": False}]}]}  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=orjson.dumps(beat))
        cmd.language = language
        assert (await client.request(cmd, 5)).code == ResponseCode.SUCCESS
    fields = {"consumerGroup": group, "topic": topic}
    resp = await conn.request(RemotingCommand.request(RequestCode.GET_CONSUME_STATS, fields), 5)
    assert resp.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"' + topic.encode())
    resp = await conn.request(RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, fields), 5)
    cc = orjson.loads(resp.body)
    assert sorted(c["clientId"] for c in cc["connectionSet"]) == ["CPP@1", "JAVA@1"]
    assert (cc["consumeType"], cc["subscriptionTable"][topic]["subString"]) == ("CONSUME_PASSIVELY", "*")
    await reset_offset(admin, group, topic, EARLIEST)

    def told(language: str) -> list[RemotingCommand]:
        return [c for c in heard[language] if c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET]

    await eventually(lambda: told("JAVA") and told("CPP"), what="both clients told")
    (java,), (cpp,) = told("JAVA"), told("CPP")
    assert java.is_oneway and cpp.is_oneway
    assert java.ext_fields == {"topic": topic, "group": group, "timestamp": "0", "isForce": "true"}
    assert java.body == b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"%s"}:0,' % topic.encode() + (
        b'{"brokerName":"broker-a","queueId":1,"topic":"%s"}:0}}' % topic.encode())
    assert orjson.loads(cpp.body) == {"offsetTable": [
        {"brokerName": "broker-a", "offset": 0, "queueId": q, "topic": topic} for q in (0, 1)]}  # fmt: skip


async def test_hostile_reset_and_query_headers(namesrv: str, names: Names, conn: Connection) -> None:
    topic, group = names("Hostile"), names("g")
    await _fill(namesrv, topic, ["h"] * 70, keys=["many"])
    consumer, _ = await _consumer(namesrv, group, topic)
    await consumer.close()

    async def reset(**fields: object) -> RemotingCommand:
        base = {"topic": topic, "group": group, "timestamp": 0, "isForce": True}
        return await conn.request(RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                                          {**base, **fields}), 5)  # fmt: skip

    for fields, code, reason in [
        ({"queueId": 2}, ResponseCode.SYSTEM_ERROR, Reason.INVALID_HEADER),
        ({"queueId": 2**40}, ResponseCode.SYSTEM_ERROR, Reason.INVALID_HEADER),
        ({"queueId": 0, "offset": 71}, ResponseCode.SYSTEM_ERROR, Reason.INVALID_HEADER),
        ({"timestamp": "soon"}, ResponseCode.SYSTEM_ERROR, Reason.INVALID_HEADER),
        ({"group": "bad/name"}, ResponseCode.SYSTEM_ERROR, Reason.INVALID_NAME),
        ({"group": names("nobody")}, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, Reason.GROUP_NOT_FOUND),
        ({"topic": names("NoTopic")}, ResponseCode.TOPIC_NOT_EXIST, None),
    ]:
        r = await reset(**fields)
        assert (r.code, r.ext_fields.get("reason")) == (code, reason), (fields, r.remark)
    r = await reset(queueId=0, offset=69)
    assert r.code == ResponseCode.SUCCESS and r.body.endswith(b":69}}"), "one queue to an exact offset"
    q = {"topic": topic, "key": "many", "maxNum": 2**31 - 1, "beginTimestamp": 0, "endTimestamp": 2**62}
    r = await conn.request(RemotingCommand.request(RequestCode.QUERY_MESSAGE, q), 5)
    assert r.code == ResponseCode.SUCCESS and len(decode_records(r.body)) == 64, "at most 64 records answered"


async def test_offsets_of_other_topics_are_left_alone(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic, other, group = names("Alone"), names("Other"), names("g")
    await _fill(namesrv, topic, ["a", "b"])
    await _fill(namesrv, other, ["c"])
    for t in (topic, other):
        c, _ = await _consumer(namesrv, group, t)
        await eventually(lambda t=t: _caught_up(admin, group, t), what="caught up")
        await c.close()
    await reset_offset(admin, group, topic, EARLIEST)
    p = await group_progress(admin, group)
    assert {q.topic: q.lag for q in p.queues if q.queue_id == 0 and q.topic in (topic, other)} == {topic: 2, other: 0}
