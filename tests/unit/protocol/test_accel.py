"""The compiled codec (``protocol/_codec.pyx``) against the pure-Python reference, byte for byte.

Every case runs both on the same generated input -- well-formed and broken -- and compares what comes back:
the bytes, the decoded messages field by field, the side effects on the message, or the error's type and text.
``scripts/test.sh`` makes sure the compiled module is built, so CI always runs these.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sievemq.protocol import accel, batch, message
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.message import MessageExt
from sievemq.store import index_file

compiled = accel.codec()
pytestmark = pytest.mark.skipif(
    compiled is None, reason="the compiled codec is not built here (no C compiler, or SIEVEMQ_PURE_PYTHON=1)"
)

REF_M: dict[str, Any] = message.REFERENCE
REF_B: dict[str, Any] = batch.REFERENCE
REF_I: dict[str, Any] = index_file.REFERENCE
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Callable[..., Any], *args: Any, **kw: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", result) or ("error", (type name, text))."""
    try:
        return "ok", fn(*args, **kw)
    except Exception as e:
        return "error", (type(e).__name__, str(e))


def as_fields(msgs: list[MessageExt]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(m) for m in msgs]


# ------------------------------------------------------------------------------------------ generators
text = st.text(alphabet=st.sampled_from(["a", "Z", "9", "\x01", "\x02", " ", "é", "☃", "_"]), max_size=12)
prop_dicts = st.dictionaries(text, text, max_size=6)
values = text.map(lambda v: v.replace("\x02", ""))  # what a record can hold: no 0x02 in values ...
names = values.map(lambda k: k.replace("\x01", ""))  # ... nor 0x01 in names
ints32 = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**33), 2**33))
ints64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**65), 2**65))
hosts = st.tuples(st.sampled_from(["127.0.0.1", "10.1.2.3", "::1", "fe80::1", "not-an-ip"]), ints32)
topics = st.one_of(st.sampled_from(["T", "TopicA", "%RETRY%g", "x" * 127, "x" * 128, "", "ü"]), text)


@st.composite
def messages(draw: st.DrawFn) -> MessageExt:
    return MessageExt(
        topic=draw(topics),
        body=draw(st.binary(max_size=64)),
        flag=draw(ints32),
        properties=draw(prop_dicts),
        queue_id=draw(ints32),
        queue_offset=draw(ints64),
        commit_log_offset=draw(ints64),
        sys_flag=draw(st.one_of(st.sampled_from([0, 0x10, 0x20, 0x30, 0x4]), ints32)),
        born_timestamp=draw(ints64),
        born_host=draw(hosts),
        store_timestamp=draw(ints64),
        store_host=draw(hosts),
        reconsume_times=draw(ints32),
        prepared_transaction_offset=draw(ints64),
    )


