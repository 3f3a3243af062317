"""Heartbeats and consumer-group membership: the consumer list, NOTIFY_CONSUMER_IDS_CHANGED, leaving."""

from __future__ import annotations

import orjson

from sievemq.client import api
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import OpenConn
from tests.integration.helpers import Recorder, call, eventually, route_or_none
from tests.support import wire
from tests.support.procs import Proc

GROUP = "member-group"
TOPIC = "MemberTopic"
FIRST, SECOND = "zeta@10.0.0.1@1", "alpha@10.0.0.2@2"  # joins in the opposite of sorted order


def _hb(client_id: str, sub: str = "*") -> HeartbeatData:
    return HeartbeatData(
        client_id,
        consumers=[
            ConsumerData(
                GROUP,
                subscriptions=[Subscription(TOPIC, sub, "TAG", 1), Subscription(f"%RETRY%{GROUP}", "*", "TAG", 1)],
            )
        ],
    )


async def _notified(rec: Recorder, since: int) -> bool:
    new = [c for c in rec.requests[since:] if c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    return bool(new) and all(c.ext_fields.get("consumerGroup") == GROUP for c in new)


async def test_consumer_list_notify_unregister_and_close(ns: Proc, broker: Proc, open_conn: OpenConn) -> None:
    rec1 = Recorder()
    c1 = await open_conn(broker, handler=rec1)
    c2 = await open_conn(broker, handler=Recorder())
    admin = await open_conn(broker)
    await wire.send_message(admin, TOPIC, b"x")

    assert await api.consumer_ids(admin, GROUP) == []
    resp = await call(admin, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark, "an unknown group has no consumer list"

    await api.heartbeat(c1, _hb(FIRST))
    assert await api.consumer_ids(admin, GROUP) == [FIRST]

    # The second client joins: the list has both, sorted, and the first client is told at once.
    mark = len(rec1.requests)
    await api.heartbeat(c2, _hb(SECOND))
    assert await api.consumer_ids(admin, GROUP) == sorted([FIRST, SECOND])
    await eventually(lambda: _notified(rec1, mark), timeout=2.0, what="NOTIFY_CONSUMER_IDS_CHANGED to the first")
    notify = rec1.of_code(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)[-1]
    assert notify.is_oneway, "NOTIFY_CONSUMER_IDS_CHANGED is a one-way request"

    # A repeated identical heartbeat changes nothing and notifies nobody. (A notify is written before the
    # heartbeat's response, so once a later round trip on c1 is answered, any notify would have arrived.)
    before = len(rec1.of_code(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED))
    await api.heartbeat(c2, _hb(SECOND))
    await api.heartbeat(c1, _hb(FIRST))
    await api.consumer_ids(c1, GROUP)
    assert len(rec1.of_code(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)) == before

    # UNREGISTER_CLIENT removes the second client and notifies the first.
    mark = len(rec1.requests)
    resp = await call(
        c2, RequestCode.UNREGISTER_CLIENT, {"clientID": SECOND, "consumerGroup": GROUP, "producerGroup": ""}
    )
    assert resp.code == ResponseCode.SUCCESS
    assert await api.consumer_ids(admin, GROUP) == [FIRST]
    await eventually(lambda: _notified(rec1, mark), timeout=2.0, what="notify after UNREGISTER_CLIENT")

    # It comes back, then its connection closes: removed again, first client notified again.
    await api.heartbeat(c2, _hb(SECOND))
    assert await api.consumer_ids(admin, GROUP) == sorted([FIRST, SECOND])
    mark = len(rec1.requests)
    c2.close()
    await eventually(
        lambda: _eq(api.consumer_ids(admin, GROUP), [FIRST]), timeout=3.0, what="closed client leaves the group"
    )
    await eventually(lambda: _notified(rec1, mark), timeout=2.0, what="notify after the connection closed")

    # The last client leaving empties the group.
    c1.close()
    await eventually(lambda: _eq(api.consumer_ids(admin, GROUP), []), timeout=3.0, what="empty group")


async def test_subscription_change_notifies_the_group(broker: Proc, open_conn: OpenConn) -> None:
    rec1 = Recorder()
    c1 = await open_conn(broker, handler=rec1)
    c2 = await open_conn(broker)
    await api.heartbeat(c1, _hb(FIRST))
    await api.heartbeat(c2, _hb(SECOND))
    mark = len(rec1.requests)
    await api.heartbeat(c2, _hb(SECOND, "TagA || TagB"))
    await eventually(lambda: _notified(rec1, mark), timeout=2.0, what="notify after a subscription change")


async def test_heartbeat_creates_the_retry_topic(ns: Proc, broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    retry = f"%RETRY%{GROUP}"
    configs = orjson.loads((await call(conn, RequestCode.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
    assert retry not in configs
    await api.heartbeat(conn, _hb("retry-maker@1"))

    configs = orjson.loads((await call(conn, RequestCode.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
    assert retry in configs
    assert (configs[retry]["readQueueNums"], configs[retry]["writeQueueNums"], configs[retry]["perm"]) == (1, 1, 6)

    # ...and registers it with the name server.
    nsc = await open_conn(ns)
    route = await eventually(lambda: route_or_none(nsc, retry), timeout=3.0, what="route of the retry topic")
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]


async def _eq(aw, expected) -> bool:  # type: ignore[no-untyped-def]
    return bool(await aw == expected)
