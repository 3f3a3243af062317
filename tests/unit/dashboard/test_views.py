"""The dashboard's pure parts: answers put together (views.py), failures turned into API errors (errors.py), the
Host check (app.py), the TopicStatsTable codec (protocol/admin_bodies.py) and the page's files (package data)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sievemq.admin.api import NamesrvUnreachable
from sievemq.admin.errors import GroupNotFound, MessageNotFound, TopicNotFound
from sievemq.admin.topic_stats import QueueStats, TopicStats
from sievemq.dashboard.app import STATIC_FILES, _host_of, _loopback
from sievemq.dashboard.errors import ApiError, error_of
from sievemq.dashboard.views import consistency, explain_totals, topic_row
from sievemq.errors import RemotingError
from sievemq.protocol.admin_bodies import TopicOffset, decode_topic_stats, encode_topic_stats
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.route import BrokerData, QueueData, TopicRouteData
from sievemq.remoting.codes import ResponseCode

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "src" / "sievemq" / "dashboard" / "static"


def _client(cid: str, consistent: bool, topic: str = "T", expression: str = "a") -> dict:  # type: ignore[type-arg]
    return {"clientId": cid, "consistent": consistent,
            "subscriptions": {topic: {"expression": expression, "consistent": consistent}}}  # fmt: skip


def test_consistency() -> None:
    assert consistency([])["state"] == "no clients"
    assert consistency([{"clients": [], "inconsistenciesSeen": 2}]) == {
        "state": "no clients", "clients": 0, "inconsistentClients": {}, "inconsistenciesSeen": 2}
    ok = consistency([{"clients": [_client("c1", True)]}, {"clients": [_client("c1", True), _client("c2", True)]}])
    assert ok["state"] == "consistent" and ok["clients"] == 2
    bad = consistency([{"clients": [_client("c1", True)]}, {"clients": [_client("c1", False, "T", "b")]}])
    assert bad["state"] == "inconsistent" and bad["inconsistentClients"] == {"c1": {"T": "b"}}


def test_explain_totals() -> None:
    reports = [{"scanned": 10, "matched": 4, "notMatched": 6, "nullResults": 1, "evaluationErrors": 0},
               {"scanned": 5, "matched": 5, "notMatched": 0, "nullResults": 0, "evaluationErrors": 2}]  # fmt: skip
    assert explain_totals(reports) == {"scanned": 15, "matched": 9, "notMatched": 6, "nullResults": 1,
                                       "evaluationErrors": 2}  # fmt: skip


def test_topic_row() -> None:
    queues = [QueueStats("b1", 0, 2, 10, 111), QueueStats("b1", 1, 0, 0, 0), QueueStats("b2", 0, 0, 5, 99)]
    stats = TopicStats("T", queues)
    brokers = [BrokerData("C", "b1", {0: "h:1"}), BrokerData("C", "b2", {0: "h:2", 1: "h:3"})]
    route = TopicRouteData([QueueData("b2", 1, 1, 4), QueueData("b1", 2, 2, 6)], brokers)
    row = topic_row(stats, route, {"g1": 7, "g2": 3})
    assert (row["messages"], row["putTotal"], row["consumedTotal"], row["queues"]) == (13, 15, 10, 3)
    assert row["lastStoreTimestamp"] == 111 and row["groups"] == ["g1", "g2"]
    assert [(b["brokerName"], b["messages"], b["perm"], b["addrs"]) for b in row["brokers"]] == [
        ("b1", 8, 6, {"0": "h:1"}), ("b2", 5, 4, {"0": "h:2", "1": "h:3"})]


def test_failures_become_api_errors() -> None:
    cases: list[tuple[BaseException, int, str]] = [
        (TopicNotFound("T"), 404, "TOPIC_NOT_FOUND"),
        (GroupNotFound("G"), 404, "GROUP_NOT_FOUND"),
        (MessageNotFound("no"), 404, "MESSAGE_NOT_FOUND"),
        (NamesrvUnreachable("down"), 502, "NAMESRV_UNREACHABLE"),
        (RemotingError(ResponseCode.TOPIC_NOT_EXIST, "no route"), 404, "TOPIC_NOT_FOUND"),
        (RemotingError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "bad"), 400, "INVALID_EXPRESSION"),
        (RemotingError(ResponseCode.NO_PERMISSION, "denied", "NO_PERMISSION"), 502, "NO_PERMISSION"),
        (RemotingError(ResponseCode.SYSTEM_ERROR, "boom"), 502, "BROKER_ERROR"),
        (ConnectionRefusedError(), 502, "BROKER_ERROR"),
    ]
    for e, status, reason in cases:
        err = error_of(e)
        assert isinstance(err, ApiError) and (err.status, err.reason) == (status, reason), (e, err)
    assert error_of(KeyError("a bug")) is None, "a bug is not dressed up as a broker's failure"


def test_host_check() -> None:
    assert [_host_of(h) for h in ("127.0.0.1:8080", "[::1]:8080", "localhost", "[::1]")] == [
        "127.0.0.1", "::1", "localhost", "::1"]
    assert all(_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost", "LOCALHOST"))
    assert not any(_loopback(h) for h in ("attacker.example", "10.0.0.1", "", "localhost.attacker.example"))


_QUEUES = st.tuples(st.sampled_from(["T", "%RETRY%g"]), st.sampled_from(["b1", "b-2"]), st.integers(0, 1023))
_OFFSETS = st.tuples(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**45))


@given(st.dictionaries(_QUEUES, _OFFSETS, max_size=20))
def test_topic_stats_codec_round_trips(table: dict) -> None:  # type: ignore[type-arg]
    typed = {QueueKey(*k): TopicOffset(*v) for k, v in table.items()}
    assert decode_topic_stats(encode_topic_stats(typed)) == typed


def test_the_page_files_ship_in_the_package_and_hold_no_html_injection() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert data["sievemq.dashboard"] == ["static/*"]
    assert {p.name for p in STATIC.iterdir()} == set(STATIC_FILES), "serve every file of static/ and nothing else"
    page = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", page), "no inline script (the CSP forbids it)"
    assert not re.search(r"\son[a-z]+=", page), "no inline event handler"
    for js in STATIC.glob("*.js"):
        text = js.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in text, f"{js.name} uses {sink}: data must reach the page as text"
