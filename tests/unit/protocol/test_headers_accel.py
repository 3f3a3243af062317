"""The compiled header twins (``protocol/_headers.pyx``) against the pure-Python references: the edge check of names
and numbers (``header_rules.check_fields``) and the send header (``send_header.parse_send_header``), on generated
headers -- common, uncommon and broken -- compared result for result and error for error. (``split_frames``, the
third twin of that module: ``tests/unit/remoting/test_frames_accel.py``.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sievemq.protocol import accel, header_rules, send_header
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY
from sievemq.protocol.send_header import V2_TO_V1

compiled: Any = accel.headers()
pytestmark = pytest.mark.skipif(
    compiled is None, reason="the compiled twins are not built here (no C compiler, or SIEVEMQ_PURE_PYTHON=1)"
)
REF_H: dict[str, Any] = header_rules.REFERENCE
REF_S: dict[str, Any] = send_header.REFERENCE
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", result) or ("error", (type name, text))."""
    try:
        return "ok", fn(*args)
    except Exception as e:
        return "error", (type(e).__name__, str(e))


def test_the_modules_run_the_compiled_twins() -> None:
    assert header_rules.check_fields is compiled.check_fields
    assert send_header.parse_send_header is compiled.parse_send_header


# ------------------------------------------------------------------------------------------ header checks
header_keys = st.sampled_from(
    ["topic", "consumerGroup", "producerGroup", "brokerName", "queueId", "sysFlag", "queueOffset", "perm",
     "suspendTimeoutMillis", "maxMsgNums", "a", "b", "e", "f", "g", "other", "properties"]
)  # fmt: skip
header_values = st.one_of(
    st.sampled_from(["", "null", "0", "-1", "7", "3.0", "1e3", "2147483647", "2147483648", "9223372036854775807",
                     "9223372036854775808", "99999999999999999999", "\u0661\u0662", " 5", "5 ", "+5", "TopicA",
                     "Topic A", "%RETRY%g", "x" * 300, "g-1"]),
    st.text(alphabet=st.sampled_from(["1", "9", "a", "-", "%", " ", "é"]), max_size=24),
)  # fmt: skip


@SETTINGS
@given(st.dictionaries(header_keys, header_values, max_size=8), st.sampled_from(["none", "v2", "custom"]))
def test_check_fields_twins(fields: dict[str, str], rename_kind: str) -> None:
    rename = {"none": None, "v2": V2_TO_V1, "custom": {"x": "topic", "e": "queueId"}}[rename_kind]
    got = outcome(compiled.check_fields, fields, rename)
    assert got == outcome(REF_H["check_fields"], fields, rename), (fields, rename)


def test_check_fields_takes_the_common_case_alone() -> None:
    fields = {"a": "pg", "b": "TopicA", "e": "3", "g": "1700000000000", "i": "TAGS\x01x", "m": "false"}
    REF_H["check_fields"](fields, V2_TO_V1)  # the names pass once: remembered
    compiled.init_header_rules(type("H", (), {"REFERENCE": {"check_fields": None}, "_PLANS": header_rules._PLANS,
                                              "V2_TO_V1": V2_TO_V1}))  # fmt: skip
    try:
        assert compiled.check_fields(fields, V2_TO_V1) is None  # a fallback would call None
    finally:
        compiled.init_header_rules(header_rules)


# ------------------------------------------------------------------------------------------ send headers
send_keys = st.sampled_from(
    ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "topic", "queueId", "batch", "x"]
)
send_values = st.one_of(
    st.sampled_from(["", "null", "0", "-1", "-", "7", "3.0", "TRUE", "true", "false", "1", "yes", " 5", "+5",
                     "9223372036854775807", "99999999999999999999", "\u0661", "T", "TAGS\x01a"]),
    st.text(alphabet=st.sampled_from(["1", "0", "-", "a", "e"]), max_size=20),
)  # fmt: skip


def header_fields(h: Any) -> Any:
    return dataclasses.asdict(h) if isinstance(h, send_header.SendMessageHeader) else h


@SETTINGS
@given(st.dictionaries(send_keys, send_values, max_size=10), st.booleans())
def test_parse_send_header_twins(fields: dict[str, str], v2: bool) -> None:
    got = outcome(compiled.parse_send_header, fields, v2)
    want = outcome(REF_S["parse_send_header"], fields, v2)
    assert (got[0], header_fields(got[1])) == (want[0], header_fields(want[1])), fields


def test_parse_send_header_takes_the_common_case_alone() -> None:
    fields = {"a": "pg", "b": "TopicA", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
              "i": "TAGS\x01x", "j": "0", "k": "false", "l": "16", "m": "false"}  # fmt: skip
    want = REF_S["parse_send_header"](fields, True)
    compiled.init_send_header(type("S", (), {"SendMessageHeader": send_header.SendMessageHeader,
                                             "REFERENCE": {"parse_send_header": None}, "V2_TO_V1": V2_TO_V1,
                                             "AUTO_CREATE_TOPIC_KEY": AUTO_CREATE_TOPIC_KEY}))  # fmt: skip
    try:
        assert compiled.parse_send_header(fields, True) == want  # a fallback would call None
    finally:
        compiled.init_send_header(send_header)
