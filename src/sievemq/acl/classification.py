"""Who may send each request code with ACL on: one table for the broker, the name server and the filter server
(docs/protocol/acl.md §3, §4).

Every code a role serves has a row: OPEN (no credentials), SIGNED (any account), RESOURCES (permissions on the
topics and groups it names), or ADMIN (an admin account; with the header fields the code knows). A code missing
here is admin-only (``policy.UNCLASSIFIED``), and ``tests/unit/acl/test_classification.py`` keeps this table equal
to the roles' processor tables, so a new code cannot be served unclassified.

Replication and metadata-sync codes (whole tables of offsets, filters and configs, commit-log checks) are for the
brokers' own account: admin-only.
"""

from __future__ import annotations

from collections.abc import Mapping

from sievemq.acl.permission import Perm
from sievemq.acl.policy import Access, Extractor, Policy, Rule
from sievemq.acl.resources import body_group, group_only, heartbeat, receipt, send, topic_and_group
from sievemq.remoting.codes import RequestCode as C

__all__ = ["BROKER", "BROKER_ADMIN_CODES", "FILTERSRV", "NAMESRV", "NAMESRV_ADMIN_CODES", "POLICIES"]

def _res(needs: Extractor, why: str, after_read: str = "") -> Rule:
    return Rule(Access.RESOURCES, needs, why=why, after_read=after_read)


def _admin(why: str, *fields: str) -> Rule:
    return Rule(Access.ADMIN, fields=frozenset(fields), why=why)


def _signed(why: str) -> Rule:
    return Rule(Access.SIGNED, why=why)


def _open(why: str) -> Rule:
    return Rule(Access.OPEN, why=why)


_SUB_TOPIC_GROUP = topic_and_group(Perm.SUB)
_ANY_TOPIC = topic_and_group(Perm.ANY, None)
_LOCKS = body_group("lock request", "consumerGroup", "mqSet")
_REPLICAS = "for the brokers' own account (replication and metadata sync)"

