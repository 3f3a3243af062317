"""The trace record codec (sievemq.protocol.trace_records): vectors the Java clients really wrote
(tests/interop/test_java_trace.py captured them), and hand-written ones for the layouts of other client versions."""

from __future__ import annotations

import pytest

from sievemq.protocol.trace_records import TraceRecord, TraceType, decode, encode, keys_of

# rocketmq-client 4.9.8 (enableMsgTrace), as stored in RMQ_SYS_TRACE_TOPIC: the consumer's trace message, then the
# producer's
JAVA4_CONSUMER = (
    b"SubBefore\x011796429522561\x01DefaultRegion\x01JTrC_8b73800ead\x01C000020234780C387F4414A476810000\x01"
    b"C000020234470C387F4414A474BD0000\x010\x01trk0\x02SubAfter\x01C000020234780C387F4414A476810000\x01"
    b"C000020234470C387F4414A474BD0000\x013\x01true\x01trk0\x010\x011796429522564\x01JTrC_8b73800ead\x02"
)
JAVA4_PRODUCER = (
    b"Pub\x011796429522110\x01DefaultRegion\x01JTrP_2faa6b1331\x01JT_da519cf61a\x01C000020234470C387F4414A474BD0000"
    b"\x01TagA\x01trk0\x01127.0.0.1:20053\x016\x0129\x010\x017F00000100004E550000000000000000\x01true\x02"
)
# rocketmq-client 5.5.0's 4.x API: the same layouts
JAVA5_PRODUCER = (
    b"Pub\x011796429527219\x01DefaultRegion\x01JTrP_993085a643\x01JT_b3f66d4220\x01C000020234DC0C387F4414A488B10000"
    b"\x01TagA\x01trk0\x01127.0.0.1:20053\x016\x0130\x010\x017F00000100004E5500000000000004AD\x01true\x02"
)
MSG = "C000020234470C387F4414A474BD0000"


def test_a_java4_producers_pub_record() -> None:
    d = decode(JAVA4_PRODUCER)
    assert d.skipped == []
    (r,) = d.records
    assert r == TraceRecord(TraceType.PUB, MSG, 1796429522110, "DefaultRegion", "JTrP_2faa6b1331", "JT_da519cf61a",
                            "TagA", "trk0", "127.0.0.1:20053", 6, 29, 0,
                            offset_msg_id="7F00000100004E550000000000000000", success=True)  # fmt: skip
    assert r.msg_type_name == "Normal_Msg"
    assert encode(r).encode() == JAVA4_PRODUCER  # what sievemq's client writes is byte for byte the same


def test_a_java4_consumers_sub_records() -> None:
    before, after = decode(JAVA4_CONSUMER).records
    assert (before.type, before.timestamp, before.group, before.request_id, before.msg_id, before.retry_times,
            before.keys) == (TraceType.SUB_BEFORE, 1796429522561, "JTrC_8b73800ead",
                             "C000020234780C387F4414A476810000", MSG, 0, "trk0")  # fmt: skip
    assert (after.type, after.request_id, after.msg_id, after.cost_ms, after.success, after.keys,
            after.context_code, after.timestamp, after.group) == (TraceType.SUB_AFTER, before.request_id, MSG, 3,
                                                                  True, "trk0", 0, 1796429522564,
                                                                  "JTrC_8b73800ead")  # fmt: skip
    assert after.consume_return == "SUCCESS"
    assert (encode(before) + encode(after)).encode() == JAVA4_CONSUMER


def test_java5_writes_the_same_layout() -> None:
    (r,) = decode(JAVA5_PRODUCER).records
    assert (r.msg_id, r.offset_msg_id, r.cost_ms) == ("C000020234DC0C387F4414A488B10000",
                                                      "7F00000100004E5500000000000004AD", 30)  # fmt: skip
    assert encode(r).encode() == JAVA5_PRODUCER


C, F = "\x01", "\x02"


