"""``sievemq message verify`` (CONSUME_MESSAGE_DIRECTLY 309, docs/admin.md §8) with real third-party consumers:
the 5.x clients are asked through the proxy's Telemetry stream (VerifyMessageCommand, docs/proxy.md §10) and the
answer each gives comes back as the command's answer; the 4.x clients get the request on their own connection.

What the real clients do with it, as this test shows: the Node.js client 1.0.8 answers NOT_IMPLEMENTED (the
command then exits with REQUEST_CODE_NOT_SUPPORTED and says so), the Python client 5.1.2 never answers (the proxy
says it did not answer in time, reason CLIENT_NO_ANSWER), and the C++ core and ali-ons ignore the request: the
broker says they did not answer in time (CLIENT_NO_ANSWER). sievemq's own PushConsumer runs its listener
(tests/integration/test_verify.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.admin.errors import GroupNotFound
from sievemq.admin.progress import group_progress
from sievemq.remoting.codes import ResponseCode
from tests.integration.test_cli import run_cli
from tests.interop.clients import DriverProcess, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import consume_args, create_topic, ns
from tests.support.procs import Proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-verify")) as procs:
        yield procs


def _one_message(dev: Proc, topic: str) -> str:
    async def go() -> str:
        async with Producer(ns(dev), unique_name("Pv")) as p:
            return (await p.send(Message(topic, b"check me", tags="TagA", keys=["v1"]))).msg_id

    return asyncio.run(go())


def _members(dev: Proc, group: str) -> list[str]:
    async def go() -> list[str]:
        async with AdminClient(ns(dev)) as admin:
            try:
                return [m.client_id for m in (await group_progress(admin, group)).members]
            except GroupNotFound:  # not registered yet
                return []

    return asyncio.run(go())


def _verify(dev: Proc, msg_id: str, group: str, timeout: str = "5") -> tuple[int, dict[str, Any]]:
    rc, out, err = asyncio.run(run_cli("message", "verify", msg_id, "--group", group, "--timeout", timeout,
                                       "--namesrv", ns(dev), "--json", timeout=40.0))  # fmt: skip
    assert out, f"no answer (exit {rc}): {err}"
    doc = orjson.loads(out)
    assert isinstance(doc, dict)
    return rc, doc


def _online(dev: Proc, group: str, c: DriverProcess) -> str:
    """The consumer's client id once its brokers list it (the proxy registered it from its Telemetry settings)."""
    for _ in range(100):
        members = _members(dev, group)
        if members:
            return members[0]
        assert c.poll() is None, c.describe()
        asyncio.run(asyncio.sleep(0.2))
    raise AssertionError(f"group {group} has no member online\n{c.describe()}")


@pytest.mark.parametrize("kind", ["rmq5-node", "rmq5"])
def test_a_5x_consumer_is_asked_through_the_proxy_and_its_answer_comes_back(
    cluster: tuple[Proc, Proc], kind: str
) -> None:
    dev, proxy = cluster
    topic, group = unique_name("Vf5"), unique_name("Vf5g")
    create_topic(dev, topic, queues=1)
    c = start_driver(kind, ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                            "--count", "1000", "--timeout", "60"])  # fmt: skip
    with c:
        c.wait_for("ready", timeout=90)
        client = _online(dev, group, c)
        msg_id = _one_message(dev, topic)
        rc, doc = _verify(dev, msg_id, group, timeout="3")
    assert rc == 1 and doc["ok"] is False and doc["clientId"] == client, doc
    err = doc["error"]
    if kind == "rmq5-node":  # it answers NOT_IMPLEMENTED over Telemetry: the round trip happened
        assert err["code"] == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, doc
        assert "NOT_IMPLEMENTED" in err["message"] and client in err["message"], doc
    else:  # the Python client reads the command and says nothing: the proxy (not the broker) times out
        assert (err["code"], err["reason"]) == (ResponseCode.SYSTEM_ERROR, "CLIENT_NO_ANSWER"), doc
        assert f"5.x client {client} did not answer the verification" in err["message"], doc
    assert "Traceback" not in proxy.log(), proxy.log()[-3000:]


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_a_4x_client_that_ignores_the_request_is_no_answer_from_the_broker(
    cluster: tuple[Proc, Proc], kind: str
) -> None:
    dev, _proxy = cluster
    topic, group = unique_name("Vf4"), unique_name("Vf4g")
    create_topic(dev, topic, queues=1)
    msg_id = _one_message(dev, topic)
    c = start_driver(kind, consume_args(dev, topic, group, "*", 10**6, linger=0, kind=kind))
    with c:
        client = _online(dev, group, c)
        rc, doc = _verify(dev, msg_id, group, timeout="2")
        assert c.poll() is None, f"the consumer survived the request:\n{c.describe()}"
    assert rc == 1 and doc["clientId"] == client, doc
    err = doc["error"]
    assert (err["code"], err["reason"]) == (ResponseCode.SYSTEM_ERROR, "CLIENT_NO_ANSWER"), doc
    assert f"consumer {client} did not answer within 2000 ms" in err["message"], doc
