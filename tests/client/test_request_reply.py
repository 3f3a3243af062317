"""Request-reply with sievemq's client against a real broker: ``Producer.request`` gets the reply a consumer sent
with ``Producer.reply`` (SEND_REPLY_MESSAGE_V2, pushed back with PUSH_REPLY_MESSAGE_TO_CLIENT); concurrent requests
each get their own; no reply is a clear timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from sievemq import ConsumeResult, Message, MessageExt, MessageValidationError, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.errors import RequestTimeoutError
from tests.client.conftest import ready, routed

Names = Callable[[str], str]
FAST = {"rebalance_interval": 1.0, "heartbeat_interval": 1.0, "persist_interval": 0.5, "consume_from": "first"}


async def test_requests_get_their_replies_and_no_reply_times_out(namesrv: str, names: Names) -> None:
    topic = names("ReqT")
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, 2)
    await routed(namesrv, topic)
    replier = Producer(namesrv, names("ReplyP"))
    consumer = PushConsumer(namesrv, names("ReplyC"), **FAST)  # type: ignore[arg-type]
    consumer.subscribe(topic)
    seen: list[MessageExt] = []

    @consumer.listener
    async def on(msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            seen.append(m)
            if m.body != b"ignore me":
                await replier.reply(m, b"pong:" + m.body, properties={"served-by": "replier"})
        return ConsumeResult.SUCCESS

    async with replier, consumer, Producer(namesrv, names("ReqP")) as requester:
        await ready(consumer, topic, 2)
        reply = await requester.request(Message(topic, b"ping"), timeout=10)
        assert reply.body == b"pong:ping" and reply.properties.get("served-by") == "replier"
        asked = next(m for m in seen if m.body == b"ping")
        assert reply.properties["CORRELATION_ID"] == asked.properties["CORRELATION_ID"]
        assert asked.properties["REPLY_TO_CLIENT"] == requester.client_id

        bodies = [f"q{i}".encode() for i in range(6)]
        replies = await asyncio.gather(*(requester.request(Message(topic, b), timeout=10) for b in bodies))
        assert [r.body for r in replies] == [b"pong:" + b for b in bodies], "a reply reached the wrong request"

        t0 = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="no reply"):
            await requester.request(Message(topic, b"ignore me"), timeout=1.0)
        assert 0.9 <= time.monotonic() - t0 < 3.0

        with pytest.raises(MessageValidationError, match="not a request"):
            await replier.reply(MessageExt(topic=topic, body=b"x"), b"y")
