"""The wire itself, seen through raw sockets: response headers, serialization mirroring, unknown codes,
malformed frames and half frames."""

from __future__ import annotations

import asyncio
import socket
import struct

from sievemq.client import api
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import SerializeType, encode
from sievemq.remoting.connection import connect
from tests.integration.conftest import OpenConn
from tests.integration.helpers import RawClient, call, create_topic, json_frame, request_cmd
from tests.support import wire
from tests.support.procs import Proc

UNKNOWN_CODE = 9999


def _assert_header_types(h: dict[str, object], opaque: int) -> None:
    """docs/protocol/frames.md §5-§6: numbers for code/flag/opaque/version, strings for every extFields value."""
    for key in ("code", "flag", "opaque", "version"):
        assert type(h[key]) is int, f"{key} must be a JSON number: {h!r}"
    assert h["opaque"] == opaque
    assert h["flag"] & 1 == 1, "response flag bit 0"
    assert h["version"] >= 232
    ext = h.get("extFields", {})
    assert isinstance(ext, dict)
    for k, v in ext.items():
        assert type(v) is str, f"extFields[{k!r}] = {v!r} must be a JSON string on the wire"


async def test_route_of_unknown_topic_is_17_and_header_values_are_json_strings(ns: Proc, broker: Proc) -> None:
    # Name server, unknown topic: 17 TOPIC_NOT_EXIST with a remark, JSON header.
    raw = await RawClient.open(ns.port)
    try:
        await raw.send(request_cmd(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"}, opaque=4242))
        frame = await raw.read_frame()
        h = frame.json_header()
        assert h["code"] == ResponseCode.TOPIC_NOT_EXIST
        assert "NoSuchTopic" in h["remark"]
        _assert_header_types(h, 4242)
    finally:
        await raw.close()

    # Broker responses that carry extFields: send, pull, query offset. The requests put numbers and booleans
    # into extFields (as the C++ core and ali-ons do); the answers must be strings only.
    raw = await RawClient.open(broker.port)
    try:
        send_hdr = {
            "code": RequestCode.SEND_MESSAGE_V2,
            "flag": 0,
            "language": "CPP",
            "opaque": 11,
            "version": 333,
            "extFields": {
                "a": "pg",
                "b": "WireTopic",
                "c": "TBW102",
                "d": 4,
                "e": 1,
                "f": 0,
                "g": 1700000000000,
                "h": 0,
                "i": "TAGS\x01TagA",
                "j": 0,
                "k": False,
                "m": False,
            },
        }
        await raw.write(json_frame(send_hdr, b"wire-body"))
        h = (await raw.read_frame()).json_header()
        assert h["code"] == ResponseCode.SUCCESS, h
        _assert_header_types(h, 11)
        ext = h["extFields"]
        assert {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"} <= set(ext)
        assert (ext["queueId"], ext["queueOffset"]) == ("1", "0")

        pull_hdr = {
            "code": RequestCode.PULL_MESSAGE,
            "flag": 0,
            "language": "CPP",
            "opaque": 12,
            "version": 333,
            "extFields": {
                "consumerGroup": "wire-group",
                "topic": "WireTopic",
                "queueId": 1,
                "queueOffset": 0,
                "maxMsgNums": 32,
                "sysFlag": 4,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": "*",
                "subVersion": "0",
            },
        }
        await raw.write(json_frame(pull_hdr))
        frame = await raw.read_frame()
        h = frame.json_header()
        assert h["code"] == ResponseCode.SUCCESS, h
        _assert_header_types(h, 12)
        assert {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"} <= set(h["extFields"])
        assert h["extFields"]["nextBeginOffset"] == "1"
        assert b"wire-body" in frame.body

        # A pull that finds nothing still carries all four keys, as strings.
        pull_hdr["opaque"] = 13
        pull_hdr["extFields"]["queueOffset"] = 1  # type: ignore[index]
        await raw.write(json_frame(pull_hdr))
        h = (await raw.read_frame()).json_header()
        assert h["code"] == ResponseCode.PULL_NOT_FOUND, h
        _assert_header_types(h, 13)
        assert {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"} <= set(h["extFields"])

        await raw.send(
            request_cmd(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "wire-group", "topic": "WireTopic", "queueId": 1},
                opaque=14,
            )
        )
        h = (await raw.read_frame()).json_header()
        assert h["code"] == ResponseCode.SUCCESS, h
        _assert_header_types(h, 14)
        assert h["extFields"]["offset"] == "0"
    finally:
        await raw.close()


async def test_rocketmq_serialized_request_gets_rocketmq_answer_json_gets_json(ns: Proc, broker: Proc) -> None:
    for proc, code, fields in (
        (broker, RequestCode.GET_MAX_OFFSET, {"topic": "SerTopic", "queueId": 0}),
        (ns, RequestCode.GET_BROKER_CLUSTER_INFO, None),
    ):
        raw = await RawClient.open(proc.port)
        try:
            cmd = request_cmd(code, fields, opaque=77)
            cmd.serialize_type = SerializeType.ROCKETMQ
            await raw.send(cmd)
            frame = await raw.read_frame()
            assert frame.serialize_type == SerializeType.ROCKETMQ, f"answer to a ROCKETMQ request from {proc.args[0]}"
            resp = frame.command()
            assert resp.is_response and resp.opaque == 77 and resp.code == ResponseCode.SUCCESS

            cmd = request_cmd(code, fields, opaque=78)
            await raw.send(cmd)
            frame = await raw.read_frame()
            assert frame.serialize_type == SerializeType.JSON, f"answer to a JSON request from {proc.args[0]}"
            h = frame.json_header()
            assert h["opaque"] == 78 and h["code"] == ResponseCode.SUCCESS
        finally:
            await raw.close()

    # The ROCKETMQ header carries extFields too: a send and its response, binary both ways.
    raw = await RawClient.open(broker.port)
    try:
        cmd = request_cmd(
            RequestCode.SEND_MESSAGE_V2,
            {"a": "pg", "b": "SerTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0, "i": ""},
            b"binary-header-send",
            opaque=79,
        )
        cmd.serialize_type = SerializeType.ROCKETMQ
        await raw.send(cmd)
        frame = await raw.read_frame()
        assert frame.serialize_type == SerializeType.ROCKETMQ
        resp = frame.command()
        assert resp.code == ResponseCode.SUCCESS, resp
        assert resp.ext_fields["queueId"] == "0" and resp.ext_fields["queueOffset"] == "0"
        assert len(resp.ext_fields["msgId"]) == 32
    finally:
        await raw.close()


async def test_unknown_request_code_is_3_with_remark_and_connection_stays_usable(
    ns: Proc, broker: Proc, open_conn: OpenConn
) -> None:
    for proc in (ns, broker):
        conn = await open_conn(proc)
        resp = await call(conn, UNKNOWN_CODE, {"x": "y"})
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark and str(UNKNOWN_CODE) in resp.remark
        # Same connection, next request works.
        resp = await call(conn, UNKNOWN_CODE)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        if proc is broker:
            assert (await wire.send_message(conn, "AfterUnknown", b"ok")).code == ResponseCode.SUCCESS
        else:
            assert (await call(conn, RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS


def _garbage_frames() -> dict[str, bytes]:
    good_len_bad_json = b"this is not json"
    return {
        "random bytes": bytes(range(255, -1, -1)) * 4,
        "absurd length": struct.pack(">ii", 0x7FFFFFF0, 10) + b"x" * 64,
        "negative length": struct.pack(">ii", -5, 0) + b"x" * 16,
        "unknown serialize type": struct.pack(">ii", 12, (7 << 24) | 4) + b"abcdefgh",
        "header longer than frame": struct.pack(">ii", 8, 1000) + b"abcd",
        "header not json": struct.pack(">ii", 4 + len(good_len_bad_json), len(good_len_bad_json)) + good_len_bad_json,
        "json header without code": json_frame({"opaque": 1, "flag": 0}),
    }


async def test_malformed_frames_close_only_that_connection(ns: Proc, broker: Proc, open_conn: OpenConn) -> None:
    for proc in (broker, ns):
        bystander = await open_conn(proc)
        for name, data in _garbage_frames().items():
            raw = await RawClient.open(proc.port)
            try:
                await raw.write(data)
                assert await raw.closed_by_peer(timeout=3.0), f"{proc.args[0]}: {name} must close the connection"
            finally:
                await raw.close()
            # The other connection is untouched and still served.
            assert not bystander.is_closed, f"{proc.args[0]}: {name} closed another connection"
            resp = await call(
                bystander,
                RequestCode.GET_BROKER_CLUSTER_INFO if proc is ns else RequestCode.GET_MAX_OFFSET,
                None if proc is ns else {"topic": "Any", "queueId": 0},
            )
            assert resp.code == ResponseCode.SUCCESS, f"after {name}: [{resp.code}] {resp.remark}"
        assert proc.popen is not None and proc.popen.poll() is None, f"{proc.args[0]} died"


async def test_half_frame_then_vanish_does_not_hurt_the_broker(broker: Proc, open_conn: OpenConn) -> None:
    frame = encode(request_cmd(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "HalfTopic", "e": 0}, b"x" * 1000))

    # A client that sends half a frame and stays silent: nobody else waits for it.
    lingering = await RawClient.open(broker.port)
    await lingering.write(frame[: len(frame) // 2])
    # Others that send half a frame and vanish, one with only part of the length prefix.
    for cut in (3, 10, len(frame) // 2, len(frame) - 1):
        raw = await RawClient.open(broker.port)
        await raw.write(frame[:cut])
        await raw.close()
    # An abortive close (RST) in the middle of a frame.
    raw = await RawClient.open(broker.port)
    await raw.write(frame[: len(frame) // 3])
    sock = raw.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.writer.transport.abort()
    await asyncio.sleep(0)

    conn = await open_conn(broker)
    r = await asyncio.wait_for(wire.send_message(conn, "HalfTopic", b"whole", queue_id=0), 3.0)
    assert r.code == ResponseCode.SUCCESS and r.queue_offset == 0, "no half frame may have been stored"
    pulled = await api.pull_message(conn, "half-group", "HalfTopic", 0, 0)
    assert [m.body for m in pulled.messages] == [b"whole"]

    # The lingering half frame, completed later, is still a valid request on its own connection.
    await lingering.write(frame[len(frame) // 2 :])
    h = (await lingering.read_frame()).json_header()
    assert h["code"] == ResponseCode.SUCCESS and h["extFields"]["queueOffset"] == "1"
    await lingering.close()
    assert broker.popen is not None and broker.popen.poll() is None

    # And a fresh connection still works after all of that.
    fresh = await connect("127.0.0.1", broker.port)
    try:
        assert (await wire.send_message(fresh, "HalfTopic", b"later", queue_id=0)).queue_offset == 2
    finally:
        fresh.close()


async def test_connection_survives_many_requests_in_flight(broker: Proc, open_conn: OpenConn) -> None:
    """Requests pipelined on one connection are all answered and matched by opaque."""
    conn = await open_conn(broker)
    await create_topic(conn, "PipeTopic", queues=1)
    results = await asyncio.gather(
        *(wire.send_message(conn, "PipeTopic", f"p{i}".encode(), queue_id=0) for i in range(50))
    )
    assert sorted(r.queue_offset for r in results) == list(range(50))
    assert len({r.msg_id for r in results}) == 50
