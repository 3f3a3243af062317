"""The ACL table (``sievemq.acl.classification``) against the roles' processor tables: every code a role serves
is classified, nothing classified is missing from the role, and the replication codes are admin-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from sievemq.acl.classification import BROKER, FILTERSRV, NAMESRV, markdown
from sievemq.acl.policy import UNCLASSIFIED, Access, Policy
from sievemq.broker.config import BrokerConfig
from sievemq.broker.controller import BrokerController
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.filtersrv.controller import FiltersrvController
from sievemq.namesrv.config import NamesrvConfig
from sievemq.namesrv.controller import NamesrvController
from sievemq.remoting.codes import RequestCode as C

UPDATE_BROKER_CONFIG = 25  # classified admin-only, answered with 3 (no processor)


def served(role: str, tmp_path: Path) -> set[int]:
    if role == "broker":
        return set(BrokerController(BrokerConfig(store_path_root_dir=str(tmp_path))).table.codes())
    if role == "name server":
        return set(NamesrvController(NamesrvConfig()).server.table.codes())
    return set(FiltersrvController(FiltersrvConfig()).table.codes())


@pytest.mark.parametrize("policy", [BROKER, NAMESRV, FILTERSRV], ids=lambda p: p.role)
def test_every_served_code_is_classified_and_nothing_else(policy: Policy, tmp_path: Path) -> None:
    codes = served(policy.role, tmp_path)
    assert codes, "the role's processor table is empty: the test would prove nothing"
    unclassified = sorted(codes - set(policy.rules))
    assert not unclassified, f"{policy.role}: classify these codes in sievemq/acl/classification.py: {unclassified}"
    extra = sorted(set(policy.rules) - codes - {UPDATE_BROKER_CONFIG})
    assert not extra, f"{policy.role}: classified but not served: {extra}"
    for code in codes:
        assert policy.rules[code].why, f"{policy.role} code {code}: say why it has its access"


def test_an_unlisted_code_is_admin_only() -> None:
    assert BROKER.rule(987654) is UNCLASSIFIED and BROKER.needs(987654, {}, b"").admin
    assert NAMESRV.checks(987654) and FILTERSRV.needs(987654, {}, b"").admin


@pytest.mark.parametrize(
    "code",
    [C.HA_CHECK, C.GET_ALL_CONSUMER_FILTER, C.MERGE_CONSUMER_OFFSET, C.GET_ALL_CONSUMER_OFFSET, C.GET_ALL_DELAY_OFFSET,
     C.GET_ALL_TOPIC_CONFIG, C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG],
)  # fmt: skip
def test_replication_and_sync_codes_are_for_the_brokers_own_account(code: int) -> None:
    assert BROKER.rule(code).access is Access.ADMIN


def test_name_server_writes_and_liveness_are_admin_reads_open() -> None:
    for code in (C.REGISTER_BROKER, C.UNREGISTER_BROKER, C.QUERY_DATA_VERSION, C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG,
                 C.DELETE_TOPIC_IN_NAMESRV):  # fmt: skip
        assert NAMESRV.rule(code).access is Access.ADMIN, code
    for code in (C.GET_ROUTEINFO_BY_TOPIC, C.GET_BROKER_CLUSTER_INFO, C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER):
        assert not NAMESRV.checks(code)


def test_admin_codes_list_the_fields_sievemqs_tools_send() -> None:
    # the admin tools' requests, as built in sievemq.admin (fields beyond these need a strict signature)
    sent = {
        C.UPDATE_AND_CREATE_TOPIC: {"topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm",
                                    "topicFilterType", "topicSysFlag", "order"},
        C.DELETE_TOPIC_IN_BROKER: {"topic"},
        C.DELETE_SUBSCRIPTIONGROUP: {"groupName", "cleanOffset"},
        C.INVOKE_BROKER_TO_RESET_OFFSET: {"topic", "group", "timestamp", "isForce"},
        C.CONSUME_MESSAGE_DIRECTLY: {"consumerGroup", "clientId", "msgId", "timeoutMillis", "brokerName"},
        C.EXPLAIN_SELECTOR: {"topic", "expression", "expressionType", "last"},
        C.VIEW_MESSAGE_BY_ID: {"offset"},
        C.HA_CHECK: {"offset", "length", "crc"},
    }  # fmt: skip
    for code, fields in sent.items():
        assert not BROKER.unknown_fields(code, dict.fromkeys(fields, "x")), code
    assert BROKER.unknown_fields(C.DELETE_TOPIC_IN_BROKER, {"topic": "a", "topicz": ""}) == ["topicz"]
    assert BROKER.unknown_fields(C.PULL_MESSAGE, {"whatever": ""}) == []  # only admin codes are held to their fields


@pytest.mark.parametrize("policy", [BROKER, NAMESRV, FILTERSRV], ids=lambda p: p.role)
def test_the_docs_show_the_table_as_it_is(policy: Policy) -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "protocol" / "acl.md").read_text()
    assert markdown(policy) in doc, "regenerate the tables of docs/protocol/acl.md §3 from classification.markdown"
