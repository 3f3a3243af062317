"""Transactional messages of the 5.x Python producer through ``sievemq proxy`` (docs/proxy.md §6): commit is seen
once, rollback never, and an unended transaction is settled by the broker's check-back passed to the producer over
its Telemetry stream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.interop.clients import run_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

FAST_CHECKS = {"SIEVEMQ_TRANSACTION_TIMEOUT": "500", "SIEVEMQ_TRANSACTION_CHECK_INTERVAL": "1000"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-tx"), FAST_CHECKS) as procs:
        yield procs


def _bodies(dev: Proc, topic: str) -> list[bytes]:
    async def go() -> list[bytes]:
        conn = await connect("127.0.0.1", dev.port)
        try:
            r = await api.pull_message(conn, unique_name("Rd"), topic, 0, 0, max_nums=64, subscription="*")
            return [m.body for m in r.messages]
        finally:
            conn.close()

    return asyncio.run(go())


@pytest.mark.parametrize(("end", "seen"), [("commit", [b"tx-0", b"tx-1"]), ("rollback", [])])
def test_commit_is_seen_and_rollback_is_not(cluster: tuple[Proc, Proc], end: str, seen: list[bytes]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxTx")
    create_topic(dev, topic, queues=1)
    res = run_driver("rmq5", ["tx-produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "2", "--end", end],
                     timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    assert all(e["transaction_id"] for e in res.of("sent")), res.describe()
    assert sorted(_bodies(dev, topic)) == seen


@pytest.mark.parametrize(("answer", "seen"), [("commit", [b"tx-0"]), ("rollback", [])])
def test_an_unended_transaction_is_settled_by_the_check_back(
    cluster: tuple[Proc, Proc], answer: str, seen: list[bytes]
) -> None:
    dev, proxy = cluster
    topic = unique_name("PxTc")
    create_topic(dev, topic, queues=1)
    res = run_driver("rmq5", ["tx-produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "1", "--end",
                              "none", "--check-answer", answer, "--linger", "12"], timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    assert res.of("checked"), f"the producer was never asked: {res.describe()}"
    assert _bodies(dev, topic) == seen, res.describe()
