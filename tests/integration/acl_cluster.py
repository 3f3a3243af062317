"""A name server and a broker with ``aclEnable`` on, for the ACL tests (the ``acl`` fixture of conftest.py):
an ordinary account (``USER``) with a permission of each kind, an admin account (``ADMIN``), and the topics."""

from __future__ import annotations

from pathlib import Path

from sievemq import PushConsumer
from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.client.message import ConsumeResult
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import eventually
from tests.support.acl_files import ADMIN, USER
from tests.support.procs import Proc

ACL = f"""
accounts:
  - accessKey: {USER[0]}
    secretKey: {USER[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicOK=PUB|SUB, TopicPub=PUB, TopicSub=SUB, TopicDeny=DENY]
    groupPerms: [GroupOK=SUB, GroupDeny=DENY]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""
TOPICS = ("TopicOK", "TopicPub", "TopicSub", "TopicDeny", "TopicNew")


def acl_args(path: Path) -> list[str]:
    """The flags that turn ACL on with the file at ``path``."""
    return ["--acl-enable", "true", "--acl-file", str(path)]


async def start_acl_cluster(cluster: Cluster, tmp_path: Path) -> tuple[Proc, Proc, Path]:
    """A name server and a broker checking ``ACL`` (written to tmp/plain_acl.yml), with the TOPICS created."""
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", *acl_args(path))
    async with AdminClient(ns.addr, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        await eventually(admin.brokers, what="the broker registered")
        for topic in TOPICS:
            await admin.create_topic(topic, queues=1)
        for topic in TOPICS:
            await eventually(lambda t=topic: route_or_none_via(admin, t), what=f"route of {topic}")
    return ns, broker, path


async def route_or_none_via(admin: AdminClient, topic: str) -> bool:
    """True once the name servers give a route of ``topic``."""
    try:
        await admin.route(topic)
    except RemotingError:
        return False
    return True


def collecting_consumer(
    namesrv: str, group: str, topic: str, account: tuple[str, str]
) -> tuple[PushConsumer, list[MessageExt]]:
    """A push consumer of ``group`` on ``topic`` (from the first offset) signing with ``account``, and the list its
    listener fills with what it receives (start it with ``async with``)."""
    got: list[MessageExt] = []
    consumer = PushConsumer(namesrv, group, access_key=account[0], secret_key=account[1], consume_from="first",
                            rebalance_interval=1.0)  # fmt: skip
    consumer.subscribe(topic)

    @consumer.listener
    async def on(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    return consumer, got


async def signed_conn(open_conn: OpenConn, broker: Proc, account: tuple[str, str] | None) -> Connection:
    """A connection to ``broker`` signing with ``account`` (None: unsigned)."""
    conn = await open_conn(broker)
    conn.rpc_hook = RequestSigner(*account) if account else None
    return conn
