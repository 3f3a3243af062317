"""rocketmq-client 4.9.8 (``java4``, AclClientRPCHook: RocketMQ's plain signature, no strict one) against a
sievemq broker with ACL 2.0 (docs/acl2.md): users and ACLs written with RocketMQ 5.5.0's mqadmin
(tests/compat/test_mqadmin_auth.py's ``Site``); the user produces and consumes where its policies allow, and is
refused with NO_PERMISSION (16) elsewhere or with a wrong password."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.test_mqadmin_auth import ROOT, Site, ok
from tests.interop.clients import DriverResult, run_driver, unique_name
from tests.interop.test_java_clients import SEND
from tests.support.wire import wait_routed

pytestmark = pytest.mark.interop

USER = ("javauser", "java-user-password")
OK_TOPIC, DENIED_TOPIC = "JA2ok", "JA2deny"
RIGHT = ["--access-key", USER[0], "--secret-key", USER[1]]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Site]:
    s = Site(tmp_path_factory.mktemp("interop-java-acl2"))
    try:
        s.ns.start()
        s.start_broker()
        s.sign_as(ROOT)
        s.admin.start()
        ok(s.run("createUser", "-u", USER[0], "-p", USER[1]))
        for topic in (OK_TOPIC, DENIED_TOPIC):
            ok(s.run("updateTopic", "-t", topic, "-r", "2", "-w", "2"))
        asyncio.run(wait_routed(s.ns.addr, [OK_TOPIC, DENIED_TOPIC], who="sievemq"))
        ok(s.run("createAcl", "-s", f"User:{USER[0]}", "-r", f"Topic:{OK_TOPIC}", "-a", "Pub,Sub,Get", "-d", "Allow"))
        ok(s.run("createAcl", "-s", f"User:{USER[0]}", "-r", "Group:JA2*", "-a", "Sub,Get,Update", "-d", "Allow"))
        yield s
    finally:
        s.admin.close()
        if s.broker is not None:
            s.broker.stop()
        s.ns.stop()


def java4(cmd: str, site: Site, topic: str, group: str, *args: str) -> DriverResult:
    return run_driver("java4", [cmd, "--namesrv", site.ns.addr, "--topic", topic, "--group", group, *args],
                      timeout=240)  # fmt: skip


def test_the_user_produces_and_consumes_where_allowed(site: Site) -> None:
    prefix = unique_name("k")
    sent = java4("produce", site, OK_TOPIC, unique_name("JA2P"), "--mode", "sync,oneway", "--count", "2",
                 "--key-prefix", prefix, *RIGHT, *SEND)  # fmt: skip
    assert sent.ok and len(sent.of("sent")) == 4, sent.describe()
    got = java4("consume", site, OK_TOPIC, unique_name("JA2C"), "--from", "first", "--expect", "4", "--linger", "1",
                "--timeout", "90", *RIGHT)  # fmt: skip
    assert got.ok, got.describe()
    assert {e["msg_id"] for e in sent.of("sent")} <= {e["msg_id"] for e in got.of("received")}, got.describe()


@pytest.mark.parametrize(
    ("topic", "creds"),
    [(DENIED_TOPIC, RIGHT), (OK_TOPIC, ["--access-key", USER[0], "--secret-key", "wrong-password"]), (OK_TOPIC, [])],
    ids=["no-policy", "wrong-password", "no-credentials"],
)  # fmt: skip
def test_refused_sends_report_no_permission(site: Site, topic: str, creds: list[str]) -> None:
    sent = java4("produce", site, topic, unique_name("JA2P"), "--count", "1", *creds, *SEND)
    errors = sent.of("error")
    assert sent.returncode == 1 and not sent.of("sent") and errors, sent.describe()
    assert errors[0].get("response_code") == 16, sent.describe()
