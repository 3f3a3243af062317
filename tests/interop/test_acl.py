"""Real RocketMQ clients with credentials against a sievemq broker that checks ACL (unchanged clients).

rocketmq-client-python 0.5.0rc2 (the C++ core, ``set_session_credentials(ak, sk, "ALIYUN")``: it signs with the
extField ``OnsChannel`` too) and ali-ons 3.12.0 (``accessKeyId``/``accessKeySecret``) produce and consume with the
right account; with a wrong secret, no credentials or a missing permission they are refused. The C++ core reports
no response code, so its refusals are read from the broker's log (its stable reason words); ali-ons' driver reports
the broker's response code of the refused send.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.clients import DriverResult, run_driver, start_driver, unique_name
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

AK, SK = "interopAK", "interop-secret-1"
ADMIN = ("interopAdmin", "interop-admin-secret")
ACL = f"""
accounts:
  - accessKey: {AK}
    secretKey: {SK}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclOK=PUB|SUB, AclSubOnly=SUB, AclPubOnly_rmqcp=PUB, AclPubOnly_ons=PUB]
    groupPerms: [AclDenied=DENY]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""
RIGHT = ["--access-key", AK, "--secret-key", SK]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    tmp = tmp_path_factory.mktemp("interop-acl")
    (tmp / "plain_acl.yml").write_text(ACL)
    (tmp / "broker.toml").write_text(f'aclEnable = true\naclFile = "{tmp / "plain_acl.yml"}"\n')
    p = dev_proc(tmp, "--config", str(tmp / "broker.toml")).start()
    try:
        for topic in (
            "AclOK",
            "AclSubOnly",
            "AclPubOnly_rmqcp",
            "AclPubOnly_ons",
        ):  # ali-ons does not create topics on first send
            cmd = ["topic", "create", topic, "-n", ns(p), "-q", "2", "--access-key", ADMIN[0], "--secret-key", ADMIN[1]]
            out = subprocess.run(
                [sys.executable, "-m", "sievemq.cli", *cmd], capture_output=True, text=True, timeout=60
            )
            assert out.returncode == 0, out.stdout + out.stderr
        yield p
    finally:
        assert p.stop() == 0, p.log()


def ns(p: Proc) -> str:
    return str(p.extra["namesrv"])


def cpp_creds(right: bool = True) -> list[str]:
    return ["--access-key", AK, "--secret-key", SK if right else "wrong-secret", "--channel", "ALIYUN"]


def produce(kind: str, p: Proc, topic: str, creds: list[str], count: int = 2) -> DriverResult:
    extra = ["--retry-times", "0"] if kind == "ons" else []
    return run_driver(
        kind, ["produce", "--namesrv", ns(p), "--topic", topic, "--group", unique_name("P"), "--count", str(count),
               *extra, *creds],
    )  # fmt: skip


def log_after(p: Proc, start: int) -> str:
    return p.log()[start:]


@pytest.mark.parametrize("producer", ["rmqcp", "ons"])
@pytest.mark.parametrize("consumer", ["rmqcp", "ons"])
def test_right_credentials_produce_and_consume(dev: Proc, producer: str, consumer: str) -> None:
    creds = cpp_creds() if producer == "rmqcp" else RIGHT
    sent = produce(producer, dev, "AclOK", creds, count=3)
    assert sent.ok and len(sent.of("sent")) == 3, sent.describe()
    group = unique_name("G")
    consumer_creds = cpp_creds() if consumer == "rmqcp" else RIGHT
    with start_driver(consumer, ["consume", "--namesrv", ns(dev), "--topic", "AclOK", "--group", group,
                                 "--expr", "*", "--from", "first", "--expect", "3", "--timeout", "60",
                                 *consumer_creds]) as c:  # fmt: skip
        assert c.wait(timeout=120) == 0, c.describe()
    assert len({e["body_md5"] for e in c.result().of("received")}) >= 3


@pytest.mark.parametrize(
    ("creds", "reason"),
    [(cpp_creds(right=False), "ACL_SIGNATURE"), ([], "ACL_NO_CREDENTIALS")],
    ids=["wrong-secret", "no-credentials"],
)
def test_cpp_core_refused_without_the_right_secret(dev: Proc, creds: list[str], reason: str) -> None:
    start = len(dev.log())
    sent = produce("rmqcp", dev, "AclOK", creds, count=1)
    assert not sent.of("sent") and sent.errors, sent.describe()
    log = log_after(dev, start)
    assert f"[{reason}]" in log and "SEND_MESSAGE (10)" in log, log[-3000:]
    assert SK not in log


def test_cpp_core_refused_without_pub(dev: Proc) -> None:
    start = len(dev.log())
    sent = produce("rmqcp", dev, "AclSubOnly", cpp_creds(), count=1)
    assert not sent.of("sent") and sent.errors, sent.describe()
    log = log_after(dev, start)
    assert "[NO_PERMISSION]" in log and "PUB permission on topic AclSubOnly" in log, log[-3000:]


@pytest.mark.parametrize(
    ("topic", "creds"),
    [("AclOK", ["--access-key", AK, "--secret-key", "wrong-secret"]), ("AclOK", ["--no-acl"]),
     ("AclSubOnly", RIGHT)],
    ids=["wrong-secret", "no-credentials", "no-pub"],
)  # fmt: skip
def test_ali_ons_refused_with_code_16(dev: Proc, topic: str, creds: list[str]) -> None:
    sent = produce("ons", dev, topic, creds, count=1)
    errors = sent.of("error")
    assert not sent.of("sent") and errors, sent.describe()
    assert errors[0].get("response_code") == 16, sent.describe()


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_consumer_without_sub_gets_nothing(dev: Proc, kind: str) -> None:
    topic = f"AclPubOnly_{kind}"  # one per client: the broker logs each distinct refusal once per 10 s
    sent = produce("ons", dev, topic, RIGHT, count=2)
    assert sent.ok, sent.describe()
    start = len(dev.log())
    creds = cpp_creds() if kind == "rmqcp" else RIGHT
    got = run_driver(kind, ["consume", "--namesrv", ns(dev), "--topic", topic, "--group", unique_name("G"),
                            "--expr", "*", "--from", "first", "--expect", "1", "--timeout", "8", *creds])  # fmt: skip
    assert not got.of("received"), got.describe()
    log = log_after(dev, start)
    assert "[NO_PERMISSION]" in log and f"SUB permission on topic {topic}" in log, log[-3000:]
