"""Which subscription is a group's, who is inconsistent, and what the consumer list holds (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from sievemq.broker.clients import ROCKETMQ, STRICT, ClientChannel, ConsumerManager
from sievemq.broker.consistency import decide
from sievemq.protocol.heartbeat import ConsumerData, Subscription


def sub(topic: str, expr: str, version: int = 0, kind: str = "TAG") -> Subscription:
    return Subscription(topic=topic, sub_string=expr, sub_version=version, expression_type=kind)


def test_first_registered_expression_wins_and_others_are_inconsistent() -> None:
    subs = {"c1": {"T": sub("T", "TagA || TagB")}, "c2": {"T": sub("T", "TagC")}}
    v = decide(subs, {"c1": {"T": 1}, "c2": {"T": 2}})["T"]
    assert v.group_subscription.sub_string == "TagA || TagB"
    assert v.consistent == {"c1"} and set(v.inconsistent) == {"c2"}
    v = decide(subs, {"c1": {"T": 5}, "c2": {"T": 2}})["T"]
    assert v.group_subscription.sub_string == "TagC" and set(v.inconsistent) == {"c1"}


def test_equal_expressions_in_other_spelling_are_consistent() -> None:
    subs = {"c1": {"T": sub("T", "TagA || TagB")}, "c2": {"T": sub("T", " TagB||TagA ")}}
    v = decide(subs, {"c1": {"T": 1}, "c2": {"T": 2}})["T"]
    assert v.consistent == {"c1", "c2"} and not v.inconsistent


def test_ties_are_broken_by_client_id() -> None:
    subs = {"b": {"T": sub("T", "X")}, "a": {"T": sub("T", "Y")}}
    v = decide(subs, {})["T"]
    assert v.group_subscription.sub_string == "Y" and set(v.inconsistent) == {"b"}


def test_sql_and_tag_with_same_text_differ() -> None:
    subs = {"c1": {"T": sub("T", "a > 1", kind="SQL92")}, "c2": {"T": sub("T", "a > 1")}}
    v = decide(subs, {"c1": {"T": 1}, "c2": {"T": 2}})["T"]
    assert set(v.inconsistent) == {"c2"}


def test_consistency_is_judged_per_topic() -> None:
    subs = {"c1": {"T": sub("T", "A")}, "c2": {"U": sub("U", "B")}, "c3": {"T": sub("T", "A"), "U": sub("U", "C")}}
    out = decide(subs, {"c1": {"T": 1}, "c2": {"U": 2}, "c3": {"T": 3, "U": 4}})
    assert out["T"].consistent == {"c1", "c3"} and not out["T"].inconsistent
    assert out["U"].consistent == {"c2"} and set(out["U"].inconsistent) == {"c3"}


class FakeConn:
    def __init__(self, name: str) -> None:
        self.peer = (name, 1)

    def close(self) -> None:
        pass


def heartbeat(mgr: ConsumerManager, cid: str, conn: Any, *subs: Subscription, group: str = "G") -> bool:
    ch = ClientChannel(cid, conn, "PYTHON", 409, 0.0)
    return mgr.register(ch, ConsumerData(group=group, subscriptions=list(subs)))


@pytest.fixture
def notified() -> list[str]:
    return []


def test_manager_strict_excludes_inconsistent_client_and_notifies(notified: list[str]) -> None:
    mgr = ConsumerManager(lambda g, conns: notified.append(g), STRICT)
    c1, c2 = FakeConn("1"), FakeConn("2")
    assert heartbeat(mgr, "c1", c1, sub("T", "TagA || TagB"), sub("%RETRY%G", "*"))
    assert heartbeat(mgr, "c2", c2, sub("T", "TagC"), sub("%RETRY%G", "*"))
    assert not heartbeat(mgr, "c1", c1, sub("T", "TagA || TagB", 99), sub("%RETRY%G", "*"))  # no change
    info = mgr.get("G")
    assert info is not None
    assert info.subscription("T") is not None and info.subscription("T").sub_string == "TagA || TagB"  # type: ignore[union-attr]
    assert info.client_ids(requester="c1") == ["c1"]
    assert info.client_ids(requester="c2") == ["c1"]
    assert info.client_ids() == ["c1"]
    assert info.client_ids(topic="%RETRY%G") == ["c1", "c2"]
    remark = info.remark("c2", "T")
    assert remark is not None and "'G'" in remark and "'T'" in remark and "TagC" in remark and "TagA || TagB" in remark
    assert info.remark("c1", "T") is None
    assert mgr.inconsistencies_seen == 1
    assert notified == ["G", "G"]


def test_manager_hands_over_when_holders_leave(notified: list[str]) -> None:
    mgr = ConsumerManager(lambda g, conns: notified.append(g), STRICT)
    c1, c2 = FakeConn("1"), FakeConn("2")
    heartbeat(mgr, "c1", c1, sub("T", "Old"))
    heartbeat(mgr, "c2", c2, sub("T", "New"))
    info = mgr.get("G")
    assert info is not None and info.client_ids() == ["c1"]
    mgr.connection_closed(c1)  # type: ignore[arg-type]
    assert info.subscription("T").sub_string == "New"  # type: ignore[union-attr]
    assert info.client_ids() == ["c2"] and info.remark("c2", "T") is None
    assert notified[-1] == "G"


def test_rolling_change_keeps_old_expression_until_no_client_holds_it() -> None:
    mgr = ConsumerManager(lambda g, conns: None, STRICT)
    conns = {c: FakeConn(c) for c in ("a", "b", "c")}
    for c in "abc":
        heartbeat(mgr, c, conns[c], sub("T", "Old"))
    info = mgr.get("G")
    assert info is not None
    for i, c in enumerate("abc"):
        mgr.connection_closed(conns[c])  # type: ignore[arg-type]
        conns[c] = FakeConn(c + "2")
        heartbeat(mgr, c, conns[c], sub("T", "New"))
        expected = "Old" if i < 2 else "New"
        assert info.subscription("T").sub_string == expected  # type: ignore[union-attr]
        # whoever holds the group's expression covers every queue: the list is never empty
        assert info.client_ids() == sorted(x for x in "abc" if info.remark(x, "T") is None)
        assert info.client_ids()
    assert info.client_ids() == ["a", "b", "c"]


def test_rocketmq_mode_keeps_everyone_and_newest_wins(caplog: pytest.LogCaptureFixture) -> None:
    mgr = ConsumerManager(lambda g, conns: None, ROCKETMQ)
    heartbeat(mgr, "c1", FakeConn("1"), sub("T", "TagA", version=1))
    heartbeat(mgr, "c2", FakeConn("2"), sub("T", "TagC", version=2))
    info = mgr.get("G")
    assert info is not None
    assert info.client_ids() == ["c1", "c2"]
    assert info.subscription("T").sub_string == "TagC"  # type: ignore[union-attr]
    assert info.remark("c1", "T") is None
    assert any("lost" in r.message for r in caplog.records)


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="strict"):
        ConsumerManager(lambda g, c: None, "lenient")
