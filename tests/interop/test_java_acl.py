"""rocketmq-client 4.9.8 (``java4``) and 5.5.0 (``java5``) with AclClientRPCHook (access key and secret) against a
sievemq broker that checks ACL (docs/protocol/acl.md): the right account produces, consumes and commits
transactions; a wrong secret, no credentials or a missing PUB permission are refused with NO_PERMISSION (16),
which the Java client reports; a consumer without SUB gets nothing. See test_java_clients.py for the helpers."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.clients import unique_name
from tests.interop.test_java_clients import KINDS, SEND, java, keys, ns, other
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

AK, SK = "javaAK01", "java-secret-01"
ADMIN = ("javaAdmin", "java-admin-secret")
ACL = f"""
accounts:
  - accessKey: {AK}
    secretKey: {SK}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [JAclOK=PUB|SUB, JAclSubOnly=SUB, JAclPubOnly_java4=PUB, JAclPubOnly_java5=PUB]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""
RIGHT = ["--access-key", AK, "--secret-key", SK]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    tmp = tmp_path_factory.mktemp("interop-java-acl")
    (tmp / "plain_acl.yml").write_text(ACL)
    (tmp / "broker.toml").write_text(f'aclEnable = true\naclFile = "{tmp / "plain_acl.yml"}"\n')
    p = dev_proc(tmp, "--config", str(tmp / "broker.toml")).start()
    try:
        for topic in ("JAclOK", "JAclSubOnly", "JAclPubOnly_java4", "JAclPubOnly_java5"):
            cmd = ["topic", "create", topic, "-n", ns(p), "-q", "2", "--access-key", ADMIN[0], "--secret-key", ADMIN[1]]
            out = subprocess.run([sys.executable, "-m", "sievemq.cli", *cmd], capture_output=True, text=True,
                                 timeout=60)  # fmt: skip
            assert out.returncode == 0, out.stdout + out.stderr
        yield p
    finally:
        assert p.stop() == 0, p.log()


@pytest.mark.parametrize("kind", KINDS)
def test_the_right_account_produces_and_consumes(dev: Proc, kind: str) -> None:
    """Every send mode signed, then a push consumer of the other version, signed too."""
    prefix = unique_name("k")
    sent = java(kind, "produce", dev, "JAclOK", unique_name("JP"), "--mode", "sync,async,oneway,batch", "--count", "2",
                "--key-prefix", prefix, *RIGHT, *SEND)  # fmt: skip
    assert sent.ok and len(sent.of("sent")) == 8, sent.describe()
    mine = {e["msg_id"] for e in sent.of("sent")}
    got = java(other(kind), "consume", dev, "JAclOK", unique_name("JC"), "--from", "first", "--expect", "8",
               "--linger", "1", "--timeout", "90", *RIGHT)  # fmt: skip
    assert got.ok, got.describe()
    assert mine <= {e["msg_id"] for e in got.of("received")}, got.describe()


@pytest.mark.parametrize("kind", KINDS)
def test_transactions_with_an_account(dev: Proc, kind: str) -> None:
    """A transactional producer signs its half messages and its END_TRANSACTION; the broker's check-back reaches it
    and its answer is accepted."""
    res = java(kind, "transaction", dev, "JAclOK", unique_name("JTxP"), "--count", "2", "--plan", "commit,unknown",
               "--key-prefix", unique_name("tx"), "--linger", "1", "--timeout", "90", *RIGHT, *SEND)  # fmt: skip
    assert res.ok, res.describe()
    assert [e["local_state"] for e in res.of("sent")] == ["COMMIT_MESSAGE", "UNKNOW"], res.describe()
    assert len(res.of("checked")) == 1, res.describe()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("topic", "creds"),
    [("JAclOK", ["--access-key", AK, "--secret-key", "wrong-secret"]), ("JAclOK", []), ("JAclSubOnly", RIGHT)],
    ids=["wrong-secret", "no-credentials", "no-pub"],
)  # fmt: skip
def test_refused_sends_report_no_permission(dev: Proc, kind: str, topic: str, creds: list[str]) -> None:
    sent = java(kind, "produce", dev, topic, unique_name("JP"), "--count", "1", *creds, *SEND)
    errors = sent.of("error")
    assert sent.returncode == 1 and not sent.of("sent") and errors, sent.describe()
    assert errors[0].get("response_code") == 16, sent.describe()


@pytest.mark.parametrize("kind", KINDS)
def test_a_consumer_without_sub_gets_nothing(dev: Proc, kind: str) -> None:
    topic = f"JAclPubOnly_{kind}"  # one per client: the broker logs each distinct refusal once per 10 s
    sent = java(other(kind), "produce", dev, topic, unique_name("JP"), "--count", "2", *RIGHT, *SEND)
    assert sent.ok, sent.describe()
    start = len(dev.log())
    got = java(kind, "consume", dev, topic, unique_name("JC"), "--from", "first", "--expect", "1",
               "--timeout", "8", *RIGHT)  # fmt: skip
    assert got.returncode == 3 and keys(got) == Counter(), got.describe()
    log = dev.log()[start:]
    assert "[NO_PERMISSION]" in log and f"SUB permission on topic {topic}" in log, log[-3000:]
