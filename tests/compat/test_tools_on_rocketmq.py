"""sievemq's own command line against Apache RocketMQ: an operator can point ``sievemq`` at a RocketMQ cluster
(docs/compat.md, "Running the comparison"). RocketMQ writes some JSON bodies with bare number keys (the name
server's cluster info, a broker's consumer offsets), which sievemq's tools read (protocol/mq_json.py).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from sievemq.admin.api import AdminClient
from sievemq.client.message import Message
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.compat.sides import Side, broker_connection, create_topic, send_all

TOPIC = "CompatTools"
GROUP = "CompatToolsGroup"


@pytest.fixture(scope="module")
def rocketmq(sides: tuple[Side, Side]) -> Side:
    """RocketMQ's side with a topic of 3 messages and a group that committed offset 2."""
    ref = sides[0]

    async def fill() -> None:
        await create_topic(ref, TOPIC)
        await send_all(ref, TOPIC, [Message(TOPIC, f"t{i}".encode(), keys=f"key{i}") for i in range(3)])
        async with AdminClient(ref.namesrv) as admin:
            await admin.update_group(GROUP, {}, broker=ref.broker)
        conn = await broker_connection(ref)
        try:
            fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 2}
            resp = await conn.request(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), 30.0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        finally:
            conn.close()

    asyncio.run(fill())
    return ref


def sievemq(side: Side, *args: str) -> str:
    """``sievemq ARGS -n <the side's name server>``; its output (it must exit 0)."""
    proc = subprocess.run([sys.executable, "-m", "sievemq.cli", *args, "-n", side.namesrv], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (("cluster", "status"), ["DefaultCluster/sv-a", "serving"]),
        (("topic", "list"), [TOPIC, "3 messages"]),
        (("group", "list"), [GROUP]),
        (("group", "progress", GROUP), [TOPIC, "TOTAL"]),
        (("message", "find", "--topic", TOPIC, "--key", "key1"), ["t1"]),
        (("topic", "peek", TOPIC), ["t0", "t2"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_sievemq_commands_read_a_rocketmq_cluster(rocketmq: Side, args: tuple[str, ...], shows: list[str]) -> None:
    out = sievemq(rocketmq, *args)
    for text in shows:
        assert text in out, (args, text, out)
