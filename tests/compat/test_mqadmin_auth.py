"""ACL 2.0 with RocketMQ 5.5.0's own ``mqadmin``: users and ACLs created, read, changed and deleted on a sievemq
broker that authenticates and authorizes every request (docs/acl2.md), then sievemq's client allowed and refused
as the policies just written say, and everything still there after the broker was killed (``kill -9``).

mqadmin signs its requests with ``conf/tools.yml`` of its RocketMQ home (the super user of
``initAuthenticationUser``), as RocketMQ's tools do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq.acl.signature import RequestSigner
from sievemq.client import api
from sievemq.client.message import Message
from sievemq.client.producer import Producer
from sievemq.errors import RemotingError
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import connect
from tests.compat.mqadmin import MqAdmin, Run
from tests.integration.helpers import eventually
from tests.support.procs import Proc, broker_proc, namesrv_proc
from tests.support.wire import wait_routed

ROOT = ("rootadmin", "root-password")
ALICE = ("alice", "alice-password")
BOB = ("bob", "bob-password")
TOPIC, DENIED, GROUP = "authT", "authDenied", "authG"


def auth_flags() -> list[str]:
    init = json.dumps({"username": ROOT[0], "password": ROOT[1]})
    return ["--authentication-enabled", "true", "--authorization-enabled", "true", "--init-authentication-user", init,
            "--broker-cluster-name", "DefaultCluster"]  # fmt: skip


class Site:
    """The name server, the broker (restartable) and the mqadmin JVM of the module."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ns = namesrv_proc(tmp, "ns-auth")
        self.broker_port = 0
        self.broker: Proc | None = None
        self.admin = MqAdmin(tmp / "mqadmin")

    def start_broker(self) -> Proc:
        self.broker = broker_proc(self.tmp, self.ns.addr, "sv-auth", *auth_flags(),
                                  port=self.broker_port or None)  # fmt: skip
        self.broker.start()
        self.broker_port = self.broker.port
        return self.broker

    @property
    def addr(self) -> str:
        assert self.broker is not None
        return self.broker.addr

    def sign_as(self, account: tuple[str, str]) -> None:
        """mqadmin's next commands sign as ``account`` (RocketMQ's tools read conf/tools.yml at each command)."""
        conf = self.admin.home / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "tools.yml").write_text(f"accessKey: {account[0]}\nsecretKey: {account[1]}\n")

    def run(self, *args: str) -> Run:
        return self.admin.run(*args, "-b", self.addr, timeout=30)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    s = Site(tmp_path_factory.mktemp("compat-auth"))
    try:
        s.ns.start()
        s.start_broker()
        s.sign_as(ROOT)
        s.admin.start()
        yield s
    finally:
        s.admin.close()
        if s.broker is not None:
            s.broker.stop()
        s.ns.stop()


def ok(run: Run, text: str = "success") -> str:
    assert run.exit == 0 and text in run.out, f"out: {run.out}\nerr: {run.err}"
    return run.out


def failed(run: Run, text: str) -> None:
    assert text in run.out + run.err, f"out: {run.out}\nerr: {run.err}"
    assert "success" not in run.out


def rows(out: str) -> list[list[str]]:
    """The table rows mqadmin printed (the header row and messages left out)."""
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith(("#", "get "))]


async def send(site: Site, topic: str, account: tuple[str, str]) -> RemotingError | None:
    async with Producer(site.ns.addr, "PGauth", access_key=account[0], secret_key=account[1], retry_times=0,
                        send_timeout=5) as p:  # fmt: skip
        try:
            await p.send(Message(topic, b"hello"))
        except RemotingError as e:
            return e
    return None


async def pull(site: Site, topic: str, group: str, account: tuple[str, str]) -> int:
    host, port = site.addr.rsplit(":", 1)
    conn = await connect(host, int(port))
    try:
        conn.rpc_hook = RequestSigner(*account)
        return (await api.pull_message(conn, group, topic, 0, 0)).code
    finally:
        conn.close()


