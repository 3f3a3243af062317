"""Raw requests for the filter server tests: 302 registrations and FLAG_CLASS_FILTER pulls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from sievemq.protocol.message import MessageExt, decode_records
from sievemq.protocol.reasons import REASON_FIELD
from sievemq.protocol.upload_signing import filter_class_crc, signed_fields
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.support import wire

T = TypeVar("T")
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_CLASS_FILTER = 0x8


@dataclass
class Pulled:
    """A pull response, decoded."""

    code: int
    remark: str | None
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    body: bytes
    reason: str | None = None
    """The refusal's ``reason`` field (``sievemq.protocol.reasons.Reason``), None when absent."""


async def register(
    conn: Connection,
    group: str,
    topic: str,
    class_name: str,
    source: str = "",
    *,
    crc: int | None = None,
    extra: dict[str, str] | None = None,
    timeout: float = 15.0,
) -> RemotingCommand:
    """REGISTER_MESSAGE_FILTER_CLASS (302); a named function when ``source`` is empty."""
    body = source.encode()
    fields: dict[str, Any] = {
        "consumerGroup": group,
        "topic": topic,
        "className": class_name,
        "classCRC": filter_class_crc(body if body else class_name) if crc is None else crc,
        **(extra or {}),
    }
    cmd = RemotingCommand.request(RequestCode.REGISTER_MESSAGE_FILTER_CLASS, fields, body)
    return await conn.request(cmd, timeout)


def signed(
    account: str, secret: str, group: str, topic: str, class_name: str, source: str, *, to: str, **kw: Any
) -> dict[str, str]:
    """The signature extFields of an upload to the filter server at ``to`` (fresh timestamp and nonce)."""
    return signed_fields(account, secret, group, topic, class_name, source, to, **kw)


async def class_pull(
    conn: Connection,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    max_nums: int = 32,
    suspend_ms: int = 0,
    commit_offset: int | None = None,
    timeout: float = 30.0,
) -> Pulled:
    """PULL_MESSAGE with FLAG_CLASS_FILTER (no FLAG_SUBSCRIPTION), as a 4.0-4.2 Java client sends it."""
    sys_flag = FLAG_CLASS_FILTER
    if suspend_ms:
        sys_flag |= FLAG_SUSPEND
    if commit_offset is not None:
        sys_flag |= FLAG_COMMIT_OFFSET
    fields = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": max_nums,
        "sysFlag": sys_flag,
        "commitOffset": commit_offset or 0,
        "suspendTimeoutMillis": suspend_ms,
        "subscription": "*",
        "subVersion": 0,
    }
    resp = await conn.request(RemotingCommand.request(RequestCode.PULL_MESSAGE, fields), timeout)
    f = resp.ext_fields
    msgs = decode_records(resp.body) if resp.code == ResponseCode.SUCCESS else []
    return Pulled(
        resp.code,
        resp.remark,
        int(f.get("nextBeginOffset", "-1")),
        int(f.get("minOffset", "-1")),
        int(f.get("maxOffset", "-1")),
        msgs,
        resp.body,
        f.get(REASON_FIELD),
    )


async def drain(
    conn: Connection, group: str, topic: str, queue_id: int, offset: int = 0
) -> tuple[list[MessageExt], int]:
    """Class-filter pulls from ``offset`` until PULL_NOT_FOUND; (messages, final offset). Fails on other codes."""
    out: list[MessageExt] = []
    while True:
        p = await class_pull(conn, group, topic, queue_id, offset)
        if p.code == ResponseCode.PULL_NOT_FOUND:
            return out, offset
        assert p.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY), f"[{p.code}] {p.remark}"
        assert p.next_begin_offset > offset
        out += p.messages
        offset = p.next_begin_offset


BIG_EU_SOURCE = """
import json

def BigEuOrders(msg):
    order = json.loads(msg.body)
    return order["region"] == "eu" and order["amount"] > 100
"""
"""Uploaded source of ``BigEuOrders``, the same test as ``shop.filters:big_eu_orders``."""


def order(i: int) -> bytes:
    """Order ``i`` as JSON: every 5th is in the EU; amounts cycle 0, 80, 160, 240."""
    return orjson.dumps({"id": i, "region": "eu" if i % 5 == 0 else "us", "amount": (i % 4) * 80})


def is_big_eu(i: int) -> bool:
    """What ``shop.filters:big_eu_orders`` says about ``order(i)``."""
    return i % 5 == 0 and (i % 4) * 80 > 100


async def send_orders(conn: Connection, topic: str, ids: range, queues: int = 2) -> None:
    """Send ``order(i)`` for each i to queue ``i % queues``, tag A or B alternately, key ``order-i``."""
    for i in ids:
        await wire.send_message(conn, topic, order(i), queue_id=i % queues, tags="AB"[i % 2], keys=[f"order-{i}"])


async def until(probe: Callable[[], Awaitable[T]], *, timeout: float = 30.0, what: str = "condition") -> T:
    """Await ``probe()`` until it returns something truthy; fail with the last value or error at the deadline."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = await probe()
            if value:
                return value
            last = value
        except Exception as e:  # not ready yet
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout}s; last: {last!r}")
        await asyncio.sleep(0.05)
