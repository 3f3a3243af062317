"""The decision table of the broker, name server and filter server policies (no sockets)."""

from __future__ import annotations

import orjson
import pytest

from sievemq.acl.classification import BROKER, BROKER_ADMIN_CODES, FILTERSRV, NAMESRV
from sievemq.acl.decision import decide
from sievemq.acl.loader import parse_text
from sievemq.acl.signature import RequestSigner
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.command import RemotingCommand

RULES = parse_text(
    """
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB, topicP=PUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - accessKey: adminAK1
    secretKey: adminSK1
    admin: true
  - accessKey: adminAK2
    secretKey: adminSK2
    admin: true
    topicPerms: [topicB=SUB]
  - accessKey: trusted1
    secretKey: trusted1-secret
    whiteRemoteAddress: 192.168.1.*
""",
    "test",
)
SECRETS = {"RocketMQ": "12345678", "adminAK1": "adminSK1", "adminAK2": "adminSK2", "trusted1": "trusted1-secret"}
PEER = "127.0.0.1"


def signed(code: int, fields: dict[str, object], body: bytes = b"", ak: str = "RocketMQ", sk: str | None = None):
    cmd = RemotingCommand.request(code, fields, body)
    RequestSigner(ak, sk if sk is not None else SECRETS[ak])(cmd)
    return cmd


def reason(cmd: RemotingCommand, peer: str = PEER, policy=BROKER) -> Reason | None:  # type: ignore[no-untyped-def]
    refusal = decide(RULES, policy, peer, cmd.code, cmd.ext_fields, cmd.body)
    if refusal is not None:
        assert "12345678" not in refusal.remark and "SK" not in refusal.remark
    return None if refusal is None else refusal.reason


def heartbeat(group: str, *topics: str) -> bytes:
    subs = [{"topic": t, "subString": "*"} for t in topics]
    return orjson.dumps({"clientID": "c", "consumerDataSet": [{"groupName": group, "subscriptionDataSet": subs}],
                         "producerDataSet": [{"groupName": "PG"}]})  # fmt: skip


OK = None
NOPE = Reason.NO_PERMISSION


