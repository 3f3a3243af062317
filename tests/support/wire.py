"""Request wrappers only tests (and bench/) use: sends without a Producer, routes, and raw answers.

``sievemq.client.api`` holds the typed wrappers the client itself uses; these build on them, or return the raw
``RemotingCommand`` where a test asserts on fields of the answer that the typed result does not carry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import orjson

from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.heartbeat import HeartbeatData
from sievemq.protocol.message import properties_to_string
from sievemq.protocol.route import TopicRouteData
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection

__all__ = ["get_route", "heartbeat", "send_batch", "send_message"]

ANSWER_TIMEOUT = 30.0
"""How long a test waits for a server's answer: a safety net for a hung server, never a measure (a loaded machine
answers late, and a test that fails then is a bug)."""


def _checked(resp: RemotingCommand) -> RemotingCommand:
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    return resp


async def get_route(conn: Connection, topic: str, timeout: float = ANSWER_TIMEOUT) -> TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC from a name server (RemotingError when it has none)."""
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return TopicRouteData.from_json(orjson.loads(_checked(await conn.request(cmd, timeout)).body))


async def send_message(
    conn: Connection,
    topic: str,
    body: bytes,
    *,
    group: str = "sievemq-producer",
    tags: str | None = None,
    keys: list[str] | None = None,
    properties: dict[str, str] | None = None,
    queue_id: int = -1,
    delay_level: int = 0,
    timeout: float = ANSWER_TIMEOUT,
) -> api.SendResult:
    """SEND_MESSAGE_V2 of one message (RemotingError for codes other than success and the flush/slave timeouts)."""
    props = dict(properties or {})
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = " ".join(keys)
    if delay_level:
        props["DELAY"] = str(delay_level)
    props.setdefault("WAIT", "true")
    header = SendMessageHeader(
        producer_group=group,
        topic=topic,
        queue_id=queue_id,
        born_timestamp=int(time.time() * 1000),
        properties=properties_to_string(props),
    )
    return await api.send_request(conn, header, body, timeout=timeout)


async def send_batch(
    conn: Connection,
    topic: str,
    entries: list[BatchEntry],
    *,
    group: str = "sievemq-producer",
    queue_id: int = -1,
    code: int = RequestCode.SEND_BATCH_MESSAGE,
    timeout: float = ANSWER_TIMEOUT,
) -> api.SendResult:
    """SEND_BATCH_MESSAGE (or another send code with the batch flag)."""
    header = SendMessageHeader(
        producer_group=group, topic=topic, queue_id=queue_id, born_timestamp=int(time.time() * 1000), batch=True
    )
    return await api.send_request(conn, header, encode_batch(entries), code=code, timeout=timeout)


async def heartbeat(conn: Connection, data: HeartbeatData, timeout: float = ANSWER_TIMEOUT) -> RemotingCommand:
    """HEART_BEAT; the raw answer, for tests of its extFields (``api.heartbeat`` returns the typed result)."""
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=orjson.dumps(data.to_json()))
    return _checked(await conn.request(cmd, timeout))


async def wait_routed(namesrv: str, topics: Iterable[str], timeout: float = 30.0, who: str = "") -> None:
    """Wait until the name server at ``namesrv`` routes every one of ``topics`` (a state: RocketMQ's broker registers
    a new topic on its next beat, sievemq's before it answers); AssertionError naming ``who`` after ``timeout``."""
    async with AdminClient(namesrv) as admin:
        for topic in topics:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if (await admin.route(topic)).queue_datas:
                        break
                except RemotingError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"{who or namesrv}: no route for {topic} within {timeout:.0f} s")
                await asyncio.sleep(0.05)  # polling for a state
