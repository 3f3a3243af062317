"""Why a group gets a message or not (sievemq.broker.message_verdicts.judge): tags by hash and exactly, SQL92
TRUE/FALSE/NULL/errors with the missing properties, the Bloom bitmap, filter functions, unknown subscriptions."""

from __future__ import annotations

from sievemq.broker.message_verdicts import BitmapView, Stage, Word, judge
from sievemq.filter.tags import java_string_hash
from sievemq.protocol.heartbeat import Subscription


def tag(expr: str) -> Subscription:
    return Subscription("T", expr, "TAG")


def sql(expr: str) -> Subscription:
    return Subscription("T", expr, "SQL92")


def test_tags() -> None:
    v = judge(tag("TagA || TagB"), "TagA", {})
    assert (v.word, v.stage) == (Word.DELIVERED, Stage.TAG_HASH)
    v = judge(tag("TagA || TagB"), "TagC", {})
    assert (v.word, v.stage) == (Word.FILTERED, Stage.TAG_HASH)
    assert "'TagC' is not in the group's tag set {TagA || TagB}" in v.reason
    assert v.details["tagsCode"] == java_string_hash("TagC") and v.details["subscribedTags"] == ["TagA", "TagB"]
    v = judge(tag("TagA"), None, {})
    assert v.word is Word.FILTERED and "has no tag" in v.reason
    assert judge(tag("*"), None, {}).stage is Stage.SUBSCRIBE_ALL


def test_a_tag_hash_collision_is_dropped_by_the_client() -> None:
    # "Aa" and "BB" have the same Java hash code
    assert java_string_hash("Aa") == java_string_hash("BB")
    v = judge(tag("Aa"), "BB", {})
    assert (v.word, v.stage) == (Word.FILTERED, Stage.TAG_EXACT)
    assert "the client drops it" in v.reason


def test_sql_true_false_null_and_error() -> None:
    assert judge(sql("region = 'eu'"), None, {"region": "eu"}).word is Word.DELIVERED
    v = judge(sql("region = 'eu'"), None, {"region": "us"})
    assert (v.word, v.stage, v.details["result"]) == (Word.FILTERED, Stage.EVALUATION, "FALSE")
    v = judge(sql("region = 'eu' AND amount > 100"), None, {"amount": "500"})
    assert v.details["result"] == "NULL" and v.details["missingProperties"] == ["region"]
    assert "is NULL (the message has no property 'region')" in v.reason
    v = judge(sql("amount > 100"), None, {"amount": "lots"})
    assert v.details["result"] == "ERROR" and "evaluation error" in v.reason
    v = judge(sql("a = "), None, {})
    assert v.word is Word.FILTERED and "does not compile" in v.reason
    v = judge(sql("a = 1"), None, {"a": "1"}, sql_enabled=False)
    assert v.word is Word.FILTERED and "enablePropertyFilter" in v.reason


def test_the_bloom_bitmap() -> None:
    bits = [3, 9]
    negative = BitmapView(bits, bytes([0b00001000, 0]), trusted=True)  # bit 3 set, bit 9 not
    positive = BitmapView(bits, bytes([0b00001000, 0b00000010]), trusted=True)
    v = judge(sql("region = 'eu'"), None, {}, bitmap=negative)
    assert (v.word, v.stage) == (Word.FILTERED, Stage.BITMAP)
    assert "Bloom bits" in v.reason and "NULL" in v.reason and v.details["bitmap"]["hit"] is False
    v = judge(sql("region = 'eu'"), None, {"region": "eu"}, bitmap=positive)
    assert v.word is Word.DELIVERED and v.details["bitmap"]["hit"] is True
    # a Bloom false positive: the bits say maybe, the evaluation no
    v = judge(sql("region = 'eu'"), None, {"region": "us"}, bitmap=positive)
    assert (v.word, v.stage) == (Word.FILTERED, Stage.EVALUATION)
    old = BitmapView(bits, bytes(2), trusted=False, why_untrusted="stored before")
    v = judge(sql("region = 'eu'"), None, {"region": "eu"}, bitmap=old)
    assert v.word is Word.DELIVERED and v.details["bitmap"]["whyNotUsed"] == "stored before"


def test_functions_and_unknown_subscriptions() -> None:
    fn = Subscription("T", "shop.filters:big", "TAG", class_filter_mode=True)
    v = judge(fn, "x", {}, function_counts={"matched": 3, "filteredOut": 4})
    assert (v.word, v.stage) == (Word.UNKNOWN, Stage.FUNCTION) and "matched 3 and filtered out 4" in v.reason
    v = judge(None, "x", {})
    assert v.word is Word.UNKNOWN and "unknown" in v.reason
    assert judge(Subscription("T", "x", "WHAT"), None, {}).word is Word.FILTERED
    assert set(judge(tag("*"), None, {}).to_json()) == {"verdict", "stage", "reason", "details"}