def good_message(i: int, props: dict[str, str], body: bytes, v6: bool = False) -> MessageExt:
    return MessageExt(
        "BenchTopic", body, i, props, i % 4, i, 1000 + i, 0x10 if v6 else 0, 1_700_000_000_000 + i,
        ("::1" if v6 else "10.0.0.7", 4000 + i), 1_700_000_000_123, ("127.0.0.1", 10911), i % 3,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ properties
@SETTINGS
@given(st.one_of(text, st.lists(text).map("\x02".join), st.none()))
def test_string_to_properties_twins(s: str) -> None:
    assert outcome(compiled.string_to_properties, s) == outcome(REF_M["string_to_properties"], s), repr(s)


@SETTINGS
@given(st.lists(st.one_of(st.binary(max_size=6), st.sampled_from([b"\x01", b"\x02", b"\xe2\x82", b"\xff", b"\xc3"]))))
def test_properties_parsed_from_bytes_as_from_the_decoded_string(pieces: list[bytes]) -> None:
    raw = b"".join(pieces)  # broken UTF-8 included: the record decoders split bytes before decoding them
    assert compiled.props_from_utf8(raw) == REF_M["string_to_properties"](raw.decode("utf-8", "replace")), raw


@SETTINGS
@given(prop_dicts)
def test_properties_to_string_twins(props: dict[str, str]) -> None:
    assert outcome(compiled.properties_to_string, props) == outcome(REF_M["properties_to_string"], props)


def test_properties_to_string_other_mappings_go_to_the_reference() -> None:
    class Name(str):
        pass

    for odd in ({"n": 5}, {Name("k"): Name("v")}, {"k": None}):
        assert outcome(compiled.properties_to_string, odd) == outcome(REF_M["properties_to_string"], odd), odd
    assert compiled.properties_to_string({Name("k"): "v"}) == "k\x01v"


# ------------------------------------------------------------------------------------------ a put's records
@SETTINGS
@given(st.lists(messages(), max_size=4), ints64, ints64, hosts, ints64, st.integers(0, 400))
def test_encode_run_twins(
    msgs: list[MessageExt], qoff: int, ts: int, host: tuple[str, int], phy: int, limit: int
) -> None:
    a, b = copy.deepcopy(msgs), copy.deepcopy(msgs)
    got = outcome(compiled.encode_run, a, qoff, ts, host, phy, limit)
    want = outcome(REF_M["encode_run"], b, qoff, ts, host, phy, limit)
    assert got == want, (got, want)
    assert as_fields(a) == as_fields(b), "side effects differ"


@SETTINGS
@given(st.lists(messages(), max_size=4), hosts)
def test_offset_msg_ids_twins(msgs: list[MessageExt], host: tuple[str, int]) -> None:
    got = outcome(compiled.offset_msg_ids, host[0], host[1], msgs)
    assert got == outcome(REF_M["offset_msg_ids"], host[0], host[1], msgs)


# ------------------------------------------------------------------------------------------ records
@SETTINGS
@given(st.one_of(messages(), messages().map(lambda m: dataclasses.replace(m, properties={"k": "\ud800"}))))
def test_encode_record_twins(msg: MessageExt) -> None:
    a, b = copy.deepcopy(msg), copy.deepcopy(msg)
    got, want = outcome(compiled.encode_record, a), outcome(REF_M["encode_record"], b)
    assert got == want, (got, want)
    assert (a.body_crc, a.store_size) == (b.body_crc, b.store_size), "side effects differ"


def test_encode_record_takes_the_fast_path_for_the_common_case() -> None:
    msg = good_message(3, {"TAGS": "TagA", "KEYS": "k1 k2"}, b"x" * 100)
    REF_M["encode_record"](copy.deepcopy(msg))  # warms the name caches the fast path uses
    assert compiled.encode_record(copy.deepcopy(msg)) == REF_M["encode_record"](copy.deepcopy(msg))
    # and the size limit of the properties is the reference's error
    big = good_message(1, {"K": "v" * 40_000}, b"")
    assert outcome(compiled.encode_record, big) == outcome(REF_M["encode_record"], copy.deepcopy(big))


def record_stream(msgs: list[MessageExt]) -> bytes:
    return b"".join(REF_M["encode_record"](m) for m in msgs)


stream_msgs = st.lists(
    st.builds(
        good_message,
        st.integers(0, 10_000),
        st.dictionaries(st.one_of(st.sampled_from(["TAGS", "KEYS", "a", "é"]), names), values, max_size=4),
        st.binary(max_size=40),
        st.booleans(),
    ),
    max_size=6,
)


@SETTINGS
@given(stream_msgs, st.booleans())
def test_decode_records_twins_on_well_formed_streams(msgs: list[MessageExt], read_body: bool) -> None:
    buf = record_stream(msgs)
    got = outcome(compiled.decode_records, buf, read_body=read_body)
    want = outcome(REF_M["decode_records"], buf, read_body=read_body)
    assert got[0] == want[0] == "ok", (got, want)
    assert as_fields(got[1]) == as_fields(want[1])
    assert len(got[1]) == len(msgs)


@SETTINGS
@given(stream_msgs, st.data())
def test_decode_records_twins_on_broken_streams(msgs: list[MessageExt], data: st.DataObject) -> None:
    tail = data.draw(st.sampled_from([b"", b"\x00" * 8, bytes.fromhex("0000001ccbd43194")]))  # nothing, zeros, a blank
    buf = bytearray(record_stream(msgs) + tail)
    for _ in range(data.draw(st.integers(1, 4))):
        if not buf:
            break
        what = data.draw(st.sampled_from(["flip", "cut", "byte"]))
        at = data.draw(st.integers(0, len(buf) - 1))
        if what == "cut":
            del buf[at:]
        elif what == "flip":
            buf[at] ^= 1 << data.draw(st.integers(0, 7))
        else:
            buf[at] = data.draw(st.integers(0, 255))
    for source in (bytes(buf), buf, memoryview(bytes(buf))):
        got = outcome(compiled.decode_records, source)
        want = outcome(REF_M["decode_records"], source)
        assert got[0] == want[0], (got, want)
        if got[0] == "ok":
            assert as_fields(got[1]) == as_fields(want[1])
        else:
            assert got[1] == want[1]


# ------------------------------------------------------------------------------------------ batch bodies
entries = st.lists(st.builds(BatchEntry, ints32.filter(lambda v: -(2**31) <= v < 2**31), st.binary(max_size=30),
                             st.dictionaries(st.sampled_from(["TAGS", "UNIQ_KEY", "x"]), values, max_size=3)),
                   max_size=5)  # fmt: skip


def entry_fields(out: list[BatchEntry]) -> list[tuple[int, bytes, dict[str, str]]]:
    return [(e.flag, e.body, e.properties) for e in out]


@SETTINGS
@given(entries, st.data())
def test_decode_batch_twins(items: list[BatchEntry], data: st.DataObject) -> None:
    body = bytearray(encode_batch(items))
    if body and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(body) - 1))
        if data.draw(st.booleans()):
            del body[at:]
        else:
            body[at] = data.draw(st.integers(0, 255))
    got, want = outcome(compiled.decode_batch, bytes(body)), outcome(REF_B["decode_batch"], bytes(body))
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        assert entry_fields(got[1]) == entry_fields(want[1])
    else:
        assert got[1] == want[1]