def test_users_with_mqadmin(site: Site) -> None:
    ok(site.run("createUser", "-u", ALICE[0], "-p", ALICE[1]))
    ok(site.run("createUser", "-u", BOB[0], "-p", BOB[1], "-t", "Normal"))
    failed(site.run("createUser", "-u", BOB[0], "-p", "again"), "exists already")
    failed(site.run("createUser", "-u", "bad:name", "-p", "x"), "username")
    assert rows(ok(site.run("getUser", "-u", ALICE[0]), ALICE[0])) == [[*ALICE, "Normal", "enable"]]
    names = {r[0] for r in rows(ok(site.run("listUser"), ALICE[0]))}
    assert names == {ROOT[0], ALICE[0], BOB[0]}
    ok(site.run("updateUser", "-u", BOB[0], "-s", "disable"))
    assert rows(ok(site.run("getUser", "-u", BOB[0]), BOB[0])) == [[*BOB, "Normal", "disable"]]
    assert {r[0] for r in rows(ok(site.run("listUser", "-f", "ali"), ALICE[0]))} == {ALICE[0]}
    assert site.run("getUser", "-u", "nobody") == Run("", "", 0)  # RocketMQ: no body, mqadmin prints nothing
    cluster = ("-c", "DefaultCluster", "-n", site.ns.addr)  # every broker of the cluster, found by the name server
    ok(site.admin.run("createUser", *cluster, "-u", "carol", "-p", "carol-password"))
    ok(site.admin.run("deleteUser", *cluster, "-u", "carol"))
    assert "carol" not in ok(site.admin.run("listUser", *cluster), ROOT[0])


def test_acls_with_mqadmin(site: Site) -> None:
    ok(site.run("updateTopic", "-t", TOPIC, "-r", "1", "-w", "1"))
    ok(site.run("updateTopic", "-t", DENIED, "-r", "1", "-w", "1"))
    asyncio.run(wait_routed(site.ns.addr, [TOPIC, DENIED], who="sievemq"))
    ok(site.run("createAcl", "-s", "User:alice", "-r", f"Topic:{TOPIC}", "-a", "Pub", "-d", "Allow"))
    ok(site.run("createAcl", "-s", "User:alice", "-r", "Topic:auth*", "-a", "All", "-d", "Deny"))
    ok(site.run("createAcl", "-s", "User:bob", "-r", "*", "-a", "All", "-d", "Allow"))
    failed(site.run("createAcl", "-s", "User:nobody", "-r", "Topic:x", "-a", "Pub", "-d", "Allow"), "does not exist")
    failed(site.run("createAcl", "-s", "User:alice", "-r", "Topic:x", "-a", "Pub", "-d", "Maybe"), "decision")
    ok(site.run("updateAcl", "-s", "User:alice", "-r", f"Topic:{TOPIC},Group:{GROUP}", "-a", "Pub,Sub", "-d", "Allow",
                "-i", "127.0.0.1"))  # fmt: skip
    got = rows(ok(site.run("getAcl", "-s", "User:alice"), "User:alice"))
    assert sorted(r[2] for r in got) == sorted([f"Topic:{TOPIC}", "Topic:auth*", f"Group:{GROUP}"])
    line = next(line for line in got if line[2] == f"Topic:{TOPIC}")
    assert " ".join(line[1:]) == f"Custom Topic:{TOPIC} [Pub, Sub] [127.0.0.1] Allow"
    listed = rows(ok(site.run("listAcl", "-r", "Group"), "User:alice"))
    assert {(r[0], r[2]) for r in listed} == {("User:alice", f"Group:{GROUP}")}


