"""Small helpers for the integration tests: polling with deadlines, raw requests, raw frames, a recording handler.

Everything here talks to real processes over TCP; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import os
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from sievemq.client import api
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.protocol.route import TopicRouteData
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand, SerializeType, decode_header, encode
from sievemq.remoting.connection import Connection
from tests.support.wire import ANSWER_TIMEOUT

T = TypeVar("T")

# A pull's subscription of everything; explicit so that pulls never depend on heartbeats.
SUB_ALL = "*"


async def eventually(
    probe: Callable[[], T | Awaitable[T]],
    timeout: float = ANSWER_TIMEOUT,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Call ``probe`` (sync or async) until it returns something truthy; fail with the last value at the deadline.

    Exceptions from the probe count as "not yet" until the deadline, then the last one is raised.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    last_exc: BaseException | None = None
    while True:
        try:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            last, last_exc = value, None
            if value:
                return value  # type: ignore[return-value]
        except AssertionError:
            raise
        except Exception as e:  # not ready yet
            last_exc = e
        if time.monotonic() >= deadline:
            if last_exc is not None:
                raise AssertionError(f"{what} not reached within {timeout}s; last error: {last_exc!r}") from last_exc
            raise AssertionError(f"{what} not reached within {timeout}s; last value: {last!r}")
        await asyncio.sleep(interval)


async def call(
    conn: Connection,
    code: int,
    fields: dict[str, Any] | None = None,
    body: bytes = b"",
    *,
    timeout: float = ANSWER_TIMEOUT,
    version: int | None = None,
) -> RemotingCommand:
    """Send a raw request and return whatever the peer answered (no code check)."""
    cmd = RemotingCommand.request(code, fields, body)
    if version is not None:
        cmd.version = version
    return await conn.request(cmd, timeout)


async def create_topic(
    conn: Connection, topic: str, queues: int = 4, perm: int = 6, filter_type: str = "SINGLE_TAG"
) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC on one broker; asserts success."""
    resp = await call(
        conn,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": perm,
            "topicFilterType": filter_type,
            "topicSysFlag": 0,
            "order": False,
        },
    )
    assert resp.code == ResponseCode.SUCCESS, f"create topic {topic}: [{resp.code}] {resp.remark}"
    return resp