batch_entries = st.lists(
    st.builds(BatchEntry, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=40),
              st.dictionaries(st.sampled_from(["TAGS", "WAIT", "DELAY", "CLUSTER", "x", "é"]), values, max_size=4)),
    max_size=5,
)  # fmt: skip


@SETTINGS
@given(batch_entries, st.data())
def test_batch_messages_twins(items: list[BatchEntry], data: st.DataObject) -> None:
    body = bytearray(encode_batch(items))
    if body and data.draw(st.integers(0, 3)) == 0:  # now and then a broken body
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    args = (bytes(body), "BatchT", 3, 0x4, 1_700_000_000_000, ("10.0.0.9", 5001), ("127.0.0.1", 10911), 2,
            {"CLUSTER": "DefaultCluster", "y": "1"}, data.draw(st.sampled_from([10, 30, 1 << 20])))  # fmt: skip
    got, want = outcome(compiled.batch_messages, *args), outcome(REF_B["batch_messages"], *args)
    assert got[0] == want[0] == "ok", (got, want)
    if want[1] is None:
        assert got[1] is None
    else:
        assert got[1] is not None and as_fields(got[1]) == as_fields(want[1])


odd_entries = st.lists(
    st.one_of(
        st.builds(BatchEntry, ints32, st.binary(max_size=20), prop_dicts),  # separators and all
        st.builds(BatchEntry, st.just(1), st.just(b"b"), st.just({"k": "\ud800"})),  # not encodable
        st.builds(BatchEntry, st.just(2), st.just(b"c"), st.just({"big": "v" * 40_000})),  # too long
        st.builds(BatchEntry, st.just(3), st.just(bytearray(b"ba")), st.just({"n": "1"})),  # another body type
    ),
    max_size=4,
)


@SETTINGS
@given(st.one_of(batch_entries, odd_entries), st.booleans())
def test_encode_batch_twins(items: list[BatchEntry], as_generator: bool) -> None:
    got = outcome(compiled.encode_batch, (e for e in items) if as_generator else items)
    want = outcome(REF_B["encode_batch"], items)
    assert got == want, (got, want)


