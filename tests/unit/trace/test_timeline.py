"""The trace timeline (sievemq.admin.trace_timeline.assemble): sent, deliveries per group and client, retries,
dead letters, transactions."""

from __future__ import annotations

from sievemq.admin.trace_timeline import Copy, TraceMessage, assemble
from sievemq.protocol.trace_records import TraceRecord, TraceType

ID = "AC1100020001000000000000000000AA"


def pub(ts: int = 1000, ok: bool = True) -> TraceRecord:
    return TraceRecord(TraceType.PUB, ID, ts, "DefaultRegion", "prod", "T", "TagA", "k1", "10.0.0.1:10911", 12, 5,
                       0, offset_msg_id="OFF1", success=ok)  # fmt: skip


def before(group: str, ts: int, req: str, retry: int = 0) -> TraceRecord:
    return TraceRecord(TraceType.SUB_BEFORE, ID, ts, "DefaultRegion", group, keys="k1", request_id=req,
                       retry_times=retry)  # fmt: skip


def after(group: str, ts: int, req: str, ok: bool, code: int = 0) -> TraceRecord:
    return TraceRecord(TraceType.SUB_AFTER, ID, ts, group=group, keys="k1", cost_ms=ts % 100, success=ok,
                       request_id=req, context_code=code)  # fmt: skip


ORIGINAL = Copy("T", "broker-a", 2, 17, 1001, "OFF1")


def test_sent_and_consumed_by_two_groups() -> None:
    other = TraceRecord(TraceType.PUB, "OTHER", 1, group="x")
    traces = [
        TraceMessage("10.0.0.5", 1002, [pub()]),
        TraceMessage("10.0.0.7", 1100, [before("g1", 1050, "r1"), after("g1", 1060, "r1", True)]),
        TraceMessage("10.0.0.8", 1200, [before("g2", 1070, "r2"), after("g2", 1090, "r2", True), other]),
    ]
    t = assemble(ID, traces, [ORIGINAL])
    assert t.records == 5  # the other message's record is not counted
    (s,) = t.sent
    js = s.to_json()
    assert (js["producerGroup"], js["clientHost"], js["brokerName"], js["queueId"], js["queueOffset"],
            js["costMs"], js["status"]) == ("prod", "10.0.0.5", "broker-a", 2, 17, 5, "success")  # fmt: skip
    assert sorted(t.groups) == ["g1", "g2"]
    g1 = t.groups["g1"].to_json()
    assert (g1["state"], g1["consumed"], g1["retries"]) == ("CONSUMED", True, 0)
    (d,) = g1["deliveries"]
    assert (d["clientHost"], d["timestamp"], d["status"], d["costMs"], d["consumeReturn"]) == (
        "10.0.0.7", 1050, "success", 60, "SUCCESS")  # fmt: skip
    assert [e["event"] for e in t.events] == ["SENT", "DELIVERED", "CONSUMED", "DELIVERED", "CONSUMED"]


def test_retried_then_dead_lettered() -> None:
    tries = [before("g", 1050, "r1"), after("g", 1060, "r1", False, 4), before("g", 1500, "r2", 1),
             after("g", 1510, "r2", False, 2)]  # fmt: skip
    traces = [TraceMessage("10.0.0.5", 1002, [pub()]), TraceMessage("10.0.0.7", 2000, tries)]
    copies = [ORIGINAL, Copy("%RETRY%g", "broker-a", 0, 3, 1070, "OFF2", 1),
              Copy("%DLQ%g", "broker-a", 0, 0, 1520, "OFF3", 2)]  # fmt: skip
    t = assemble(ID, traces, copies)
    g = t.groups["g"]
    assert (g.state, g.consumed, len(g.retry_copies), g.dead_letter) == ("DEAD_LETTERED", False, 1, copies[2])
    assert [(d.retry_times, d.status, d.consume_return) for d in g.deliveries] == [
        (0, "failed", "FAILED"), (1, "failed", "EXCEPTION")]  # fmt: skip
    assert t.sent[0].stored == ORIGINAL  # the retry and DLQ copies are not the sent message
    events = [(e["event"], e["timestamp"]) for e in t.events]
    assert events == [("SENT", 1000), ("DELIVERED", 1050), ("CONSUME_FAILED", 1060), ("RETRY_STORED", 1070),
                      ("DELIVERED", 1500), ("CONSUME_FAILED", 1510), ("DEAD_LETTERED", 1520)]  # fmt: skip


def test_a_delivery_without_its_sub_after_is_pending_and_an_orphan_after_is_kept() -> None:
    t = assemble(ID, [TraceMessage("h", 1, [before("g", 10, "r1"), after("g2", 30, "zz", True)])])
    assert t.groups["g"].state == "CONSUMING" and t.groups["g"].deliveries[0].status == "pending"
    assert t.groups["g2"].consumed and t.groups["g2"].deliveries[0].retry_times == -1
    assert t.sent == []


def test_transaction_and_recall() -> None:
    end = TraceRecord(TraceType.END_TRANSACTION, ID, 1500, "r", "txp", "T", transaction_id="TX",
                      transaction_state="COMMIT_MESSAGE", from_transaction_check=True)  # fmt: skip
    rec = TraceRecord(TraceType.RECALL, ID, 1600, "r", "p", "T", success=True)
    t = assemble(ID, [TraceMessage("h", 1, [pub(), end, rec])])
    assert t.transaction == [{"producerGroup": "txp", "timestamp": 1500, "clientHost": "h", "state": "COMMIT_MESSAGE",
                              "fromTransactionCheck": True, "transactionId": "TX", "storeHost": ""}]  # fmt: skip
    assert t.recalls[0]["status"] == "success"
    assert [e["event"] for e in t.events] == ["SENT", "END_TRANSACTION", "RECALLED"]
    assert t.sent[0].stored is None  # no stored copy given


def test_a_failed_send_and_the_json() -> None:
    t = assemble(ID, [TraceMessage("h", 1, [pub(ok=False)])])
    doc = t.to_json()
    assert doc["sent"][0]["status"] == "failed" and doc["events"][0]["event"] == "SEND_FAILED"
    assert set(doc) == {"msgId", "traceRecords", "sent", "transaction", "recalls", "groups", "events"}


def test_one_group_only() -> None:
    traces = [TraceMessage("h", 1, [pub(), before("g1", 10, "r1"), before("g2", 11, "r2")])]
    t = assemble(ID, traces, [Copy("%DLQ%g2", "b", 0, 0, 20)], group="g1")
    assert list(t.groups) == ["g1"] and {e["group"] for e in t.events} == {"prod", "g1"}
