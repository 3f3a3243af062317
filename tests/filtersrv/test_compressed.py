"""Filter functions see the body a consumer sees, whatever the producer compressed it with; refusals carry reasons."""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable

import lz4.frame
import orjson
import pytest
import zstandard

from sievemq.protocol.message import properties_to_string
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.protocol.sysflag import COMPRESSED_FLAG, COMPRESSION_LZ4_TYPE, COMPRESSION_ZSTD_TYPE
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import FilterCluster, open_conn
from tests.filtersrv.helpers import drain, is_big_eu, order, register

COMPRESSORS: dict[str, tuple[int, Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
    "zlib": (COMPRESSED_FLAG, zlib.compress, zlib.decompress),
    "lz4": (COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE, lz4.frame.compress, lz4.frame.decompress),
    "zstd": (
        COMPRESSED_FLAG | COMPRESSION_ZSTD_TYPE,
        zstandard.ZstdCompressor().compress,
        lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b),
    ),
}


async def send_compressed(conn: Connection, topic: str, i: int, kind: str) -> None:
    """Send ``order(i)`` compressed as a 5.x Java producer with that compression type does."""
    sys_flag, compress, _ = COMPRESSORS[kind]
    header = SendMessageHeader(
        producer_group="p",
        topic=topic,
        queue_id=0,
        sys_flag=sys_flag,
        born_timestamp=int(time.time() * 1000),
        properties=properties_to_string({"TAGS": "A", "KEYS": f"order-{i}", "WAIT": "true"}),
    )
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_fields(v2=True), compress(order(i)))
    resp = await conn.request(cmd, 5.0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
async def test_function_sees_inflated_bodies(fc: FilterCluster, conns: list[Connection], kind: str) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker)
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    topic = f"Packed{kind}"
    for i in range(30):
        await send_compressed(bconn, topic, i, kind)
    resp = await register(fconn, "g", topic, "shop.filters:big_eu_orders")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    msgs, end = await drain(fconn, "g", topic, 0)
    assert end == 30
    # The records go out as stored (still compressed): the consumer inflates them as usual.
    inflate = COMPRESSORS[kind][2]
    got = [orjson.loads(inflate(m.body))["id"] for m in msgs]
    assert got == [i for i in range(30) if is_big_eu(i)]


async def test_unregistered_and_disabled_functions_are_refused_with_reasons(
    fc: FilterCluster, conns: list[Connection]
) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker)
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_compressed(bconn, "Reasons", 1, "zlib")

    def pull(group: str) -> RemotingCommand:
        fields = {"consumerGroup": group, "topic": "Reasons", "queueId": 0, "queueOffset": 0, "sysFlag": 0x8}
        return RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)

    resp = await fconn.request(pull("nobody"), 10.0)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.ext_fields.get(REASON_FIELD) == Reason.FILTER_NOT_REGISTERED

    assert (await register(fconn, "raiser", "Reasons", "shop.filters:raises")).code == ResponseCode.SUCCESS
    reasons = [(await fconn.request(pull("raiser"), 10.0)).ext_fields.get(REASON_FIELD) for _ in range(4)]
    assert reasons == [Reason.FILTER_FAILED, Reason.FILTER_FAILED, Reason.FILTER_DISABLED, Reason.FILTER_DISABLED]