@pytest.mark.parametrize(
    ("code", "fields", "body", "expected"),
    [
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "topicB"}, b"x", OK),
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "topicP"}, b"x", OK),
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "topicC"}, b"x", NOPE),  # SUB only
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"}, b"x", NOPE),  # DENY
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "other"}, b"x", NOPE),  # defaultTopicPerm DENY
        (C.SEND_MESSAGE, {"producerGroup": "PG", "topic": "topicB"}, b"x", OK),
        (C.SEND_BATCH_MESSAGE, {"a": "PG", "b": "topicC"}, b"x", NOPE),
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "%RETRY%groupB"}, b"x", OK),  # a retry topic is its group (SUB)
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "%RETRY%groupA"}, b"x", NOPE),
        (C.SEND_MESSAGE_V2, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"}, b"x", OK),  # traces: RocketMQ's exception
        (C.PULL_MESSAGE, {"consumerGroup": "groupB", "topic": "topicC"}, b"", OK),
        (C.PULL_MESSAGE, {"consumerGroup": "groupB", "topic": "topicP"}, b"", NOPE),  # PUB only
        (C.PULL_MESSAGE, {"consumerGroup": "groupA", "topic": "topicC"}, b"", NOPE),  # group DENY
        (C.PULL_MESSAGE, {"consumerGroup": "groupZ", "topic": "topicC"}, b"", OK),  # defaultGroupPerm SUB
        (C.PULL_MESSAGE, {"consumerGroup": "groupB", "topic": "%RETRY%groupB"}, b"", OK),
        (C.PULL_MESSAGE, {"consumerGroup": "groupB", "topic": "%RETRY%groupA"}, b"", NOPE),
        (C.CONSUMER_SEND_MSG_BACK, {"group": "groupA", "offset": 1}, b"", NOPE),
        (C.CONSUMER_SEND_MSG_BACK, {"group": "groupB", "offset": 1}, b"", OK),
        (C.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "groupB", "topic": "topicA"}, b"", NOPE),
        (C.QUERY_CONSUMER_OFFSET, {"consumerGroup": "groupA", "topic": "topicB"}, b"", NOPE),
        (C.QUERY_MESSAGE, {"topic": "topicA", "key": "k"}, b"", NOPE),
        (C.GET_MAX_OFFSET, {"topic": "topicP", "queueId": 0}, b"", OK),  # ANY: PUB will do
        (C.GET_MAX_OFFSET, {"topic": "topicA", "queueId": 0}, b"", NOPE),
        (C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "groupA"}, b"", NOPE),
        (C.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "PG"}, b"", OK),
        (C.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "groupA"}, b"", NOPE),
        (C.HEART_BEAT, {}, heartbeat("groupB", "topicB", "topicC"), OK),
        (C.HEART_BEAT, {}, heartbeat("groupB", "topicB", "topicA"), NOPE),
        (C.HEART_BEAT, {}, heartbeat("groupA", "topicB"), NOPE),
        (C.LOCK_BATCH_MQ, {}, orjson.dumps({"consumerGroup": "groupB", "mqSet": [{"topic": "topicA"}]}), NOPE),
        (C.UNLOCK_BATCH_MQ, {}, orjson.dumps({"consumerGroup": "groupB", "mqSet": [{"topic": "topicB"}]}), OK),
        (C.CHECK_CLIENT_CONFIG, {}, orjson.dumps({"group": "groupA", "subscriptionData": {"topic": "topicB"}}), NOPE),
        (C.GET_TOPIC_NAME_LIST, {}, b"", OK),  # no resource: any signed account
    ],
)  # fmt: skip
def test_broker_permission_table(code: int, fields: dict[str, object], body: bytes, expected: Reason | None) -> None:
    assert reason(signed(code, fields, body)) == expected


@pytest.mark.parametrize("code", sorted(BROKER_ADMIN_CODES))
def test_admin_codes_need_an_admin(code: int) -> None:
    fields = {"topic": "topicB", "consumerGroup": "groupB"}
    assert reason(signed(code, fields)) == NOPE
    assert reason(signed(code, fields, ak="adminAK1")) is OK


def test_an_admin_with_perms_listed_is_held_to_them_and_to_the_defaults() -> None:
    assert reason(signed(C.PULL_MESSAGE, {"consumerGroup": "g", "topic": "topicB"}, ak="adminAK1")) is OK
    assert reason(signed(C.SEND_MESSAGE_V2, {"b": "topicB"}, ak="adminAK2")) == NOPE
    assert reason(signed(C.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, ak="adminAK2")) is OK


def test_credentials_and_signatures() -> None:
    pull = {"consumerGroup": "groupB", "topic": "topicC"}
    assert reason(RemotingCommand.request(C.PULL_MESSAGE, pull)) == Reason.ACL_NO_CREDENTIALS
    assert reason(RemotingCommand.request(C.PULL_MESSAGE, {**pull, "AccessKey": ""})) == Reason.ACL_NO_CREDENTIALS
    assert reason(signed(C.PULL_MESSAGE, pull, ak="nobody12", sk="whatever")) == Reason.ACL_UNKNOWN_ACCOUNT
    assert reason(signed(C.PULL_MESSAGE, pull, sk="wrong-secret")) == Reason.ACL_SIGNATURE
    cmd = signed(C.PULL_MESSAGE, pull)
    cmd.ext_fields["topic"] = "topicB"  # changed after signing
    assert reason(cmd) == Reason.ACL_SIGNATURE
    cmd = signed(C.SEND_MESSAGE_V2, {"b": "topicB"}, b"body")
    assert reason(cmd) is OK
    cmd.body = b"other"
    assert reason(cmd) == Reason.ACL_SIGNATURE


