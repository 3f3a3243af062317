"""Real RocketMQ clients on a TLS-permissive port: the C++ core (rocketmq-client-python 0.5.0rc2) and ali-ons speak
plain TCP to ``sievemq dev --tls --tls-mode permissive`` while sievemq's own client uses TLS on the same ports."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import Message, Producer
from sievemq.cli.devcert import DEV_CERT
from tests.interop.clients import run_driver, unique_name
from tests.interop.test_against_sievemq import consume_args, create_topic, ns, produce, received_keys
from tests.support.consume import consume
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    p = dev_proc(tmp_path_factory.mktemp("interop-tls"), "--tls", "--tls-mode", "permissive")
    p.start()
    p.extra["ca"] = str(Path(p.args[p.args.index("--data") + 1]) / "tls" / DEV_CERT)
    try:
        yield p
    finally:
        code = p.stop()
        assert code == 0, p.log()


def tls(p: Proc) -> dict[str, object]:
    return {"tls": True, "tls_ca_file": str(p.extra["ca"])}


async def tls_consume(p: Proc, topic: str, count: int) -> set[str]:
    """Keys of ``count`` messages of ``topic``, read by sievemq's client over TLS."""
    msgs = await consume(ns(p), topic, unique_name("TlsG"), count, 60.0, **tls(p))
    return {k for m in msgs for k in m.keys}


def test_cpp_core_over_plain_tcp_beside_a_tls_consumer(dev: Proc) -> None:
    topic, group = unique_name("T"), unique_name("G")
    produce("rmqcp", dev, topic, 8, "TagA,TagB", "c")
    want = {f"c{i}" for i in range(8)}
    res = run_driver("rmqcp", consume_args(dev, topic, group, "*", 8), timeout=150)
    assert res.returncode == 0, res.describe()
    assert set(received_keys(res.of("received"))) == want, res.describe()
    assert asyncio.run(tls_consume(dev, topic, 8)) == want


def test_ali_ons_over_plain_tcp_reads_what_a_tls_producer_sent(dev: Proc) -> None:
    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic)
    produce("ons", dev, topic, 6, "TagA", "o")

    async def send_over_tls() -> None:
        async with Producer(ns(dev), unique_name("TlsP"), **tls(dev)) as p:
            for i in range(3):
                await p.send(Message(topic, f"tls-{i}".encode(), tags="TagA", keys=[f"t{i}"]))

    asyncio.run(send_over_tls())
    want = {f"o{i}" for i in range(6)} | {f"t{i}" for i in range(3)}
    res = run_driver("ons", consume_args(dev, topic, group, "TagA", len(want), kind="ons"), timeout=150)
    assert res.returncode == 0, res.describe()
    assert set(received_keys(res.of("received"))) == want, res.describe()
    assert "closing connection" not in dev.log(), dev.log()
