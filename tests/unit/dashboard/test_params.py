"""The dashboard API's parameter checks (dashboard/params.py): what passes, what is refused and with which reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.dashboard.errors import ApiError
from sievemq.dashboard.params import EXPRESSION_MAX, KEY_MAX, Query, check_expression
from sievemq.protocol.names import NAME_RE, group_problem, topic_problem


def refused(fn, reason: str = "INVALID_PARAMETER") -> ApiError:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as info:
        fn()
    assert info.value.status == 400 and info.value.reason == reason, info.value.to_json()
    return info.value


@given(st.text(max_size=300))
def test_topic_names_follow_the_name_rules(name: str) -> None:
    q = Query([("topic", name)])
    if name and topic_problem(name) is None:
        assert q.take_topic() == name
    else:
        err = refused(q.take_topic, "INVALID_PARAMETER" if not name else "INVALID_NAME")
        assert err.extra["parameter"] == "topic"


@given(st.text(alphabet=st.sampled_from("ab%|_-<> \n"), min_size=1, max_size=260))
def test_group_names_follow_the_name_rules(name: str) -> None:
    q = Query([("group", name)])
    if group_problem(name) is None:
        assert NAME_RE.match(name) and q.take_group() == name
    else:
        refused(q.take_group, "INVALID_NAME")


@given(st.text(max_size=25))
def test_numbers_are_whole_and_in_range(raw: str) -> None:
    q = Query([("limit", raw)])
    try:
        value = int(raw)
        plain = raw.strip() == raw and raw.lstrip("-").isdigit() and raw.isascii()
    except ValueError:
        plain = False
    if raw == "":
        assert q.take_int("limit", 7, 1, 500) == 7
    elif plain and 1 <= value <= 500:
        assert q.take_int("limit", 7, 1, 500) == value
    else:
        refused(lambda: q.take_int("limit", 7, 1, 500))


def test_missing_repeated_and_unknown_parameters() -> None:
    refused(Query([]).take_topic)
    refused(lambda: Query([("topic", "a"), ("topic", "b")]))
    q = Query([("topic", "orders"), ("tpoic", "x")])
    q.take_topic()
    err = refused(q.done)
    assert err.extra["parameter"] == "tpoic"
    Query([("topic", "orders")]).take_topic()  # done() is the caller's: a taken parameter is fine


def test_message_ids() -> None:
    assert Query([("id", "c0a80001000051af0000000000001099")]).take_msg_id() == "C0A80001000051AF0000000000001099"
    for bad in ("", "xyz", "0" * 15, "0" * 65, "7F00' OR 1=1", "0" * 31 + "g"):
        refused(Query([("id", bad)]).take_msg_id)


def test_keys_and_texts() -> None:
    assert Query([("key", "order-42")]).take_key() == "order-42"
    for bad in ("a b", "a\x00b", "a\nb", "k" * (KEY_MAX + 1), ""):
        refused(Query([("key", bad)]).take_key)
    assert Query([("expression", "a" * EXPRESSION_MAX)]).take_text("expression", EXPRESSION_MAX)
    refused(lambda: Query([("expression", "a" * (EXPRESSION_MAX + 1))]).take_text("expression", EXPRESSION_MAX))


def test_times_booleans_and_choices() -> None:
    assert Query([("begin", "1700000000000")]).take_time("begin") == 1700000000000
    assert Query([]).take_time("end", -1) == -1
    refused(lambda: Query([]).take_time("begin"))
    for bad in ("yesterday", "9" * 20, "2024-13-01", "x" * 65):
        refused(lambda bad=bad: Query([("begin", bad)]).take_time("begin"))
    assert Query([("system", "TRUE")]).take_bool("system") is True
    assert Query([]).take_bool("system") is False
    refused(lambda: Query([("system", "yes")]).take_bool("system"))
    assert Query([("type", "tag")]).take_choice("type", ("SQL92", "TAG"), "SQL92") == "TAG"
    assert Query([]).take_choice("type", ("SQL92", "TAG"), "SQL92") == "SQL92"
    refused(lambda: Query([("type", "JS")]).take_choice("type", ("SQL92", "TAG"), "SQL92"))


def test_expressions_are_parsed_before_anything_is_asked() -> None:
    check_expression("SQL92", "region = 'eu' AND amount > 100")
    check_expression("TAG", "TagA || TagB")
    err = refused(lambda: check_expression("SQL92", "a =="), "INVALID_EXPRESSION")
    assert "^" in err.message, "the message points at the problem"
    refused(lambda: check_expression("TAG", "||"), "INVALID_EXPRESSION")