def test_trusted_addresses() -> None:
    unsigned = RemotingCommand.request(C.UPDATE_AND_CREATE_TOPIC, {"topic": "x"})
    assert reason(unsigned, peer="10.10.103.7") is OK  # global white: nothing else is checked
    assert reason(unsigned, peer="10.10.104.7") == Reason.ACL_NO_CREDENTIALS
    # an account's white address: no signature, no permission check (RocketMQ's rule) ...
    claimed = RemotingCommand.request(C.UPDATE_AND_CREATE_TOPIC, {"topic": "x", "AccessKey": "trusted1"})
    assert reason(claimed, peer="192.168.1.20") is OK
    # ... but from elsewhere the account must sign, and is held to its permissions (not admin)
    assert reason(claimed, peer="192.168.2.20") == Reason.ACL_SIGNATURE
    assert reason(signed(C.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, ak="trusted1"), peer="192.168.2.20") == NOPE


def test_name_server_checks_only_its_write_codes() -> None:
    register = {"brokerName": "b", "brokerAddr": "1.2.3.4:10911", "clusterName": "c", "brokerId": 0}
    assert reason(RemotingCommand.request(C.REGISTER_BROKER, register), policy=NAMESRV) == Reason.ACL_NO_CREDENTIALS
    assert reason(signed(C.REGISTER_BROKER, register, b"{}"), policy=NAMESRV) == NOPE  # not an admin
    assert reason(signed(C.REGISTER_BROKER, register, b"{}", ak="adminAK1", sk="bad-secret"), policy=NAMESRV) == (
        Reason.ACL_SIGNATURE
    )
    assert reason(signed(C.REGISTER_BROKER, register, b"{}", ak="adminAK1"), policy=NAMESRV) is OK
    for code in (C.UNREGISTER_BROKER, C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG, C.DELETE_TOPIC_IN_NAMESRV):
        assert reason(RemotingCommand.request(code, {}), policy=NAMESRV) == Reason.ACL_NO_CREDENTIALS
    route = RemotingCommand.request(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicA"})
    assert reason(route, policy=NAMESRV) is OK  # reads stay open


def test_filter_server_policy() -> None:
    pull = {"consumerGroup": "groupB", "topic": "topicA"}
    assert reason(signed(C.PULL_MESSAGE, pull), policy=FILTERSRV) == NOPE
    assert reason(signed(C.REGISTER_MESSAGE_FILTER_CLASS, {**pull, "topic": "topicC"}), policy=FILTERSRV) is OK
    assert reason(signed(C.FILTERSRV_STATUS, {}), policy=FILTERSRV) == NOPE


def test_remark_names_account_permission_and_resource() -> None:
    cmd = signed(C.PULL_MESSAGE, {"consumerGroup": "groupA", "topic": "topicC"})
    refusal = decide(RULES, BROKER, PEER, cmd.code, cmd.ext_fields, cmd.body)
    assert refusal is not None and refusal.reason == Reason.NO_PERMISSION, refusal
    assert "'RocketMQ'" in refusal.remark and "SUB" in refusal.remark and "group groupA" in refusal.remark


def test_unreadable_heartbeat_body_is_refused_as_a_bad_request() -> None:
    from sievemq.errors import HeaderError

    with pytest.raises(HeaderError):
        reason(signed(C.HEART_BEAT, {}, b"not json"))


@pytest.mark.parametrize("code", [C.CONSUME_MESSAGE_DIRECTLY, C.INVOKE_BROKER_TO_RESET_OFFSET, C.VIEW_MESSAGE_BY_ID])
def test_requests_that_reach_any_record_or_client_are_admin_only(code: int) -> None:
    fields = {"consumerGroup": "groupB", "clientId": "c", "msgId": "x", "topic": "topicB", "group": "groupB"}
    assert reason(signed(code, fields)) == NOPE  # an account with SUB on the group is not enough
    assert reason(signed(code, fields, ak="adminAK1")) is OK
