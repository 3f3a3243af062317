"""The plain ACL (``plain_acl.yml``), compared with Apache RocketMQ 4.9.7, the last line that has it (RocketMQ 5.3
replaced it with ACL 2.0): the same accounts and permissions on both brokers, the same signed requests from each
account, the same decision (allowed or refused) for each. sievemq refuses with NO_PERMISSION (16) and a stable reason
where RocketMQ answers SYSTEM_ERROR with the exception's text, and a few codes are admin-only in sievemq on purpose
(docs/compat.md, "Access control"): the test maps each side's refusal to "refused" and checks those differences.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import orjson
import pytest

from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.reasons import REASON_FIELD
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.compat.sides import Side, sievemq_side
from tests.integration.acl_cluster import ACL, TOPICS, acl_args
from tests.support.acl_files import ADMIN, USER
from tests.support.rocketmq import rocketmq

VERSION = "4.9.7"
"""The newest RocketMQ 4.9 whose name server and broker Maven Central serves whole (4.9.8's client only)."""
ACCOUNTS: dict[str, tuple[str, str] | None] = {
    "user": USER,
    "admin": ADMIN,
    "wrong secret": (USER[0], "not-the-secret"),
    "unsigned": None,
}


@pytest.fixture(scope="module")
def acl_sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    """RocketMQ 4.9.7 and sievemq, both checking ``ACL`` (tests/integration/acl_cluster.py), with its topics."""
    tmp = tmp_path_factory.mktemp("compat-acl")
    (tmp / "plain_acl.yml").write_text(ACL)
    names = {"brokerClusterName": "DefaultCluster", "brokerName": "sv-a", "aclEnable": True}
    with ExitStack() as stack:
        ref = stack.enter_context(rocketmq(tmp, version=VERSION, broker=names, plain_acl=ACL))
        ours = stack.enter_context(sievemq_side(tmp, *acl_args(tmp / "plain_acl.yml")))
        sides = (Side("rocketmq", ref.namesrv, ref.broker), ours)

        async def topics() -> None:
            for side in sides:
                async with AdminClient(side.namesrv, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
                    for topic in TOPICS:
                        await admin.create_topic(topic, queues=1, broker=side.broker)

        asyncio.run(topics())
        yield sides


def _send(topic: str) -> RemotingCommand:
    header = SendMessageHeader(producer_group="PidAcl", topic=topic, queue_id=0, born_timestamp=1, properties="")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_fields(), body=b"x")


def _pull(topic: str, group: str) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 2,
              "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0,
              "expressionType": "TAG"}  # fmt: skip
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)


def _heartbeat(group: str, topic: str) -> RemotingCommand:
    data = HeartbeatData("10.0.0.9@acl", [], [ConsumerData(group=group, subscriptions=[Subscription(topic, "*")])])
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=orjson.dumps(data.to_json()))


def _create_topic(topic: str) -> RemotingCommand:
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


REQUESTS: dict[str, Any] = {
    "send TopicOK": lambda: _send("TopicOK"),
    "send TopicPub": lambda: _send("TopicPub"),
    "send TopicSub": lambda: _send("TopicSub"),
    "send TopicDeny": lambda: _send("TopicDeny"),
    "send TopicNew (no permission listed)": lambda: _send("TopicNew"),
    "pull TopicOK as GroupOK": lambda: _pull("TopicOK", "GroupOK"),
    "pull TopicSub as GroupOK": lambda: _pull("TopicSub", "GroupOK"),
    "pull TopicPub as GroupOK": lambda: _pull("TopicPub", "GroupOK"),
    "pull TopicOK as GroupDeny": lambda: _pull("TopicOK", "GroupDeny"),
    "heartbeat GroupOK on TopicOK": lambda: _heartbeat("GroupOK", "TopicOK"),
    "query offset TopicOK GroupOK": lambda: RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GroupOK", "topic": "TopicOK", "queueId": 0}),
    "create topic": lambda: _create_topic("TopicMade"),
    "all topic configs (21)": lambda: RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG),
    "topic names (23)": lambda: RemotingCommand.request(RequestCode.GET_TOPIC_NAME_LIST),
    "delete group GroupDeny": lambda: RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                                              {"groupName": "GroupDeny"}),
}  # fmt: skip
DELIBERATE = {
    ("user", "all topic configs (21)"): "admin only in sievemq: it hands out every tenant's topic configs",
}
"""(account, request) -> why sievemq refuses what RocketMQ 4.9 allows (docs/compat.md, "Access control")."""


def verdict(side: str, resp: RemotingCommand) -> str:
    """``refused`` when the ACL refused the request (RocketMQ 4.9: SYSTEM_ERROR with an AclException; sievemq:
    NO_PERMISSION with an ACL reason), else ``allowed``."""
    if side == "rocketmq":
        refused = resp.code == ResponseCode.SYSTEM_ERROR and "AclException" in (resp.remark or "")
    else:
        refused = resp.code == ResponseCode.NO_PERMISSION and bool(resp.ext_fields.get(REASON_FIELD))
    return "refused" if refused else "allowed"


def test_each_account_gets_the_same_decisions(acl_sides: tuple[Side, Side]) -> None:
    async def decisions(side: Side) -> dict[tuple[str, str], str]:
        out = {}
        host, port = side.broker.rsplit(":", 1)
        for account, keys in ACCOUNTS.items():
            conn = await connect(host, int(port))
            conn.rpc_hook = RequestSigner(*keys) if keys else None
            try:
                for name, make in REQUESTS.items():
                    out[(account, name)] = verdict(side.name, await conn.request(make(), 30.0))
            finally:
                conn.close()
        return out

    theirs, ours = (asyncio.run(decisions(side)) for side in acl_sides)
    assert theirs[("user", "send TopicOK")] == "allowed" and theirs[("user", "send TopicDeny")] == "refused"
    differ = {k: (theirs[k], ours[k]) for k in theirs if theirs[k] != ours[k] and k not in DELIBERATE}
    assert not differ, orjson.dumps({f"{a} / {r}": v for (a, r), v in differ.items()}, option=orjson.OPT_INDENT_2)
    for key in DELIBERATE:
        assert (theirs[key], ours[key]) == ("allowed", "refused"), key
