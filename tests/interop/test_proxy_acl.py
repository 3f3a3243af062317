"""5.x clients with credentials through a proxy that checks ACL (docs/proxy.md §9), in front of a broker that checks
ACL too: the real Python and Node.js 5.x clients sign their calls (MQv2-HMAC-SHA1), the proxy decides each call as a
broker decides the 4.x request it stands for, and signs its own requests to the broker with its admin account.

An account with PUB on the topic sends; an account with SUB on topic and group receives exactly those messages;
a wrong secret, no credentials, a missing PUB or a group the account may not use are refused (UNAUTHORIZED 40100 or
FORBIDDEN 40300 with the stable reason in the message), and nothing is delivered to them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.clients import DriverResult, run_driver, start_driver, unique_name
from tests.support.procs import Proc, dev_proc, proxy_proc

pytestmark = pytest.mark.interop

PRODUCER = ("producer5", "producer5-secret")
CONSUMER = ("consumer5", "consumer5-secret")
ADMIN = ("proxyAdmin", "proxy-admin-secret")
TOPIC = "AclT5"
ACL = f"""
accounts:
  - accessKey: {PRODUCER[0]}
    secretKey: {PRODUCER[1]}
    topicPerms: [{TOPIC}=PUB]
  - accessKey: {CONSUMER[0]}
    secretKey: {CONSUMER[1]}
    topicPerms: [{TOPIC}=SUB]
    groupPerms: [G5ok=SUB, G5ok_node=SUB]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    tmp = tmp_path_factory.mktemp("interop-proxy-acl")
    acl = tmp / "plain_acl.yml"
    acl.write_text(ACL)
    (tmp / "broker.toml").write_text(f'aclEnable = true\naclFile = "{acl}"\n')
    dev = dev_proc(tmp, "--config", str(tmp / "broker.toml"), "--grpc-port", "0").start()
    proxy = proxy_proc(tmp, str(dev.extra["namesrv"]), "proxy", "--acl-enable", "true", "--acl-file", str(acl),
                       "--acl-access-key", ADMIN[0])  # fmt: skip
    proxy.env["SIEVEMQ_ACL_SECRET_KEY"] = ADMIN[1]
    try:
        cmd = ["topic", "create", TOPIC, "-n", str(dev.extra["namesrv"]), "-q", "2", "--access-key", ADMIN[0],
               "--secret-key", ADMIN[1]]  # fmt: skip
        out = subprocess.run([sys.executable, "-m", "sievemq.cli", *cmd], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        proxy.start()
        yield dev, proxy
    finally:
        assert proxy.stop() == 0, proxy.log()
        assert dev.stop() == 0, dev.log()


def account(creds: tuple[str, str] | None) -> dict[str, str]:
    return {"RMQ5_ACCESS_KEY": creds[0], "RMQ5_SECRET_KEY": creds[1]} if creds else {}


def produce(kind: str, proxy: Proc, creds: tuple[str, str] | None, count: int = 2, tag: str = "T") -> DriverResult:
    return run_driver(kind, ["produce", "--endpoints", proxy.addr, "--topic", TOPIC, "--count", str(count), "--tag",
                             tag, "--key-prefix", "k"], timeout=120, env=account(creds))  # fmt: skip


def errors(res: DriverResult) -> str:
    return " ".join(str(e.get("error", "")) for e in res.of("error"))


@pytest.mark.parametrize("kind", ["rmq5", "rmq5-node"])
def test_the_right_accounts_send_and_receive(cluster: tuple[Proc, Proc], kind: str) -> None:
    _, proxy = cluster
    group = "G5ok" if kind == "rmq5" else "G5ok_node"
    # A tag of its own: a new group reads a young topic from its first message (RocketMQ's rule), the others' too.
    tag = "T" + kind.replace("-", "")
    c = start_driver(kind, ["simple-consume", "--endpoints", proxy.addr, "--topic", TOPIC, "--group", group,
                            "--tag-expr", tag, "--count", "3", "--timeout", "60"], env=account(CONSUMER))  # fmt: skip
    c.wait_for("ready", timeout=90)
    sent = produce(kind, proxy, PRODUCER, count=3, tag=tag)
    assert sent.returncode == 0, f"{sent.describe()}\n{proxy.log()[-3000:]}"
    assert c.wait(timeout=90) == 0, f"{c.describe()}\n{proxy.log()[-3000:]}"
    assert sorted(e["message_id"] for e in c.of("received")) == sorted(e["message_id"] for e in sent.of("sent"))


@pytest.mark.parametrize(
    ("creds", "word"),
    [(None, "ACL_NO_CREDENTIALS"), ((PRODUCER[0], "not-the-secret"), "ACL_SIGNATURE"), (CONSUMER, "NO_PERMISSION")],
    ids=["no-credentials", "wrong-secret", "no-pub"],
)
def test_a_send_without_the_right_is_refused_with_the_reason(
    cluster: tuple[Proc, Proc], creds: tuple[str, str] | None, word: str
) -> None:
    _, proxy = cluster
    before = len(proxy.log())
    res = produce("rmq5", proxy, creds, count=1)
    assert res.returncode != 0, res.describe()
    assert not res.of("sent"), res.describe()
    assert word in errors(res) or word in proxy.log()[before:], f"{res.describe()}\n{proxy.log()[before:]}"


def test_a_receive_of_a_group_the_account_may_not_use_gets_nothing(cluster: tuple[Proc, Proc]) -> None:
    _, proxy = cluster
    before = len(proxy.log())
    c = start_driver("rmq5", ["simple-consume", "--endpoints", proxy.addr, "--topic", TOPIC, "--group",
                              unique_name("Gx"), "--count", "1", "--timeout", "15"], env=account(CONSUMER))  # fmt: skip
    sent = produce("rmq5", proxy, PRODUCER, count=1)
    assert sent.returncode == 0, sent.describe()
    assert c.wait(timeout=60) != 0, c.describe()
    assert not c.of("received"), c.describe()
    assert "NO_PERMISSION" in proxy.log()[before:], proxy.log()[before:]
