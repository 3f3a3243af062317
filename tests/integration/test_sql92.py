"""SQL92 filtering on the broker: pulls carrying an expression, heartbeat-registered filters that survive a
restart, CHECK_CLIENT_CONFIG, clear errors for bad expressions, counts, and the explain command."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import orjson
import pytest

from sievemq import PullConsumer, PushConsumer, Selector
from sievemq.client import api
from sievemq.client.errors import SubscriptionError
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic
from tests.support import wire

EXPR = "region = 'eu' AND amount > 100"


def matches(i: int) -> bool:
    return i % 2 == 0 and i * 10 > 100


async def fill(conn: Any, topic: str, n: int = 40, queue_id: int = 0) -> None:
    for i in range(n):
        await wire.send_message(
            conn,
            topic,
            f"m{i}".encode(),
            tags="TagA",
            properties={"region": "eu" if i % 2 == 0 else "us", "amount": str(i * 10)},
            queue_id=queue_id,
        )


async def pull_bodies(conn: Any, group: str, topic: str, sub: str | None, kind: str = "SQL92") -> tuple[list[str], Any]:
    got: list[str] = []
    offset, last = 0, None
    for _ in range(50):
        r = await api.pull_message(conn, group, topic, 0, offset, subscription=sub, expression_type=kind)
        last = r
        got += [m.body.decode() for m in r.messages]
        if r.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY) or r.next_begin_offset == offset:
            break
        offset = r.next_begin_offset
    return got, last


def hb(client: str, group: str, topic: str, expr: str, kind: str = "SQL92") -> HeartbeatData:
    return HeartbeatData(
        client,
        consumers=[
            ConsumerData(
                group, subscriptions=[Subscription(topic, expr, kind, 1), Subscription("%RETRY%" + group, "*")]
            )
        ],
    )


async def test_pull_with_sql_expression_delivers_only_matches(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    await fill(conn, "Orders")
    got, _ = await pull_bodies(conn, "g-sql", "Orders", EXPR)
    assert got == [f"m{i}" for i in range(40) if matches(i)]


async def test_deeply_nested_and_long_machine_built_selectors_filter_on_the_broker(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    """1,000 levels of parentheses, 1,000 of NOT, and a 5,000-term right-nested OR: accepted by a heartbeat and a
    pull, and filtering exactly like their short forms (RocketMQ's parser accepts them too)."""
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Deep", 1)
    await fill(conn, "Deep")
    want = [f"m{i}" for i in range(40) if matches(i)]
    parens = "(" * 1000 + EXPR + ")" * 1000
    nots = "NOT " * 1000 + f"({EXPR})"
    ors = "region = 'nowhere'"
    for i in range(5000):
        ors = f"amount = '{100000 + i}' OR ({ors})"
    ors = f"({EXPR}) OR ({ors})"
    for n, expr in enumerate((parens, nots, ors)):
        got, last = await pull_bodies(conn, f"g-deep{n}", "Deep", expr)
        assert got == want, (n, last.remark if last else None)
    resp = await call(conn, RequestCode.HEART_BEAT, body=orjson.dumps(hb("c-deep", "g-deep-hb", "Deep", ors).to_json()))
    assert resp.code == ResponseCode.SUCCESS and not resp.remark, resp.remark
    got, _ = await pull_bodies(conn, "g-deep-hb", "Deep", None)
    assert got == want


async def test_bad_expressions_get_subscription_parse_failed_with_position(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    for bad, hint in [("a > ", "column"), ("a = 1 b", "column"), ("a > 0.0", "column"), ("a LIKE", "column")]:
        r = await api.pull_message(conn, "g", "Orders", 0, 0, subscription=bad, expression_type="SQL92")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (bad, r.code, r.remark)
        assert r.remark and hint in r.remark, r.remark  # the remark says where the expression is wrong
    body = orjson.dumps(
        {
            "clientId": "c1",
            "group": "g",
            "subscriptionData": {"topic": "Orders", "subString": "amount >", "expressionType": "SQL92"},
        }
    )
    resp = await call(conn, RequestCode.CHECK_CLIENT_CONFIG, body=body)
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "column" in (resp.remark or "")
    good = orjson.dumps(
        {
            "clientId": "c1",
            "group": "g",
            "subscriptionData": {"topic": "Orders", "subString": EXPR, "expressionType": "SQL92"},
        }
    )
    assert (await call(conn, RequestCode.CHECK_CLIENT_CONFIG, body=good)).code == ResponseCode.SUCCESS


async def test_property_filter_can_be_switched_off(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr, "broker-a", "--enable-property-filter", "false")
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    r = await api.pull_message(conn, "g", "Orders", 0, 0, subscription=EXPR, expression_type="SQL92")
    assert (r.code, r.reason) == (ResponseCode.SYSTEM_ERROR, Reason.SQL92_DISABLED), (r.code, r.remark)


async def test_heartbeat_filter_serves_pulls_without_expression_and_survives_restart(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    await api.heartbeat(conn, hb("c1", "g-hb", "Orders", EXPR))
    await fill(conn, "Orders")
    got, _ = await pull_bodies(conn, "g-hb", "Orders", None)  # like a Java push consumer: no expression
    want = [f"m{i}" for i in range(40) if matches(i)]
    assert got == want
    conn.close()
    b.stop()
    b = cluster.restart(b)
    conn2 = await open_conn(b)
    # no heartbeat yet after the restart: the persisted filter still applies, nobody receives everything
    got, _ = await pull_bodies(conn2, "g-hb", "Orders", None)
    assert got == want


async def test_bitmaps_skip_non_matching_messages_and_counts_say_so(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    await api.heartbeat(conn, hb("c1", "g-bm", "Orders", EXPR))
    await asyncio.sleep(0.01)
    await fill(conn, "Orders")  # stored after the filter registered: bitmaps computed at dispatch
    got, _ = await pull_bodies(conn, "g-bm", "Orders", None)
    assert got == [f"m{i}" for i in range(40) if matches(i)]
    resp = await call(conn, RequestCode.GET_GROUP_FILTERS, {"consumerGroup": "g-bm"})
    assert resp.code == ResponseCode.SUCCESS
    (flt,) = [f for f in orjson.loads(resp.body)["filters"] if f["topic"] == "Orders"]
    counts = flt["counts"]
    assert counts["matched"] == len(got)
    assert counts["filtered_by_bitmap"] + counts["filtered_by_evaluation"] == 40 - len(got)
    assert counts["filtered_by_bitmap"] > 0, counts  # the Bloom bits spared commit-log reads
    assert flt["expression"] == EXPR and len(flt["bloomBitPositions"]) == 3


async def test_tag_filter_counts(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "T", 1)
    for i in range(10):
        await wire.send_message(conn, "T", b"x", tags="TagA" if i < 3 else "TagB", queue_id=0)
    got, _ = await pull_bodies(conn, "g-tag", "T", "TagA", kind="TAG")
    assert len(got) == 3
    resp = await call(conn, RequestCode.GET_GROUP_FILTERS, {"consumerGroup": "g-tag"})
    (flt,) = orjson.loads(resp.body)["filters"]
    assert flt["counts"]["matched"] == 3 and flt["counts"]["filtered_by_tag"] == 7


async def test_explain_command(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    await fill(conn, "Orders")
    await wire.send_message(conn, "Orders", b"no-amount", properties={"region": "eu"}, queue_id=0)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sievemq.cli",
        "explain",
        "--topic",
        "Orders",
        "--sql",
        EXPR,
        "-n",
        ns.addr,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    n = sum(1 for i in range(40) if matches(i))
    assert f"{n} of 41 messages match" in text, text
    assert "'amount' is missing in 1 of 41" in text, text
    assert "NULL" in text
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sievemq.cli",
        "explain",
        "--topic",
        "Orders",
        "--sql",
        "amount >",
        "-n",
        ns.addr,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode != 0 and "column" in err.decode() and "Traceback" not in err.decode()


@pytest.mark.parametrize("kind", ["push", "pull"])
async def test_a_consumer_refused_for_its_selector_leaves_no_group_behind(
    cluster: Cluster, open_conn: OpenConn, kind: str
) -> None:
    """A consumer whose SQL92 selector does not compile fails to start (SUBSCRIPTION_PARSE_FAILED) before any
    heartbeat names its group: the broker has no config of the group afterwards (``group list`` does not show it)."""
    ns = cluster.namesrv()
    b = cluster.broker(ns.addr)
    conn = await open_conn(b)
    await create_topic(conn, "Orders", 1)
    group = f"g-refused-sql-{kind}"
    consumer: PushConsumer | PullConsumer
    if kind == "push":
        consumer = PushConsumer(ns.addr, group)

        @consumer.listener
        async def _listen(msgs: list[Any]) -> None:
            return None
    else:
        consumer = PullConsumer(ns.addr, group)
    consumer.subscribe("Orders", Selector.sql("amount >"))
    with pytest.raises(SubscriptionError) as raised:
        await consumer.start()
    assert raised.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    await consumer.close()
    resp = await call(conn, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    groups = orjson.loads(resp.body)["subscriptionGroupTable"]
    assert group not in groups, sorted(groups)


async def _one_eu_two_plain(cluster: Cluster, open_conn: OpenConn) -> tuple[Any, Any]:
    """A broker whose topic Orders holds one message with region=eu and two without region: (name server, conn)."""
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr))
    await create_topic(conn, "Orders", 1)
    await wire.send_message(conn, "Orders", b"eu", properties={"region": "eu"}, queue_id=0)
    for body in (b"plain-1", b"plain-2"):
        await wire.send_message(conn, "Orders", body, queue_id=0)
    return ns, conn


async def test_explain_warns_of_a_comparison_of_two_properties(cluster: Cluster, open_conn: OpenConn) -> None:
    """``region = eu`` (for ``region = 'eu'``) compares two properties: explain says so with a stable code, and
    counts the stored messages that have neither (and therefore match, NULL = NULL being TRUE as in RocketMQ)."""
    _, conn = await _one_eu_two_plain(cluster, open_conn)
    fields = {"topic": "Orders", "expression": "region = eu", "expressionType": "SQL92", "last": 10}
    resp = await call(conn, RequestCode.EXPLAIN_SELECTOR, fields)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    report = orjson.loads(resp.body)
    assert report["matched"] == 2  # the two messages without region (eu != its absent namesake)
    ((warning),) = report["warnings"]
    assert (warning["code"], warning["position"], warning["messagesWithNeither"]) == ("COMPARES_TWO_PROPERTIES", 1, 2)
    assert "region = 'eu'" in warning["text"]
    fields["expression"] = "region = 'eu'"
    assert orjson.loads((await call(conn, RequestCode.EXPLAIN_SELECTOR, fields)).body)["warnings"] == []


async def test_the_cli_warns_of_a_comparison_of_two_properties(cluster: Cluster, open_conn: OpenConn) -> None:
    """``explain`` prints the broker's warning with the count of messages that have neither property; ``consume``
    warns on stderr before it starts, and consumes as RocketMQ would (the two messages without ``region``)."""
    ns, _ = await _one_eu_two_plain(cluster, open_conn)

    async def cli(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "sievemq.cli", *args, "-n", ns.addr,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode(), err.decode()

    code, out, err = await cli("explain", "--topic", "Orders", "--sql", "region = eu")
    assert code == 0, err
    assert "warning: region = eu compares two properties" in out and "region = 'eu'" in out, out
    assert "(2 of the 3 messages scanned have neither)" in out, out
    code, out, err = await cli("consume", "Orders", "--sql", "region = eu", "--from", "first", "--count", "2")
    assert code == 0, err
    assert "warning: region = eu compares two properties" in err, err
    assert "plain-1" in out and "plain-2" in out and "eu\n" not in out, out
    code, out, err = await cli("explain", "--topic", "Orders", "--sql", "region = 'eu'")
    assert code == 0 and "warning" not in out + err, out + err