def test_old_and_cloud_layouts() -> None:
    # a Pub of 13 fields (before offsetMsgId), one of 15 (a client host last), a SubAfter without timestamp and
    # group (Alibaba Cloud's access channel) and one without contextCode; Java's "null" for a missing text
    old = C.join(["Pub", "1", "r", "g", "T", "ID1", "null", "null", "h:1", "3", "4", "0", "false"]) + F
    new = C.join(["Pub", "1", "r", "g", "T", "ID2", "a", "k", "h:1", "3", "4", "3", "OFF", "true", "10.0.0.9"]) + F
    cloud = C.join(["SubAfter", "req", "ID1", "7", "false", "k", "4"]) + F
    oldest = C.join(["SubAfter", "req", "ID1", "7", "true", "k"]) + F
    a, b, c, d = decode(old + new + cloud + oldest).records
    assert (a.success, a.offset_msg_id, a.tags, a.keys) == (False, "", "", "")
    assert (b.offset_msg_id, b.success, b.client_host, b.msg_type_name) == ("OFF", True, "10.0.0.9", "Delay_Msg")
    assert (c.success, c.context_code, c.consume_return, c.group, c.timestamp) == (False, 4, "FAILED", "", 0)
    assert (d.context_code, d.consume_return) == (None, None)


def test_end_transaction_and_recall() -> None:
    end = C.join(["EndTransaction", "5", "r", "txg", "T", "ID", "t", "k", "h:1", "2", "TXID", "COMMIT_MESSAGE",
                  "true"]) + F  # fmt: skip
    recall = C.join(["Recall", "6", "r", "g", "T", "ID", "true"]) + F
    e, r = decode(end + recall).records
    assert (e.type, e.group, e.transaction_id, e.transaction_state, e.from_transaction_check, e.msg_type_name) == (
        TraceType.END_TRANSACTION, "txg", "TXID", "COMMIT_MESSAGE", True, "Trans_msg_Commit")  # fmt: skip
    assert encode(e) == end
    assert (r.type, r.timestamp, r.success) == (TraceType.RECALL, 6, True)
    assert encode(r) == recall


@pytest.mark.parametrize(
    "junk",
    ["Nope\x01a\x01b", "Pub\x01x\x01r\x01g\x01T\x01ID\x01t\x01k\x01h\x013\x014\x010\x01true", "SubBefore\x011",
     "\xff\xfe"],
)  # fmt: skip
def test_what_is_not_a_record_is_skipped(junk: str) -> None:
    good = encode(TraceRecord(TraceType.RECALL, "ID", 1, "r", "g", "T"))
    d = decode((junk + F + good).encode("utf-8", "surrogatepass") if junk != "\xff\xfe" else b"\xff\xfe" + F.encode()
               + good.encode())  # fmt: skip
    assert [r.msg_id for r in d.records] == ["ID"]
    assert len(d.skipped) == 1


def test_the_keys_of_a_trace_message() -> None:
    recs = [TraceRecord(TraceType.PUB, "A", keys="k1 k2"), TraceRecord(TraceType.SUB_BEFORE, "B", keys=""),
            TraceRecord(TraceType.SUB_AFTER, "A", keys="k2")]  # fmt: skip
    assert keys_of(recs) == ["A", "k1", "k2", "B"]


def test_empty_bodies() -> None:
    assert decode(b"").records == [] and decode(F + F).skipped == []


# rocketmq-client 4.9.8's TransactionMQProducer (enableMsgTrace): the half message's Pub and its EndTransaction, in
# one trace message (no tags: Java writes "null")
JAVA4_TRANSACTION = (
    b"Pub\x011796429880976\x01DefaultRegion\x01JTrTx_8da512b2b8\x01JT_bca61fc4b0\x01C00002025A000C387F4414A9EE8F0000"
    b"\x01null\x01tx0\x01127.0.0.1:20101\x016\x0127\x011\x017F00000100004E850000000000000000\x01true\x02"
    b"EndTransaction\x011796429881005\x01DefaultRegion\x01JTrTx_8da512b2b8\x01JT_bca61fc4b0\x01"
    b"C00002025A000C387F4414A9EE8F0000\x01null\x01tx0\x01127.0.0.1:20101\x012\x01C00002025A000C387F4414A9EE8F0000"
    b"\x01COMMIT_MESSAGE\x01false\x02"
)


def test_a_java4_transaction() -> None:
    half, end = decode(JAVA4_TRANSACTION).records
    assert (half.type, half.tags, half.keys, half.msg_type_name) == (TraceType.PUB, "", "tx0", "Trans_Msg_Half")
    assert (end.type, end.msg_id, end.transaction_id, end.transaction_state, end.from_transaction_check,
            end.msg_type_name, end.store_host) == (TraceType.END_TRANSACTION, half.msg_id, half.msg_id,
                                                   "COMMIT_MESSAGE", False, "Trans_msg_Commit",
                                                   "127.0.0.1:20101")  # fmt: skip
    assert (encode(half) + encode(end)).encode() == JAVA4_TRANSACTION
