"""Tag hash and TAG subscription parsing (docs/protocol/consume-queue.md §4-§6)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.filter.tags import TagExpression, java_string_hash, java_trim, tag_code, to_int32


@pytest.mark.parametrize(
    ("tag", "code"),
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("tagA", 3552231),
        ("*", 42),
        ("中文", 646394),
        ("😀", 1772899),
        ("a_very_long_tag_name_for_overflow_testing", -784543840),
        ("order_paid", 756282653),
        ("polygenelubricants", -2147483648),
        ("", 0),
        ("a", 97),
        ("f5a5a608", 0),
    ],
)
def test_java_string_hash_vectors(tag: str, code: int) -> None:
    assert java_string_hash(tag) == code


@pytest.mark.parametrize(("a", "b"), [("Aa", "BB"), ("AaAa", "BBBB"), ("TagA", "UBgA"), ("Siblings", "Teheran")])
def test_known_collisions(a: str, b: str) -> None:
    assert java_string_hash(a) == java_string_hash(b)


def _reference_hash(s: str) -> int:
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = h * 31 + int.from_bytes(data[i : i + 2], "big")
    return to_int32(h)


@given(st.text())
def test_hash_matches_reference(s: str) -> None:
    h = java_string_hash(s)
    assert h == _reference_hash(s)
    assert -(2**31) <= h < 2**31


def test_tag_code() -> None:
    assert tag_code(None) == 0
    assert tag_code("") == 0
    assert tag_code("TagA") == 2598919


def test_to_int32() -> None:
    assert to_int32(2**31) == -(2**31)
    assert to_int32(-1) == -1
    assert to_int32(0xFFFFFFFF) == -1
    assert to_int32(2598919 + (1 << 32)) == 2598919
    assert to_int32(-(2**31) - 1) == 2**31 - 1


def test_java_trim() -> None:
    assert java_trim(" \t\r\n\x07\x00x\x1f ") == "x"
    assert java_trim("\u00a0x\u3000") == "\u00a0x\u3000"


@pytest.mark.parametrize("expr", [None, "", "*"])
def test_sub_all(expr: str | None) -> None:
    e = TagExpression.parse(expr)
    assert e.sub_all
    assert e.sub_string == "*"
    assert e.tags == frozenset()
    assert e.codes == frozenset()
    assert e.match_code(0)
    assert e.match_code(12345)
    assert e.match_tag(None)
    assert e.match_tag("anything")


@pytest.mark.parametrize(
    ("expr", "tags"),
    [
        ("TagA", {"TagA"}),
        ("TagA||TagB", {"TagA", "TagB"}),
        ("TagA || TagB", {"TagA", "TagB"}),
        ("TagA||", {"TagA"}),
        ("||TagA", {"TagA"}),
        ("TagA||||TagB", {"TagA", "TagB"}),
        ("TagA|||TagB", {"TagA", "|TagB"}),
        ("TagA | TagB", {"TagA | TagB"}),
        (" * ", {"*"}),
        ("* ", {"*"}),
        ("TagA || *", {"TagA", "*"}),
        ("  ", set()),
        (" || ", set()),
        ("\x07TagA\x00", {"TagA"}),
        ("\u00a0TagA", {"\u00a0TagA"}),
        ("\u3000TagA\u3000", {"\u3000TagA\u3000"}),
        ("tagA||TagA", {"tagA", "TagA"}),
        ("TagA||TagA", {"TagA"}),
    ],
)
def test_parse_cases(expr: str, tags: set[str]) -> None:
    e = TagExpression.parse(expr)
    assert not e.sub_all
    assert e.sub_string == expr
    assert e.tags == frozenset(tags)
    assert e.codes == frozenset(java_string_hash(t) for t in tags)


@pytest.mark.parametrize("expr", ["||", "||||", "||||||"])
def test_only_separators_is_error(expr: str) -> None:
    with pytest.raises(ValueError, match="subString split error"):
        TagExpression.parse(expr)


def test_star_literal_is_not_sub_all() -> None:
    e = TagExpression.parse(" * ")
    assert not e.sub_all
    assert e.codes == frozenset({42})
    assert not e.match_code(java_string_hash("TagA"))
    assert e.match_code(42)


def test_match_code() -> None:
    e = TagExpression.parse("TagA||TagB")
    assert e.match_code(2598919)
    assert e.match_code(2598920)
    assert not e.match_code(3552231)  # case-sensitive
    assert not e.match_code(0)  # untagged never matches a tag list
    # stored codes are int64; the broker compares (int) code
    assert e.match_code(2598919 + (1 << 32))
    neg = TagExpression.parse("polygenelubricants")
    assert neg.match_code(-2147483648)
    assert neg.match_code(0xFFFFFFFF80000000 - (1 << 64))  # sign-extended long


def test_empty_tag_set_matches_nothing_on_broker() -> None:
    e = TagExpression.parse(" || ")
    assert not e.sub_all
    assert not e.match_code(0)
    assert not e.match_code(2598919)
    # Java's client re-check only runs when tagsSet is non-empty
    assert e.match_tag("TagA")


def test_untagged_passes_broker_when_a_tag_hashes_to_zero() -> None:
    e = TagExpression.parse("f5a5a608")
    assert e.match_code(tag_code(None))
    assert not e.match_tag(None)


def test_match_tag_rechecks_collisions() -> None:
    e = TagExpression.parse("Aa")
    assert e.match_code(java_string_hash("BB"))
    assert e.match_tag("Aa")
    assert not e.match_tag("BB")
    assert not e.match_tag(None)
    assert not e.match_tag(" Aa")  # the message's own tag is never trimmed


def test_frozen() -> None:
    e = TagExpression.parse("TagA")
    with pytest.raises(AttributeError):
        e.sub_all = True  # type: ignore[misc]
    assert hash(e) == hash(TagExpression.parse("TagA"))


_tag = st.text(alphabet=st.characters(min_codepoint=0x21, exclude_characters="|"), min_size=1, max_size=10)


@given(st.lists(_tag, min_size=1, max_size=5))
def test_parse_join_roundtrip(tags: list[str]) -> None:
    e = TagExpression.parse("||".join(tags))
    if tags == ["*"]:
        assert e.sub_all
    else:
        assert e.tags == frozenset(tags)
        for t in tags:
            assert e.match_tag(t)
            assert e.match_code(tag_code(t))
