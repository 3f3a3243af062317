"""The ACL 2.0 table (sievemq.auth.classification) against the broker's processor table: every code the broker
serves with ACL 2.0 on is classified, nothing else is; and what a few codes need, as RocketMQ builds it."""

from __future__ import annotations

from pathlib import Path

import orjson

from sievemq.auth.classification import AUTH_CODES, BROKER_RULES, SUPER_ONLY, Kind, markdown, rule_of
from sievemq.auth.model import Action, parse_resource
from sievemq.broker.config import BrokerConfig
from sievemq.broker.controller import BrokerController
from sievemq.remoting.codes import RequestCode as C

UPDATE_BROKER_CONFIG = 25  # classified, answered with 3 (no processor)


def test_every_served_code_is_classified_and_nothing_else(tmp_path: Path) -> None:
    config = BrokerConfig(store_path_root_dir=str(tmp_path), authentication_enabled=True, authorization_enabled=True)
    codes = set(BrokerController(config).table.codes())
    assert set(AUTH_CODES) <= codes
    unclassified = sorted(codes - set(BROKER_RULES))
    assert not unclassified, f"classify these codes in sievemq/auth/classification.py: {unclassified}"
    assert not sorted(set(BROKER_RULES) - codes - {UPDATE_BROKER_CONFIG}), "classified but not served"
    for code in codes:
        assert BROKER_RULES[code].why, code


def test_without_acl_2_the_admin_codes_are_not_served(tmp_path: Path) -> None:
    codes = set(BrokerController(BrokerConfig(store_path_root_dir=str(tmp_path))).table.codes())
    assert not set(AUTH_CODES) & codes


def test_an_unlisted_code_needs_a_super_user() -> None:
    assert rule_of(987654) is SUPER_ONLY and SUPER_ONLY.kind is Kind.SUPER
    for code in (C.HA_CHECK, C.GET_ALL_TOPIC_CONFIG, C.GET_ALL_CONSUMER_OFFSET, C.MERGE_CONSUMER_OFFSET):
        assert rule_of(code).kind is Kind.SUPER


def needs(code: int, fields: dict[str, str], body: bytes = b"") -> list[tuple[str, list[str]]]:
    rule = rule_of(code)
    assert rule.needs is not None
    return [(r.key, sorted(a.value for a in acts)) for r, acts in rule.needs(fields, body, "DefaultCluster")]


def test_what_requests_need_as_rocketmq_builds_it() -> None:
    assert needs(C.SEND_MESSAGE_V2, {"a": "P", "b": "orders"}) == [("Topic:orders", ["Pub"])]
    assert needs(C.SEND_MESSAGE, {"topic": "%RETRY%g1"}) == [("Group:g1", ["Sub"])]
    assert needs(C.PULL_MESSAGE, {"topic": "t", "consumerGroup": "g"}) == [("Group:g", ["Sub"]), ("Topic:t", ["Sub"])]
    assert needs(C.QUERY_CONSUMER_OFFSET, {"topic": "t", "consumerGroup": "g"}) == [
        ("Topic:t", ["Get", "Sub"]), ("Group:g", ["Get", "Sub"])]  # fmt: skip
    assert needs(C.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}) == [("Topic:t", ["Create"])]
    assert needs(C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "g"}) == [("Group:g", ["Delete"])]
    assert needs(C.AUTH_CREATE_USER, {"username": "x"}) == [("Cluster:DefaultCluster", ["Update"])]
    assert needs(C.AUTH_LIST_ACL, {}) == [("Cluster:DefaultCluster", ["Get"])]
    hb = {"clientID": "c", "producerDataSet": [{"groupName": "P"}], "consumerDataSet": [
        {"groupName": "g", "subscriptionDataSet": [{"topic": "t"}, {"topic": "%RETRY%g"}]}]}  # fmt: skip
    assert needs(C.HEART_BEAT, {}, orjson.dumps(hb)) == [("Group:g", ["Sub"]), ("Topic:t", ["Sub"]),
                                                        ("Group:g", ["Sub"])]  # fmt: skip
    lock = {"consumerGroup": "g", "mqSet": [{"topic": "t", "brokerName": "b", "queueId": 0}]}
    assert needs(C.LOCK_BATCH_MQ, {}, orjson.dumps(lock)) == [("Group:g", ["Sub"]), ("Topic:t", ["Sub"])]
    assert needs(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b'{"groupName": "g"}') == [("Group:g", ["Create"])]
    assert parse_resource("Topic:t").key == "Topic:t" and Action.GET.value == "Get"


def test_every_extractor_reads_an_empty_request() -> None:
    for code, rule in BROKER_RULES.items():
        if rule.needs is not None:
            assert isinstance(rule.needs({}, b"{}", "c"), list), code


def test_the_docs_show_the_table_as_it_is() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "acl2.md").read_text()
    assert markdown() in doc, "regenerate the table of docs/acl2.md §5 from sievemq.auth.classification.markdown()"