@SETTINGS
@given(
    st.integers(1, 6),
    st.integers(0, 3),
    st.lists(st.tuples(st.one_of(text, st.just("\ud800")), ints64, ints64), max_size=6),
    st.binary(min_size=24, max_size=24),
    st.integers(0, 2),
)
def test_index_put_twins(slots: int, count: int, items: list[tuple[str, int, int]], slot_bytes: bytes,
                         start: int) -> None:  # fmt: skip
    """The same entries, chain links and count (or error) from the same index bytes, odd slot values included."""
    keys, phys, tss = [k for k, _, _ in items], [p for _, p, _ in items], [t for _, _, t in items]
    n = max(0, len(items) - start)
    size = 48 + slots * 4 + (count + n + 1) * 24
    a = bytearray(size)
    a[48 : 48 + slots * 4] = (slot_bytes * 2)[: slots * 4]  # whatever the slots held before
    b = bytearray(a)
    got = outcome(compiled.index_put, a, slots, count, "T", keys, phys, tss, start, n)
    want = outcome(REF_I["index_put"], b, slots, count, "T", keys, phys, tss, start, n)
    assert got == want, (got, want)
    assert a == b, "the index bytes differ"


def test_the_modules_run_the_compiled_twins_unless_told_not_to() -> None:
    assert accel.implementation() == "compiled"
    assert message.encode_record is compiled.encode_record
    assert message.decode_records is compiled.decode_records
    assert message.encode_run is compiled.encode_run
    assert message.offset_msg_ids is compiled.offset_msg_ids
    assert batch.decode_batch is compiled.decode_batch
    assert batch.batch_messages is compiled.batch_messages
    assert batch.encode_batch is compiled.encode_batch
    assert index_file.index_put is compiled.index_put


def test_the_common_case_never_reaches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Well-formed IPv4 records and batches are handled by the compiled code alone (no fallback hidden)."""
    msgs = [good_message(i, {"TAGS": "TagA", "KEYS": f"k{i}", "UNIQ_KEY": f"u{i}"}, b"body" * i) for i in range(5)]
    buf = record_stream(msgs)  # also warms the name caches
    body = encode_batch([BatchEntry(i, b"b" * i, {"TAGS": "T"}) for i in range(5)])
    want_records, want_batch = REF_M["decode_records"](buf), REF_B["decode_batch"](body)

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the compiled code fell back to the reference")

    fake_m = type("M", (), {name: getattr(message, name) for name in dir(message)})
    fake_m.REFERENCE = dict.fromkeys(REF_M, refuse)  # type: ignore[attr-defined]
    fake_m.decode_record = staticmethod(refuse)  # type: ignore[attr-defined]
    fake_b = type("B", (), {"BatchEntry": BatchEntry, "REFERENCE": dict.fromkeys(REF_B, refuse)})
    compiled.init_message(fake_m)
    compiled.init_batch(fake_b)
    try:
        assert [compiled.encode_record(copy.deepcopy(m)) for m in msgs] == [
            REF_M["encode_record"](copy.deepcopy(m)) for m in msgs
        ]
        assert as_fields(compiled.decode_records(buf)) == as_fields(want_records)
        a, b = copy.deepcopy(msgs), copy.deepcopy(msgs)
        run = compiled.encode_run(a, 5, 1_700_000_000_999, ("127.0.0.1", 10911), 4096, 1 << 20)
        assert run == REF_M["encode_run"](b, 5, 1_700_000_000_999, ("127.0.0.1", 10911), 4096, 1 << 20)
        assert as_fields(a) == as_fields(b)
        assert compiled.offset_msg_ids("127.0.0.1", 10911, a) == REF_M["offset_msg_ids"]("127.0.0.1", 10911, a)
        assert entry_fields(compiled.decode_batch(body)) == entry_fields(want_batch)
        args = (body, "T", 1, 0, 5, ("10.0.0.9", 5001), ("127.0.0.1", 10911), 0, {"CLUSTER": "c"}, 1 << 20)
        assert as_fields(compiled.batch_messages(*args)) == as_fields(REF_B["batch_messages"](*args))
        entries = REF_B["decode_batch"](body)
        assert compiled.encode_batch(entries) == body
    finally:
        compiled.init_message(message)
        compiled.init_batch(batch)