# fmt: off
BROKER_RULES: Mapping[int, Rule] = {
    # sends
    C.SEND_MESSAGE: _res(send("topic"), "send: PUB on the topic (a retry topic %RETRY%G: SUB on group G)"),
    C.SEND_MESSAGE_V2: _res(send("b"), "send: PUB on the topic (a retry topic %RETRY%G: SUB on group G)"),
    C.SEND_BATCH_MESSAGE: _res(send("b"), "send: PUB on the topic (a retry topic %RETRY%G: SUB on group G)"),
    C.SEND_REPLY_MESSAGE: _res(send("topic"), "reply of request-reply: PUB on the reply topic"),
    C.SEND_REPLY_MESSAGE_V2: _res(send("b"), "reply of request-reply: PUB on the reply topic"),
    C.CONSUMER_SEND_MSG_BACK: _res(group_only("group"), "a consumer's retry: SUB on the group",
                                   "SUB on the topic of the record at `offset` (a queue's record, not in a body)"),
    C.END_TRANSACTION: Rule(Access.SIGNED, why="commit or roll back a half message of the named producer group",
                            after_read="PUB on the half message's topic"),
    # consumption
    C.PULL_MESSAGE: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup"),
    C.LITE_PULL_MESSAGE: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup (a lite pull consumer's pull)"),
    C.POP_MESSAGE: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup"),
    C.ACK_MESSAGE: _res(receipt, "SUB on the receipt handle's topic and on consumerGroup"),
    C.CHANGE_MESSAGE_INVISIBLETIME: _res(receipt, "SUB on the receipt handle's topic and on consumerGroup"),
    C.QUERY_MESSAGE: _res(topic_and_group(Perm.SUB, None), "messages by key: SUB on the topic"),
    C.UPDATE_CONSUMER_OFFSET: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup"),
    C.QUERY_CONSUMER_OFFSET: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup"),
    C.SEARCH_OFFSET_BY_TIMESTAMP: _res(_ANY_TOPIC, "PUB or SUB on the topic"),
    C.GET_MAX_OFFSET: _res(_ANY_TOPIC, "PUB or SUB on the topic"),
    C.GET_MIN_OFFSET: _res(_ANY_TOPIC, "PUB or SUB on the topic"),
    C.GET_EARLIEST_MSG_STORETIME: _res(_ANY_TOPIC, "PUB or SUB on the topic"),
    C.GET_TOPIC_STATS_INFO: _res(_ANY_TOPIC, "a topic's queues: PUB or SUB on the topic"),
    C.GET_TOPIC_CONFIG: _res(_ANY_TOPIC, "a topic's config: PUB or SUB on the topic"),
    C.QUERY_TOPIC_CONSUME_BY_WHO: _res(_ANY_TOPIC, "the groups of a topic: PUB or SUB on the topic"),
    C.GET_CONSUME_STATS: _res(topic_and_group(Perm.ANY), "a group's progress: SUB on it, PUB or SUB on the topic"),
    # clients and groups
    C.HEART_BEAT: _res(heartbeat, "SUB on each consumer group of the body and each topic it subscribes"),
    C.UNREGISTER_CLIENT: _res(group_only("consumerGroup"), "SUB on consumerGroup (none when absent)"),
    C.GET_CONSUMER_LIST_BY_GROUP: _res(group_only("consumerGroup"), "SUB on consumerGroup"),
    C.GET_CONSUMER_CONNECTION_LIST: _res(group_only("consumerGroup"), "SUB on consumerGroup"),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: _res(group_only("group"), "SUB on the group"),
    C.LOCK_BATCH_MQ: _res(_LOCKS, "SUB on the body's group and each queue's topic"),
    C.UNLOCK_BATCH_MQ: _res(_LOCKS, "SUB on the body's group and each queue's topic"),
    C.CHECK_CLIENT_CONFIG: _res(body_group("CHECK_CLIENT_CONFIG", "group", "subscriptionData"),
                                "SUB on the body's group and its subscription's topic"),
    # reads of the broker itself
    C.GET_TOPIC_NAME_LIST: _signed("the broker's topic names (the name servers list them to anyone)"),
    C.GET_BROKER_RUNTIME_INFO: _signed("the broker's counters, role and disk"),
    C.GET_BROKER_EPOCH_CACHE: _signed("the broker's epoch history under automatic failover (getBrokerEpoch)"),
    C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: _signed("the names of the topics the broker keeps for itself"),
    # RocketMQ's admin codes
    C.UPDATE_AND_CREATE_TOPIC: _admin(
        "create or change a topic", "topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm",
        "topicFilterType", "topicSysFlag", "order", "attributes", "force"),
    C.UPDATE_BROKER_CONFIG: _admin("broker settings (answered with 3)"),
    C.UPDATE_AND_CREATE_TOPIC_LIST: _admin("create or change topics (their configs in the body)"),
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: _admin("create or change groups (their configs in the body)"),
    C.GET_BROKER_CONFIG: _admin("the broker's settings (paths, addresses, limits)"),
    C.GET_PRODUCER_CONNECTION_LIST: _admin("a producer group's clients and addresses", "producerGroup"),
    C.GET_ALL_PRODUCER_INFO: _admin("every producer's client and address"),
    C.GET_CONSUMER_RUNNING_INFO: _admin(
        "asks a consumer for its running state (its threads' stacks too)", "consumerGroup", "clientId",
        "jstackEnable"),
    C.GET_BROKER_CONSUME_STATS: _admin("every group's progress", "isOrder", "timeoutMillis"),
    C.QUERY_CONSUME_QUEUE: _admin(
        "a queue's entries (commit-log offsets, sizes, tag codes)", "topic", "queueId", "index", "count",
        "consumerGroup"),
    C.CLEAN_EXPIRED_CONSUMEQUEUE: _admin("deletes the queues of topics the broker no longer has"),
    C.CLEAN_UNUSED_TOPIC: _admin("deletes the queues of topics the broker no longer has"),
    C.DELETE_EXPIRED_COMMITLOG: _admin("runs retention now (deletes expired commit-log segments)"),
    C.VIEW_BROKER_STATS_DATA: _admin("a topic's or a group's traffic counts", "statsName", "statsKey"),
    C.DELETE_TOPIC_IN_BROKER: _admin("delete a topic", "topic"),
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _admin("create or change a group (its config in the body)"),
    C.DELETE_SUBSCRIPTIONGROUP: _admin("delete a group", "groupName", "cleanOffset"),
    # sievemq's additions to the admin codes
    C.REGISTER_FILTER_SERVER: _admin("a registered filter server is advertised to consumers", "filterServerAddr"),
    C.VIEW_MESSAGE_BY_ID: _admin("reads any record, whatever its topic", "offset"),
    C.INVOKE_BROKER_TO_RESET_OFFSET: _admin(
        "moves a group's offsets", "topic", "group", "timestamp", "isForce", "queueId", "offset"),
    C.CONSUME_MESSAGE_DIRECTLY: _admin(
        "hands any record to any client's listener", "consumerGroup", "clientId", "msgId", "brokerName",
        "timeoutMillis", "topic", "topicSysFlag", "groupSysFlag", "unitName"),
    C.GET_GROUP_STATUS: _admin("a group's clients, subscriptions and verdicts", "consumerGroup"),
    C.GET_GROUP_FILTERS: _admin("a group's filters and their counts", "consumerGroup"),
    C.EXPLAIN_SELECTOR: _admin("evaluates an expression over a topic's stored messages", "topic", "expression",
                               "expressionType", "last"),
    C.EXPLAIN_MESSAGE: _admin("every group's filter verdict on a stored message (its tags and properties)", "topic",
                              "queueId", "queueOffset", "consumerGroup"),
    C.GET_ALL_TOPIC_CONFIG: _admin("every topic's config: " + _REPLICAS),
    C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _admin("every group's config: " + _REPLICAS),
    C.GET_ALL_CONSUMER_OFFSET: _admin("every group's offsets: " + _REPLICAS),
    C.GET_ALL_DELAY_OFFSET: _admin("delayed-delivery progress: " + _REPLICAS),
    C.GET_ALL_CONSUMER_FILTER: _admin("every group's SQL92 filter: " + _REPLICAS),
    C.HA_CHECK: _admin("compares commit-log bytes (an oracle of their content): " + _REPLICAS,
                       "offset", "length", "crc"),
    C.MERGE_CONSUMER_OFFSET: _admin("raises any group's offsets: " + _REPLICAS),
}
"""Every request code a broker serves (and 25, which it refuses with 3)."""

NAMESRV_RULES: Mapping[int, Rule] = {
    C.GET_ROUTEINFO_BY_TOPIC: _open("routes: clients find brokers unsigned"),
    C.GET_BROKER_CLUSTER_INFO: _open("the cluster's brokers"),
    C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: _open("topic names"),
    C.GET_SYSTEM_TOPIC_LIST_FROM_NS: _open("cluster and broker names"),
    C.GET_KV_CONFIG: _open("a KV setting (ORDER_TOPIC_CONFIG)"),
    C.GET_KVLIST_BY_NAMESPACE: _open("KV settings of a namespace"),
    C.REGISTER_BROKER: _admin(
        "a broker's registration (routes follow it)", "brokerName", "brokerAddr", "clusterName", "haServerAddr",
        "brokerId", "heartbeatTimeoutMillis", "enableActingMaster", "compressed", "bodyCrc32", "topicTablePart"),
    C.UNREGISTER_BROKER: _admin("a broker leaving", "brokerName", "brokerAddr", "clusterName", "brokerId"),
    C.QUERY_DATA_VERSION: _admin(
        "a broker's liveness check (it refreshes the broker's last-seen time)", "brokerName", "brokerAddr",
        "clusterName", "brokerId"),
    C.PUT_KV_CONFIG: _admin("write a KV setting", "namespace", "key", "value"),
    C.DELETE_KV_CONFIG: _admin("delete a KV setting", "namespace", "key"),
    C.DELETE_TOPIC_IN_NAMESRV: _admin("remove a topic from routes", "topic", "clusterName"),
    C.GET_NAMESRV_CONFIG: _admin("the name server's settings (paths, addresses)"),
    C.WIPE_WRITE_PERM_OF_BROKER: _admin("stops sends to a broker (its routes lose write)", "brokerName"),
    C.ADD_WRITE_PERM_OF_BROKER: _admin("makes a broker's routes writable again", "brokerName"),
}
"""Every request code a name server serves."""

FILTERSRV_RULES: Mapping[int, Rule] = {
    C.PULL_MESSAGE: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup, as at the broker"),
    C.REGISTER_MESSAGE_FILTER_CLASS: _res(_SUB_TOPIC_GROUP, "SUB on the topic and on consumerGroup"),
    C.FILTERSRV_STATUS: _admin("the filter server's functions, workers and counts"),
}
"""Every request code a filter server serves."""
# fmt: on

BROKER = Policy("broker", BROKER_RULES)
NAMESRV = Policy("name server", NAMESRV_RULES)
FILTERSRV = Policy("filter server", FILTERSRV_RULES)
POLICIES: Mapping[str, Policy] = {p.role: p for p in (BROKER, NAMESRV, FILTERSRV)}
"""The three roles' policies by role name."""

BROKER_ADMIN_CODES = BROKER.admin_codes
NAMESRV_ADMIN_CODES = NAMESRV.admin_codes


def markdown(policy: Policy) -> str:
    """The policy as the Markdown table of docs/protocol/acl.md (kept equal to it by a test)."""
    from sievemq.remoting.codes import request_name

    access = {Access.OPEN: "open", Access.SIGNED: "any account", Access.RESOURCES: "permissions",
              Access.ADMIN: "admin"}  # fmt: skip
    rows = ["| code | who may send it | what it needs, and why |", "| --- | --- | --- |"]
    for code, rule in sorted(policy.rules.items()):
        name = request_name(code)
        why = rule.why + (f"; once read: {rule.after_read}" if rule.after_read else "")
        if rule.access is Access.ADMIN and rule.fields:
            why += "; fields: " + ", ".join(f"`{f}`" for f in sorted(rule.fields))
        rows.append(f"| {code} {name} | {access[rule.access]} | {why} |")
    return "\n".join(rows) + "\n"
