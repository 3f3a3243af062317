"""ACL 2.0 users and policies replicated to a slave (docs/acl2.md §8): a real master and slave, both with
authentication and authorization on and the same own (inner) super user. A user and its ACL created on the master
with the admin codes reach the slave (its metadata rounds, GET_ALL_AUTH_METADATA): the slave then authenticates the
user's requests and enforces its policy, including a later change; a user or ACL write on the slave is refused
(14, BROKER_IS_SLAVE) unless the master holds it already (answered 0, as mqadmin's ``-c`` writes master then
slaves); after ``kill -9`` of the master, and a restart of the slave, the slave still enforces it, and the gRPC
proxy's fetch of the users finds them on the slave."""

from __future__ import annotations

import orjson

from sievemq import Message, Producer
from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.client.message import SendStatus
from sievemq.protocol.reasons import Reason
from sievemq.proxy.users import UserBook
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.codes import ResponseCode as R
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from tests.support.procs import Proc
from tests.support.replica_sets import ReplicaSets, rsets, until

__all__ = ["rsets"]

ROOT = ("root", "root-password")
INNER = ("brokerInner", "broker-inner-password")
ALICE = ("alice", "alice-password")
TOPIC, OTHER, GROUP = "Acl2RepT", "Acl2RepOther", "Acl2RepG"
ACL2 = (
    "--authentication-enabled", "true", "--authorization-enabled", "true",
    "--init-authentication-user", orjson.dumps({"username": ROOT[0], "password": ROOT[1]}).decode(),
    "--inner-client-authentication-credentials", orjson.dumps({"accessKey": INNER[0], "secretKey": INNER[1]}).decode(),
)  # fmt: skip


def admin(namesrv: str, creds: tuple[str, str]) -> AdminClient:
    return AdminClient(namesrv, access_key=creds[0], secret_key=creds[1])


async def ask(namesrv: str, creds: tuple[str, str], addr: str, code: int, fields: dict[str, str],
              body: bytes = b"") -> RemotingCommand:  # fmt: skip
    async with admin(namesrv, creds) as a:
        return await a.request(addr, code, fields, body)


async def max_offset(namesrv: str, creds: tuple[str, str], addr: str, topic: str) -> RemotingCommand:
    """GET_MAX_OFFSET (Get on the topic) of queue 0, signed as ``creds``."""
    return await ask(namesrv, creds, addr, C.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})


def acl_body(*entries: tuple[str, list[str]]) -> bytes:
    return orjson.dumps({"subject": f"User:{ALICE[0]}", "policies": [{"policyType": "Custom", "entries": [
        {"resource": r, "actions": a, "decision": "Allow"} for r, a in entries]}]})  # fmt: skip


async def enforced(ns: str, slave: Proc, topic_allowed: bool = True) -> bool:
    """The slave authenticates alice, lets her Get on TOPIC (or, ``topic_allowed`` False, refuses it) and refuses
    her on OTHER; a wrong password is refused."""
    ok = await max_offset(ns, ALICE, slave.addr, TOPIC)
    if (ok.code == R.SUCCESS) != topic_allowed:
        return False
    if not topic_allowed and ok.ext_fields.get("reason") != Reason.NO_PERMISSION:
        return False
    other = await max_offset(ns, ALICE, slave.addr, OTHER)
    wrong = await max_offset(ns, (ALICE[0], "not-her-password"), slave.addr, TOPIC)
    return (other.code, other.ext_fields.get("reason"), wrong.code, wrong.ext_fields.get("reason")) == (
        R.NO_PERMISSION, Reason.NO_PERMISSION, R.NO_PERMISSION, Reason.ACL_SIGNATURE)  # fmt: skip


async def read_from(ns: str, slave: Proc, want: set[str]) -> bool:
    """Alice pulls TOPIC from the slave (Sub on topic and group) and finds every key of ``want``."""
    async with admin(ns, ALICE) as a:
        conn = await a.pool.get(slave.addr)
        keys: set[str] = set()
        for q in range(2):
            r = await api.pull_message(conn, GROUP, TOPIC, q, 0, max_nums=64, timeout=5.0)
            assert r.code in (R.SUCCESS, R.PULL_NOT_FOUND, R.PULL_OFFSET_MOVED, R.PULL_RETRY_IMMEDIATELY), (
                f"[{r.code}] {r.remark}")  # fmt: skip
            keys |= {k for m in r.messages for k in m.keys}
    return want <= keys