def test_the_client_is_allowed_and_refused_as_the_policies_say(site: Site) -> None:
    async def check() -> None:
        assert await send(site, TOPIC, ALICE) is None  # the literal Topic:authT beats the prefix Deny
        err = await send(site, DENIED, ALICE)  # Topic:auth* Deny
        assert err is not None and err.code == ResponseCode.NO_PERMISSION and err.reason == "NO_PERMISSION"
        err = await send(site, TOPIC, BOB)  # disabled
        assert err is not None and err.reason == "ACL_USER_DISABLED"
        err = await send(site, TOPIC, (ALICE[0], "wrong-password"))
        assert err is not None and err.reason == "ACL_SIGNATURE"
        assert await pull(site, TOPIC, GROUP, ALICE) in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)
        assert await pull(site, TOPIC, "otherG", ALICE) == ResponseCode.NO_PERMISSION

    asyncio.run(check())
    site.sign_as(ALICE)  # a Normal user without Cluster:DefaultCluster Get may not list users
    try:
        failed(site.run("listUser"), "ACL 2.0")
    finally:
        site.sign_as(ROOT)


def test_deleting_and_surviving_kill_9(site: Site) -> None:
    ok(site.run("deleteAcl", "-s", "User:alice", "-r", "Topic:auth*"))
    assert asyncio.run(send(site, DENIED, ALICE)) is not None  # no entry at all now: still refused
    ok(site.run("deleteUser", "-u", BOB[0]))
    assert site.broker is not None
    site.broker.kill9()
    site.start_broker()
    asyncio.run(eventually(lambda: site.run("getUser", "-u", ALICE[0]).exit == 0, what="the broker answers"))
    names = {r[0] for r in rows(ok(site.run("listUser"), ALICE[0]))}
    assert names == {ROOT[0], ALICE[0]}
    got = rows(ok(site.run("getAcl", "-s", "User:alice"), "User:alice"))
    assert sorted(r[2] for r in got) == sorted([f"Topic:{TOPIC}", f"Group:{GROUP}"])
    assert asyncio.run(send(site, TOPIC, ALICE)) is None
    ok(site.run("deleteAcl", "-s", "User:alice"))
    err = asyncio.run(send(site, TOPIC, ALICE))
    assert err is not None and err.reason == "NO_PERMISSION"


PLAIN = """
accounts:
  - accessKey: plainUser1
    secretKey: plain-secret-1
    defaultTopicPerm: DENY
    topicPerms: [migT=PUB]
  - accessKey: plainAdmin1
    secretKey: plain-admin-1
    admin: true
"""


def test_plain_acl_accounts_are_migrated_at_start(tmp_path: Path) -> None:
    (tmp_path / "plain_acl.yml").write_text(PLAIN)
    site = Site(tmp_path)
    flags = ["--migrate-auth-from-v1-enabled", "true", "--acl-file", str(tmp_path / "plain_acl.yml")]
    try:
        site.ns.start()
        site.broker = broker_proc(tmp_path, site.ns.addr, "sv-mig", *auth_flags(), *flags).start()
        site.sign_as(("plainAdmin1", "plain-admin-1"))  # a migrated admin account is a Super user
        site.admin.start()
        assert rows(ok(site.run("getUser", "-u", "plainUser1"), "plainUser1")) == [
            ["plainUser1", "plain-secret-1", "Normal", "enable"]]  # fmt: skip
        got = rows(ok(site.run("getAcl", "-s", "User:plainUser1"), "plainUser1"))
        assert [(r[1], r[2], r[-1]) for r in got] == [("Custom", "Topic:migT", "Allow")]
        ok(site.run("updateTopic", "-t", "migT", "-r", "1", "-w", "1"))
        ok(site.run("updateTopic", "-t", "migOther", "-r", "1", "-w", "1"))
        asyncio.run(wait_routed(site.ns.addr, ["migT", "migOther"], who="sievemq"))
        assert asyncio.run(send(site, "migT", ("plainUser1", "plain-secret-1"))) is None
        err = asyncio.run(send(site, "migOther", ("plainUser1", "plain-secret-1")))
        assert err is not None and err.reason == "NO_PERMISSION"
    finally:
        site.admin.close()
        if site.broker is not None:
            site.broker.stop()
        site.ns.stop()
