"""The dashboard's JSON API against a real ``sievemq dev`` holding the sample data (tests/dashboard/sample.py):
every endpoint with the exact values the sample makes, hostile parameters (400 with a stable reason), unknown
things (404), the headers every answer carries, and the standalone ``sievemq dashboard`` process (docs/dashboard.md).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq.version import __version__
from tests.dashboard import sample
from tests.dashboard.conftest import Board, get, ok, refused
from tests.support.procs import Proc, free_port

REGIONS = sample.REGIONS
ALL_ORDERS = sample.ORDERS + sample.LATE_ORDERS


def q(**params: object) -> str:
    return urllib.parse.urlencode({k: str(v) for k, v in params.items()})


def until(probe, what: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    """Call ``probe`` until it returns something truthy (a consumer's commits reach the broker in a few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(0.3)


# ------------------------------------------------------------------------------------------------ endpoints
def test_info(board: Board) -> None:
    info = ok(board.api("info"))
    assert info["version"] == __version__
    assert info["namesrv"] == [board.namesrv]
    assert info["refreshSeconds"] == 5
    assert info["limits"]["findByTime"] == 500


def test_dev_without_acl_asks_for_no_login(board: Board) -> None:
    """Logins are off in ``sievemq dev`` without ACL (docs/dashboard.md §5): no users file is made, any or no
    Authorization header is ignored, and messages come whole."""
    assert ok(board.api("info"))["auth"] == {"enabled": False}
    assert ok(board.api("info", Authorization="Bearer not-a-token"))["auth"] == {"enabled": False}
    assert not (Path(board.dev.args[board.dev.args.index("--data") + 1]) / "dashboard-users.toml").exists()
    assert not [line for line in board.dev.log().splitlines() if line.strip().startswith("login ")], "no token"
    (m,) = ok(board.api("messages/by-key?" + q(topic="orders", key="order-3")))["messages"]
    assert m["contentHidden"] is False and m["body"] == '{"order": 3, "items": 4}'


def test_cluster(board: Board) -> None:
    c = ok(board.api("cluster"))
    assert c["namesrv"] == [board.namesrv]
    assert c["clusters"] == {"DefaultCluster": ["broker-a"]}
    (b,) = c["brokers"]
    assert (b["brokerName"], b["brokerId"], b["addr"], b["role"]) == ("broker-a", 0, board.dev.addr, "ASYNC_MASTER")
    assert b["version"] == f"sievemq {__version__}"
    assert b["state"] == "serving" and b["slaves"] == 0
    assert b["putTotal"] >= ALL_ORDERS + sample.PAYMENTS + sample.AUDITS
    disk = b["disk"]
    assert disk["state"] == "writable"
    assert 0 < disk["freeBytes"] <= disk["totalBytes"] and 0 <= disk["usedRatio"] <= 1


def test_topics(board: Board) -> None:
    t = ok(board.api("topics"))
    rows = {r["topic"]: r for r in t["topics"]}
    assert set(rows) == {"orders", "payments", "audit-log"}, "system topics (retry, reply, TBW102) are left out"
    expected = (("orders", ALL_ORDERS, 4), ("payments", sample.PAYMENTS, 2), ("audit-log", sample.AUDITS, 1))
    for topic, n, queues in expected:
        r = rows[topic]
        assert (r["messages"], r["putTotal"], r["queues"]) == (n, n, queues), r
        assert [(s["brokerName"], s["readQueueNums"], s["writeQueueNums"], s["messages"]) for s in r["brokers"]] == [
            ("broker-a", queues, queues, n)]
        assert r["lastStoreTimestamp"] > 0
    assert rows["orders"]["groups"] == ["billing", "shipping"]
    assert rows["payments"]["groups"] == [] and rows["payments"]["consumedTotal"] == 0
    every = {r["topic"] for r in ok(board.api("topics?system=true"))["topics"]}
    assert {"orders", "%RETRY%billing", "DefaultCluster_REPLY_TOPIC"} <= every


def test_topic_detail(board: Board) -> None:
    t = ok(board.api("topic?topic=orders"))
    queues = t["queueStats"]
    assert [q["queueId"] for q in queues] == [0, 1, 2, 3]
    assert all(q["brokerName"] == "broker-a" and q["minOffset"] == 0 for q in queues)
    assert sum(q["maxOffset"] for q in queues) == sum(q["messages"] for q in queues) == ALL_ORDERS
    assert all((q["lastStoreTimestamp"] > 0) == (q["maxOffset"] > 0) for q in queues)
    assert t["brokers"][0]["addrs"] == {"0": board.dev.addr}
    assert t["brokers"][0]["perm"] == 6
    # shipping consumed the first ORDERS (its committed offsets passed every one of them) and stopped
    assert t["consumers"]["shipping"] == sample.ORDERS
    until(lambda: ok(board.api("topic?topic=orders"))["consumers"]["billing"] == ALL_ORDERS, "billing caught up")


def test_groups(board: Board) -> None:
    def billing_caught_up() -> dict | None:  # type: ignore[type-arg]
        groups = {g["group"]: g for g in ok(board.api("groups"))["groups"]}
        return groups if groups["billing"]["lag"] == 0 else None

    groups = until(billing_caught_up, "billing's lag 0")
    assert set(groups) == {"billing", "shipping"}, "the tools' own groups are left out"
    billing, shipping = groups["billing"], groups["shipping"]
    assert len(billing["members"]) == 1 and billing["consumeType"] == "CONSUME_PASSIVELY"
    assert billing["messageModel"] == "CLUSTERING"
    assert billing["subscriptions"]["orders"] == "TagA"
    assert billing["consistency"]["state"] == "consistent" and billing["consistency"]["clients"] == 1
    assert shipping["members"] == [] and shipping["consumeType"] is None
    assert shipping["lag"] == sample.LATE_ORDERS
    assert shipping["consistency"]["state"] == "no clients"
    assert "orders" in shipping["topics"]


def test_group_detail(board: Board) -> None:
    g = ok(board.api("group?group=shipping"))
    orders = [q for q in g["queues"] if q["topic"] == "orders"]
    assert len(orders) == 4
    assert sum(q["lag"] for q in orders) == g["totals"]["lag"] == sample.LATE_ORDERS
    assert all(q["lag"] == q["brokerOffset"] - q["consumerOffset"] for q in orders)
    assert sum(q["consumerOffset"] for q in orders) == sample.ORDERS
    assert g["members"] == [] and g["consistency"]["state"] == "no clients"
    b = ok(board.api("group?group=billing"))
    (member,) = b["members"]
    (status,) = b["status"]
    (client,) = status["clients"]
    assert client["clientId"] == member["clientId"] and client["consistent"] is True
    assert client["subscriptions"]["orders"]["expression"] == "TagA"
    counts = {f["topic"]: f["counts"] for rep in b["filters"] for f in rep["filters"]}
    assert counts["orders"]["matched"] >= sample.ORDERS // 2, counts


def test_message_by_id_key_and_time(board: Board) -> None:
    i = 5
    msg_id = board.sample.order_ids[f"order-{i}"]
    (m,) = ok(board.api("messages/by-id?" + q(id=msg_id)))["messages"]
    assert (m["topic"], m["msgId"], m["keys"], m["tags"]) == ("orders", msg_id, [f"order-{i}"], "TagA")
    assert m["userProperties"] == {"region": REGIONS[i % 3], "amount": str(i * 10)}
    (by_key,) = ok(board.api("messages/by-key?" + q(topic="orders", key=f"order-{i}")))["messages"]
    assert by_key["msgId"] == msg_id
    assert ok(board.api("messages/by-key?" + q(topic="orders", key="no-such-key")))["messages"] == []
    every = ok(board.api("messages/by-time?" + q(topic="orders", begin=0, end=int(time.time() * 1000) + 60_000,
                                                 limit=500)))  # fmt: skip
    assert sorted(r["keys"][0] for r in every["messages"]) == sorted(f"order-{n}" for n in range(ALL_ORDERS))
    stamps = [r["storeTimestamp"] for r in every["messages"]]
    assert stamps == sorted(stamps) and every["notes"] == []
    few = ok(board.api("messages/by-time?" + q(topic="orders", begin=0, end=int(time.time() * 1000), limit=3)))
    assert len(few["messages"]) == 3 and few["notes"]
    middle = stamps[len(stamps) // 2]
    part = ok(board.api("messages/by-time?" + q(topic="orders", begin=middle, end=stamps[-1], limit=500)))
    assert sorted(r["storeTimestamp"] for r in part["messages"]) == [s for s in stamps if s >= middle]
    none = ok(board.api("messages/by-time?" + q(topic="orders", begin=1, end=2)))
    assert none["messages"] == []


def test_message_detail(board: Board) -> None:
    i = 33  # a late order: TagA (billing takes it), region eu (shipping would, but it has stopped)
    found = ok(board.api("messages/by-id?" + q(id=board.sample.order_ids[f"order-{i}"])))["messages"]
    d = ok(board.api("message?" + q(id=found[0]["offsetMsgId"])))
    m = d["message"]
    assert m["body"] == f'{{"order": {i}, "items": {i % 4 + 1}}}' and m["bodyEncoding"] == "utf-8"
    assert m["properties"]["KEYS"] == f"order-{i}" and m["properties"]["region"] == "eu"
    assert m["properties"]["amount"] == str(i * 10)
    states = {t["group"]: t["state"] for t in d["consumption"]}
    assert states["shipping"] == "NOT_CONSUME_YET"
    until(lambda: {t["group"]: t["state"] for t in ok(board.api("message?" + q(id=found[0]["offsetMsgId"])))[
        "consumption"]}["billing"] == "CONSUMED", "billing consumed order 33")
    audit = ok(board.api("messages/by-time?" + q(topic="audit-log", begin=0, end=int(time.time() * 1000))))
    assert [r["body"] for r in audit["messages"]] == [bytes([0, 159, 146, 150, n]).hex() for n in range(sample.AUDITS)]
    assert {r["bodyEncoding"] for r in audit["messages"]} == {"hex"}


def test_explain(board: Board) -> None:
    e = ok(board.api("explain?" + q(topic="orders", type="SQL92", expression="region = 'eu'")))
    assert e["totals"]["scanned"] == ALL_ORDERS
    assert e["totals"]["matched"] == sample.eu_orders(ALL_ORDERS)
    assert e["totals"]["notMatched"] == ALL_ORDERS - sample.eu_orders(ALL_ORDERS)
    assert e["reports"][0]["broker"] == "broker-a"
    t = ok(board.api("explain?" + q(topic="orders", type="tag", expression="TagA")))
    assert t["expressionType"] == "TAG" and t["totals"]["matched"] == ALL_ORDERS // 2
    last = ok(board.api("explain?" + q(topic="orders", expression="amount > 100", last=1)))
    assert last["totals"]["scanned"] == 4, "one message of each of the 4 queues"
    missing = ok(board.api("explain?" + q(topic="payments", expression="region = 'eu'")))
    assert missing["totals"]["nullResults"] == sample.PAYMENTS


# ------------------------------------------------------------------------------------------------ refusals
HOSTILE = [
    ("topic?topic=" + urllib.parse.quote("../../etc/passwd"), "INVALID_NAME"),
    ("topic?topic=" + "t" * 128, "INVALID_NAME"),
    ("topic?topic=" + urllib.parse.quote("<script>alert(1)</script>"), "INVALID_NAME"),
    ("topic", "INVALID_PARAMETER"),
    ("group?group=" + urllib.parse.quote("a b"), "INVALID_NAME"),
    ("group?group=" + "g" * 256, "INVALID_NAME"),
    ("messages/by-id?id=xyz", "INVALID_PARAMETER"),
    ("messages/by-id?id=" + "A" * 65, "INVALID_PARAMETER"),
    ("messages/by-id?id=" + urllib.parse.quote("7F00' OR 1=1"), "INVALID_PARAMETER"),
    ("messages/by-key?topic=orders&key=" + urllib.parse.quote("a\x00b"), "INVALID_PARAMETER"),
    ("messages/by-key?topic=orders&key=" + "k" * 256, "INVALID_PARAMETER"),
    ("messages/by-key?topic=orders&key=a%20b", "INVALID_PARAMETER"),
    ("messages/by-key?topic=orders&key=k&limit=0", "INVALID_PARAMETER"),
    ("messages/by-key?topic=orders&key=k&limit=1001", "INVALID_PARAMETER"),
    ("messages/by-time?topic=orders&begin=0&end=10&limit=501", "INVALID_PARAMETER"),
    ("messages/by-time?topic=orders&begin=0&end=10&limit=1e3", "INVALID_PARAMETER"),
    ("messages/by-time?topic=orders&begin=yesterday&end=10", "INVALID_PARAMETER"),
    ("messages/by-time?topic=orders&begin=99999999999999999999&end=10", "INVALID_PARAMETER"),
    ("messages/by-time?topic=orders&begin=10&end=5", "INVALID_PARAMETER"),
    ("messages/by-time?topic=orders&end=5", "INVALID_PARAMETER"),
    ("explain?topic=orders&expression=" + "a" * 4097, "INVALID_PARAMETER"),
    ("explain?topic=orders&expression=a%20%3D%3D", "INVALID_EXPRESSION"),
    ("explain?topic=orders&expression=%7C%7C&type=TAG", "INVALID_EXPRESSION"),
    ("explain?topic=orders&expression=a&type=JAVASCRIPT", "INVALID_PARAMETER"),
    ("explain?topic=orders&expression=a%3D1&last=100001", "INVALID_PARAMETER"),
    ("explain?topic=orders&expression=a%3D1&last=-1", "INVALID_PARAMETER"),
    ("topics?limit=2001", "INVALID_PARAMETER"),
    ("topics?system=maybe", "INVALID_PARAMETER"),
    ("topics?unknown=1", "INVALID_PARAMETER"),
    ("topic?topic=orders&topic=payments", "INVALID_PARAMETER"),
]


@pytest.mark.parametrize(("path", "reason"), HOSTILE, ids=[p[:50] for p, _ in HOSTILE])
def test_hostile_parameters_are_refused(board: Board, path: str, reason: str) -> None:
    refused(board.api(path), 400, reason)


def test_unknown_things_are_404(board: Board) -> None:
    refused(board.api("topic?topic=no-such-topic"), 404, "TOPIC_NOT_FOUND")
    refused(board.api("explain?topic=no-such-topic&expression=a%3D1"), 404, "TOPIC_NOT_FOUND")
    refused(board.api("messages/by-time?topic=no-such-topic&begin=0&end=1"), 404, "TOPIC_NOT_FOUND")
    refused(board.api("messages/by-key?topic=no-such-topic&key=k"), 404, "TOPIC_NOT_FOUND")
    refused(board.api("group?group=no-such-group"), 404, "GROUP_NOT_FOUND")
    refused(board.api("messages/by-id?id=" + "0" * 32), 404, "MESSAGE_NOT_FOUND")
    refused(board.api("message?id=" + "0" * 32), 404, "MESSAGE_NOT_FOUND")
    refused(board.api("no/such/endpoint"), 404, "NOT_FOUND")
    for path in ("/static/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/app.py", "/index.htm", "/api.js"):
        a = get(board.url + path)
        assert a.status == 404 and b"root:" not in a.body, (path, a.status)


def test_read_only_and_headers(board: Board) -> None:
    import urllib.request

    req = urllib.request.Request(f"{board.url}/api/topics", data=b"{}", method="POST")
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("a POST was answered")
    except urllib.error.HTTPError as e:
        assert e.code == 405
    for path in ("/", "/app.js", "/style.css", "/api/info", "/api/topic?topic=bad%20name"):
        a = get(board.url + path)
        csp = a.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp, csp
        assert a.headers["X-Content-Type-Options"] == "nosniff"
        assert a.headers["Cache-Control"] == "no-store"
    page = get(board.url + "/")
    assert page.headers["Content-Type"].startswith("text/html")
    assert b"<script>" not in page.body and b"<script src=" in page.body, "no inline script in the page"
    assert get(board.url + "/app.js").headers["Content-Type"].startswith("text/javascript")


def test_a_loopback_dashboard_refuses_other_host_names(board: Board) -> None:
    port = board.url.rsplit(":", 1)[1]
    refused(board.api("topics", Host=f"attacker.example:{port}"), 403, "HOST_NOT_ALLOWED")
    assert get(board.url + "/", {"Host": "attacker.example"}).status == 403
    ok(board.api("info", Host=f"localhost:{port}"))
    ok(board.api("info", Host=f"[::1]:{port}"))


# ------------------------------------------------------------------------------------------------ standalone
@pytest.fixture
def standalone(board: Board, tmp_path: Path) -> Iterator[Proc]:
    port = free_port()
    proc = Proc(["dashboard", "--namesrv-addr", board.namesrv, "--http-port", str(port)], port,
                tmp_path / "dashboard.log", ready_text="sievemq dashboard on").start()  # fmt: skip
    try:
        yield proc
    finally:
        proc.stop()


def test_standalone_dashboard_shows_the_same_cluster(board: Board, standalone: Proc) -> None:
    url = f"http://127.0.0.1:{standalone.port}"
    topics = ok(get(f"{url}/api/topics"))
    assert {r["topic"]: r["messages"] for r in topics["topics"]}["orders"] == ALL_ORDERS
    assert get(url + "/").status == 200
    assert b"sievemq_build_info" in get(url + "/metrics").body, "the process serves its own metrics too"
    assert ok(get(f"{url}/healthz"))["status"] == "ok"


def test_standalone_dashboard_without_a_name_server_answers_502(tmp_path: Path, board: Board) -> None:
    port, dead = free_port(), free_port()
    proc = Proc(["dashboard", "--namesrv-addr", f"127.0.0.1:{dead}", "--http-port", str(port)], port,
                tmp_path / "dashboard.log", ready_text="sievemq dashboard on").start()  # fmt: skip
    try:
        for path in ("cluster", "topics", "groups", "topic?topic=orders"):
            refused(get(f"http://127.0.0.1:{port}/api/{path}"), 502, "NAMESRV_UNREACHABLE")
    finally:
        proc.stop()


async def test_topic_stats_request_of_a_missing_topic(board: Board) -> None:
    """GET_TOPIC_STATS_INFO (202) itself: a topic the broker does not have is TOPIC_NOT_EXIST."""
    from sievemq.admin.api import AdminClient
    from sievemq.protocol.admin_bodies import decode_topic_stats
    from sievemq.remoting.codes import RequestCode, ResponseCode

    async with AdminClient(board.namesrv) as admin:
        missing = await admin.request(board.dev.addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "no-such-topic"})
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST, missing.remark
        found = await admin.request(board.dev.addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "payments"})
        table = decode_topic_stats(found.body)
        assert [(k.topic, k.broker_name, k.queue_id) for k in table] == [("payments", "broker-a", q) for q in (0, 1)]
        assert sum(v.max_offset - v.min_offset for v in table.values()) == sample.PAYMENTS