async def create_group(conn: Connection, group: str, **config: Any) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker (``config``: RocketMQ's field names); asserts success. A
    broker takes offset commits only of a group it has (as RocketMQ 5): a consumer's heartbeat or this makes it."""
    body = orjson.dumps({"groupName": group, "consumeEnable": True, **config})
    resp = await call(conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert resp.code == ResponseCode.SUCCESS, f"create group {group}: [{resp.code}] {resp.remark}"
    return resp


async def route_or_none(ns_conn: Connection, topic: str) -> TopicRouteData | None:
    """The topic's route from a name server, or None when it answers TOPIC_NOT_EXIST."""
    resp = await call(ns_conn, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, f"route of {topic}: [{resp.code}] {resp.remark}"
    return TopicRouteData.from_json(orjson.loads(resp.body))


def route_brokers(route: TopicRouteData | None) -> dict[str, str]:
    """broker name -> master address in a route ({} for None)."""
    if route is None:
        return {}
    return {bd.broker_name: bd.broker_addrs.get(0, "") for bd in route.broker_datas}


async def max_offset(conn: Connection, topic: str, queue_id: int) -> int:
    """GET_MAX_OFFSET."""
    return await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, topic, queue_id)


async def min_offset(conn: Connection, topic: str, queue_id: int) -> int:
    """GET_MIN_OFFSET."""
    return await api.queue_offset(conn, RequestCode.GET_MIN_OFFSET, topic, queue_id)


async def pull_all(
    conn: Connection, topic: str, queue_id: int, group: str = "it-reader", start: int = 0, limit: int = 100_000
) -> list[MessageExt]:
    """Every message of one queue from ``start`` to its current end (subscription ``*``)."""
    out: list[MessageExt] = []
    offset = start
    while len(out) < limit:
        r = await api.pull_message(conn, group, topic, queue_id, offset, max_nums=32, subscription=SUB_ALL)
        if r.code == ResponseCode.SUCCESS:
            out.extend(r.messages)
            offset = r.next_begin_offset
        elif r.code == ResponseCode.PULL_RETRY_IMMEDIATELY:
            offset = r.next_begin_offset
        elif r.code == ResponseCode.PULL_NOT_FOUND:
            break
        else:
            raise AssertionError(f"pull {topic}/{queue_id}@{offset}: [{r.code}] {r.remark}")
    return out


async def held_pulls(conn: Connection) -> int:
    """How many pulls the broker holds right now (GET_BROKER_RUNTIME_INFO ``pullHeldCount``)."""
    resp = await call(conn, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert resp.code == ResponseCode.SUCCESS, resp
    return int(orjson.loads(resp.body)["table"].get("pullHeldCount", "0"))


async def wait_held(conn: Connection, task: asyncio.Task[Any], count: int = 1, timeout: float = ANSWER_TIMEOUT) -> None:
    """Wait until the broker holds ``count`` pulls; fail if ``task`` (the pull) is answered meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert not task.done(), f"the pull was answered instead of held: {task.result()!r}"
        if await held_pulls(conn) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the broker never held {count} pull(s)")


def decode_body_records(resp: RemotingCommand) -> list[MessageExt]:
    """Stored records in a response body."""
    return decode_records(resp.body) if resp.body else []


@dataclass
class Recorder:
    """A client-side RequestHandler that records every request the peer (broker) sends us."""

    requests: list[RemotingCommand] = field(default_factory=list)

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(cmd)
        if cmd.is_oneway:
            return None
        return cmd.response(ResponseCode.SUCCESS)

    def codes(self) -> list[int]:
        """Request codes received so far."""
        return [c.code for c in self.requests]

    def of_code(self, code: int) -> list[RemotingCommand]:
        """Requests received with ``code``."""
        return [c for c in self.requests if c.code == code]


# ------------------------------------------------------------------------------------------- raw frames


@dataclass
class RawFrame:
    """A frame as read off the socket, before any sievemq decoding."""

    serialize_type: int
    header: bytes
    body: bytes

    def json_header(self) -> dict[str, Any]:
        """The JSON header parsed with orjson (types exactly as on the wire)."""
        assert self.serialize_type == 0, f"header is not JSON (serialize type {self.serialize_type})"
        obj = orjson.loads(self.header)
        assert isinstance(obj, dict)
        return obj

    def command(self) -> RemotingCommand:
        """The frame decoded by sievemq's own codec (either serialization)."""
        return decode_header(self.header, SerializeType(self.serialize_type), self.body)


class RawClient:
    """A bare TCP client: write any bytes, read whole frames, see when the peer closes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> RawClient:
        """Connect."""
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def write(self, data: bytes) -> None:
        """Send raw bytes."""
        self.writer.write(data)
        await self.writer.drain()

    async def send(self, cmd: RemotingCommand) -> None:
        """Send an encoded command (opaque taken from the command)."""
        await self.write(encode(cmd))

    async def read_frame(self, timeout: float = 5.0) -> RawFrame:
        """Read one whole frame."""
        prefix = await asyncio.wait_for(self.reader.readexactly(8), timeout)
        length, word = struct.unpack(">ii", prefix)
        rest = await asyncio.wait_for(self.reader.readexactly(length - 4), timeout)
        stype, hlen = (word >> 24) & 0xFF, word & 0xFFFFFF
        return RawFrame(stype, rest[:hlen], rest[hlen:])

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the peer closed the connection (EOF or reset) within ``timeout``; False if still open."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    async def close(self) -> None:
        """Close our side."""
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 2.0)
        except (TimeoutError, OSError):
            pass


def request_cmd(code: int, fields: dict[str, Any] | None = None, body: bytes = b"", opaque: int = 7) -> RemotingCommand:
    """A request command with a fixed opaque (for raw sockets)."""
    cmd = RemotingCommand.request(code, fields, body)
    cmd.opaque = opaque
    return cmd


def json_frame(header: dict[str, Any], body: bytes = b"") -> bytes:
    """A JSON frame with a hand-written header (lets a test put numbers/booleans in extFields)."""
    h = orjson.dumps(header)
    return struct.pack(">ii", 4 + len(h) + len(body), len(h)) + h + body


# ------------------------------------------------------------------------------------------- page cache

_SYS_CACHESTAT = 451  # same number on x86_64 and the generic syscall table (arm64); Linux >= 6.5


def dirty_pages(path: Path, offset: int = 0, length: int = 0) -> int:
    """Dirty (not yet written back) page-cache pages of ``path`` in ``[offset, offset+length)``, counting pages
    under writeback too: Linux ``cachestat(2)``. ``length`` 0 means to the end of the file.

    The page cache is per file, not per process, so this sees what a broker wrote through its mapping.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        rng = (ctypes.c_uint64 * 2)(offset, length)
        out = (ctypes.c_uint64 * 5)()  # nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted
        if libc.syscall(_SYS_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(out), 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cachestat({path}): {os.strerror(err)}")
        return int(out[1] + out[2])
    finally:
        os.close(fd)


async def assert_found_by_key_and_id(conn: Connection, topic: str, msg_id: str, key: str, body: bytes) -> None:
    """The message is found by QUERY_MESSAGE under ``key`` and by VIEW_MESSAGE_BY_ID from its offsetMsgId."""
    from sievemq.protocol.msgid import parse_offset_msg_id

    fields = {"topic": topic, "key": key, "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2**62}
    resp = await call(conn, RequestCode.QUERY_MESSAGE, fields)
    assert resp.code == ResponseCode.SUCCESS, f"key {key} lost from the index: {resp.remark}"
    assert [m.body for m in decode_body_records(resp)] == [body]
    resp = await call(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": parse_offset_msg_id(msg_id)[2]})
    assert [m.body for m in decode_body_records(resp)] == [body]
