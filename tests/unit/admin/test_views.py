"""The pure parts of the operator's commands: a group's progress from the brokers' answers
(admin/progress.py ``aggregate``), whether a group consumed a message (admin/message_view.py ``track``), how a body
is shown, and what ``dlq resend`` sends and where its cursor goes (admin/dlq.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sievemq.admin.dlq import RESENT_FROM, advance, copy_of, marker, matches
from sievemq.admin.message_view import MessageView, TrackState, body_text, track
from sievemq.admin.progress import aggregate, expression_of
from sievemq.protocol.admin_bodies import Connection, ConsumerConnection, ConsumeStats, OffsetWrapper
from sievemq.protocol.message import MessageExt, string_to_properties
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.sysflag import MULTI_TAGS_FLAG, TRANSACTION_COMMIT_TYPE


def test_progress_adds_up_the_queues_of_every_broker_and_joins_the_members() -> None:
    stats = {
        "broker-a": ConsumeStats({QueueKey("T", "broker-a", 0): OffsetWrapper(10, 4, 4, 111),
                                  QueueKey("T", "broker-a", 1): OffsetWrapper(5, 5, 5, 222)}),
        "broker-b": ConsumeStats({QueueKey("T", "broker-b", 0): OffsetWrapper(7, 2, 6, 99),
                                  QueueKey("%RETRY%g", "broker-b", 0): OffsetWrapper(0, 0, 0, 0)}),
    }  # fmt: skip
    c1, c2 = Connection("c1", "1.1.1.1:1", "JAVA", 401), Connection("c2", "2.2.2.2:2", "PYTHON", 399)
    conns = {
        "broker-a": ConsumerConnection([c1], {"T": {"subString": "TagA || TagB", "expressionType": "TAG"}},
                                       "CONSUME_PASSIVELY", "CLUSTERING"),
        "broker-b": ConsumerConnection([c1, c2], {"T": {"subString": "a > 1", "expressionType": "SQL92"}},
                                       "CONSUME_PASSIVELY", "CLUSTERING"),
        "broker-c": None,
    }  # fmt: skip
    p = aggregate("g", stats, conns, {"broker-d": "connection refused"})
    assert [(q.topic, q.broker, q.queue_id, q.lag, q.inflight) for q in p.queues] == [
        ("%RETRY%g", "broker-b", 0, 0, 0), ("T", "broker-a", 0, 6, 0), ("T", "broker-a", 1, 0, 0),
        ("T", "broker-b", 0, 5, 4)]  # fmt: skip
    assert (p.lag, p.inflight, p.last_timestamp, p.topics) == (11, 4, 222, ["%RETRY%g", "T"])
    assert [(m.client_id, m.brokers) for m in p.members] == [("c1", ("broker-a", "broker-b")), ("c2", ("broker-b",))]
    assert (p.consume_type, p.message_model, p.subscriptions) == ("CONSUME_PASSIVELY", "CLUSTERING",
                                                                 {"T": "TagA || TagB"})  # fmt: skip
    doc = p.to_json()
    assert doc["totals"] == {"lag": 11, "inflight": 4, "lastTimestamp": 222, "queues": 4, "topics": 2,
                             "brokerOffset": 22, "consumerOffset": 11}  # fmt: skip
    assert doc["errors"] == {"broker-d": "connection refused"}
    assert doc["queues"][1] == {"topic": "T", "brokerName": "broker-a", "queueId": 0, "brokerOffset": 10,
                                "consumerOffset": 4, "lag": 6, "inflight": 0, "lastTimestamp": 111}  # fmt: skip
    assert expression_of({"subString": "a > 1", "expressionType": "SQL92"}) == "SQL92 a > 1"
    offline = aggregate("g", stats, {"broker-a": None})
    assert offline.members == [] and offline.consume_type is None and offline.lag == 11


def _msg(**kw: object) -> MessageExt:
    base: dict[str, object] = {"topic": "T", "queue_id": 1, "queue_offset": 5, "properties": {"TAGS": "TagB",
                               "region": "eu"}}  # fmt: skip
    base.update(kw)
    return MessageExt(**base)  # type: ignore[arg-type]


def test_track_reads_the_offset_and_the_subscription() -> None:
    m = _msg()
    assert track(m, None, online=False) is TrackState.NOT_CONSUME_YET
    assert track(m, 5, online=False) is TrackState.NOT_CONSUME_YET, "offset 5 is the next to consume: not yet"
    assert track(m, 6, online=False) is TrackState.CONSUMED
    assert track(m, 6, online=True, subscription=("TAG", "TagA || TagB")) is TrackState.CONSUMED
    assert track(m, 6, online=True, subscription=("TAG", "TagA")) is TrackState.CONSUMED_BUT_FILTERED
    assert track(m, 6, online=True, subscription=("SQL92", "region = 'eu'")) is TrackState.CONSUMED
    assert track(m, 6, online=True, subscription=("SQL92", "region = 'us'")) is TrackState.CONSUMED_BUT_FILTERED
    assert track(m, 6, online=True, subscription=("SQL92", "(((")) is TrackState.CONSUMED, "cannot tell: consumed"
    assert track(m, 9, online=True, message_model="BROADCASTING") is TrackState.CONSUME_BROADCASTING


def test_bodies_show_as_text_or_hex() -> None:
    assert body_text(b"hello") == ("utf-8", "hello")
    assert body_text(b"\x00\x01\xff") == ("hex", "0001ff")
    assert body_text("é".encode() * 3, limit=3) == ("utf-8", "é"), "a character cut by the limit is left out"
    assert body_text(b"a\x07b") == ("hex", "610762"), "control characters are not shown as text"
    v = MessageView.of("b", _msg(body=b"x" * 10))
    assert v.to_json(preview=4)["body"] == "xxxx" and v.to_json(preview=4)["bodyTruncated"] is True
    assert v.user_properties == {"region": "eu"}


def test_dead_letter_selection_and_copy() -> None:
    props = {"TAGS": "T1", "KEYS": "k1 k2", "UNIQ_KEY": "AB12", "RETRY_TOPIC": "Orders", "DELAY": "3",
             "TRAN_MSG": "true", "PGROUP": "p", "ORIGIN_MESSAGE_ID": "CD34", "user": "v"}  # fmt: skip
    dead = _msg(topic="%DLQ%g", queue_id=0, queue_offset=8, properties=props, reconsume_times=16,
                sys_flag=MULTI_TAGS_FLAG | TRANSACTION_COMMIT_TYPE, born_timestamp=77, body=b"b", flag=3)  # fmt: skip
    assert matches(dead, None, None) and matches(dead, "k2", None) and not matches(dead, "k3", None)
    assert matches(dead, None, "ab12") and matches(dead, None, "CD34") and not matches(dead, None, "EF56")
    assert marker("broker-a", dead) == "broker-a:0:8"
    header, body = copy_of("broker-a", dead, "%RETRY%g")
    sent = string_to_properties(header.properties)
    assert (header.topic, header.reconsume_times, header.sys_flag, header.born_timestamp, header.flag, body) == (
        "%RETRY%g", 0, MULTI_TAGS_FLAG, 77, 3, b"b")
    assert sent == {"TAGS": "T1", "KEYS": "k1 k2", "UNIQ_KEY": "AB12", "RETRY_TOPIC": "Orders", "PGROUP": "p",
                    "ORIGIN_MESSAGE_ID": "CD34", "user": "v", RESENT_FROM: "broker-a:0:8"}  # fmt: skip
    header, _ = copy_of("broker-a", dead, "Orders")
    assert "RETRY_TOPIC" not in string_to_properties(header.properties)
    anonymous = _msg(topic="%DLQ%g", queue_offset=9, properties={})
    first = string_to_properties(copy_of("b", anonymous, "%RETRY%g")[0].properties)["UNIQ_KEY"]
    assert len(first) == 32 and first == string_to_properties(copy_of("b", anonymous, "%RETRY%g")[0].properties)[
        "UNIQ_KEY"], "a dead letter without an id gets the same derived id on every run"  # fmt: skip


@given(st.integers(0, 20), st.lists(st.booleans(), max_size=20))
def test_the_cursor_passes_exactly_the_done_prefix(cursor: int, oks: list[bool]) -> None:
    done = [(cursor + i, ok) for i, ok in enumerate(oks)]
    first_not_done = next((cursor + i for i, ok in enumerate(oks) if not ok), cursor + len(oks))
    assert advance(cursor, done) == first_not_done
    assert advance(cursor, [(cursor - 1, False), *done]) == first_not_done, "offsets below the cursor are ignored"