async def test_users_and_policies_reach_the_slave_and_survive_the_master(rsets: ReplicaSets) -> None:
    ns = rsets.namesrv
    master = rsets.broker("master-a", "ASYNC_MASTER", 0, *ACL2).start()
    slave = rsets.broker("slave-a", "SLAVE", 1, *ACL2).start()
    async with admin(ns, ROOT) as a:
        for topic in (TOPIC, OTHER):
            await a.create_topic(topic, queues=2, broker=master.addr)

    # before the copy: the slave does not know alice
    r = await ask(ns, ROOT, master.addr, C.AUTH_CREATE_USER, {"username": ALICE[0]},
                  orjson.dumps({"password": ALICE[1], "userType": "Normal"}))  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    r = await ask(ns, ROOT, master.addr, C.AUTH_CREATE_ACL, {"subject": f"User:{ALICE[0]}"},
                  acl_body((f"Topic:{TOPIC}", ["Pub", "Sub", "Get"]), (f"Group:{GROUP}", ["Sub"])))  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    assert (await max_offset(ns, ALICE, master.addr, TOPIC)).code == R.SUCCESS

    await until(lambda: enforced(ns, slave), 40.0, "the slave enforcing alice's policy")

    # alice writes to the master and reads her messages from the slave
    async with Producer(ns, "Acl2RepP", access_key=ALICE[0], secret_key=ALICE[1], send_timeout=5.0) as p:
        keys = {f"k{i}" for i in range(4)}
        for k in sorted(keys):
            res = await p.send(Message(TOPIC, k.encode(), keys=[k]))
            assert res.status == SendStatus.SEND_OK, res
    await until(lambda: read_from(ns, slave, keys), 30.0, "alice reading her messages from the slave")

    # writes on the slave are refused, whoever asks
    for code, fields, body in (
        (C.AUTH_CREATE_USER, {"username": "bob"}, orjson.dumps({"password": "bob-password"})),
        (C.AUTH_UPDATE_ACL, {"subject": f"User:{ALICE[0]}"}, acl_body((f"Topic:{OTHER}", ["Get"]))),
        (C.AUTH_DELETE_USER, {"username": ALICE[0]}, b""),
    ):
        r = await ask(ns, ROOT, slave.addr, code, fields, body)
        assert (r.code, r.ext_fields.get("reason")) == (R.SERVICE_NOT_AVAILABLE, Reason.BROKER_IS_SLAVE), r.remark
        assert "slave" in (r.remark or ""), r.remark
    r = await ask(ns, ROOT, slave.addr, C.AUTH_GET_USER, {"username": "bob"})
    assert r.code == R.SUCCESS and not r.body  # nothing was written
    # ... but what the master holds already is answered 0, as mqadmin's "-c cluster" writes the master, then its
    # slaves: at once, before the slave's next metadata round
    carol = ({"username": "carol"}, orjson.dumps({"password": "carol-password", "userType": "Normal"}))
    assert (await ask(ns, ROOT, master.addr, C.AUTH_CREATE_USER, *carol)).code == R.SUCCESS
    for code, fields, body in (
        (C.AUTH_CREATE_USER, *carol),
        (C.AUTH_CREATE_ACL, {"subject": f"User:{ALICE[0]}"},
         acl_body((f"Topic:{TOPIC}", ["Pub", "Sub", "Get"]), (f"Group:{GROUP}", ["Sub"]))),
        (C.AUTH_DELETE_ACL, {"subject": f"User:{ALICE[0]}", "resource": f"Topic:{OTHER}"}, b""),
    ):  # fmt: skip
        r = await ask(ns, ROOT, slave.addr, code, fields, body)
        assert r.code == R.SUCCESS, (code, r.code, r.remark)
    r = await ask(ns, ROOT, slave.addr, C.AUTH_UPDATE_USER, {"username": "carol"},
                  orjson.dumps({"password": "another-password"}))  # fmt: skip
    refused = (R.SERVICE_NOT_AVAILABLE, Reason.BROKER_IS_SLAVE)
    assert (r.code, r.ext_fields.get("reason")) == refused, "a change the master does not hold"
    r = await ask(ns, ALICE, slave.addr, C.GET_ALL_AUTH_METADATA, {})
    assert (r.code, r.ext_fields.get("reason")) == (R.NO_PERMISSION, Reason.NO_PERMISSION), "a super user's code"

    # a change on the master replaces the slave's copy: alice loses Topic:TOPIC
    r = await ask(ns, ROOT, master.addr, C.AUTH_DELETE_ACL, {"subject": f"User:{ALICE[0]}",
                                                             "resource": f"Topic:{TOPIC}"})  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    await until(lambda: enforced(ns, slave, topic_allowed=False), 40.0, "the slave taking the master's change")
    r = await ask(ns, ROOT, master.addr, C.AUTH_UPDATE_ACL, {"subject": f"User:{ALICE[0]}"},
                  acl_body((f"Topic:{TOPIC}", ["Sub", "Get"])))  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    await until(lambda: enforced(ns, slave), 40.0, "the slave taking the master's second change")

    master.kill9()
    assert await enforced(ns, slave), "the slave stopped enforcing once the master died"
    # the gRPC proxy's fetch (docs/acl2.md §9) skips the dead master and reads the slave's copy
    book = UserBook(ConnectionPool(rpc_hook=RequestSigner(*ROOT)), [ns], "DefaultCluster", 5.0)
    await book.refresh()
    await book.pool.close()
    assert (book.source, sorted(book.users)) == (slave.addr, [ALICE[0], INNER[0], "carol", ROOT[0]])
    assert await read_from(ns, slave, keys)
    assert slave.stop() == 0, slave.log()[-3000:]
    slave.start()  # from its own auth.json: the copy is on disk
    assert await enforced(ns, slave), slave.log()[-3000:]
    assert "users and ACLs copied from" in slave.log()
