"""REGISTER_BROKER at the name server: compressed bodies, split tables (topicTablePart), partial registrations
(RocketMQ's increments and split parts) and repeats answered without reading the body."""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import orjson
import pytest

from sievemq.namesrv.processors import NamesrvProcessors
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol import register_body as rb
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand

HDR = {"brokerName": "a", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": "0", "haServerAddr": ""}


class Conn:
    pass


CONN = Conn()


def send(
    p: NamesrvProcessors, body: bytes, compressed: bool | None = None, part: str | None = None, **extra: str
) -> RemotingCommand:
    h: dict[str, Any] = {**HDR, "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF), **extra}
    if compressed is not None:
        h["compressed"] = str(compressed).lower()
    if part is not None:
        h[rb.PART_FIELD] = part
    return asyncio.run(p.register_broker(CONN, RemotingCommand.request(RequestCode.REGISTER_BROKER, h, body)))  # type: ignore[arg-type]


def topics(*names: str, queues: int = 4) -> list[TopicConfig]:
    return [TopicConfig(n, queues, queues) for n in names]


def held(p: NamesrvProcessors) -> dict[str, int]:
    return {t: q["a"].write_queue_nums for t, q in p.routes.topic_queues.items() if "a" in q}


def test_compressed_flagged_or_recognised() -> None:
    p = NamesrvProcessors(RouteTable())
    assert send(p, rb.encode_compressed({"counter": 1}, topics("T", "U"), []), compressed=True).code == 0
    assert held(p) == {"T": 4, "U": 4}
    # RocketMQ 5 brokers send their compressed body with compressed=false
    assert send(p, rb.encode_compressed({"counter": 2}, topics("V"), []), compressed=False).code == 0
    assert held(p) == {"T": 4, "U": 4, "V": 4}  # unmarked: nothing removed


def test_split_parts_keep_the_other_parts_topics_and_the_last_one_sweeps() -> None:
    p = NamesrvProcessors(RouteTable())
    names = [f"t{i}" for i in range(9)]
    for i in range(3):
        chunk = topics(*names[3 * i : 3 * i + 3])
        assert send(p, rb.encode_compressed({"counter": 1}, chunk, []), True, f"{i + 1}/3").code == 0
    assert sorted(held(p)) == names
    # version 2: t0 deleted, t8 now 8 queues; its parts arrive one by one
    v2 = [*topics(*names[1:8]), TopicConfig("t8", 8, 8)]
    parts = [v2[0:3], v2[3:6], v2[6:8]]
    send(p, rb.encode_compressed({"counter": 2}, parts[0], []), True, "1/3")
    assert sorted(held(p)) == names, "the first part removes nothing: the others' topics stay routable"
    send(p, rb.encode_compressed({"counter": 2}, parts[1], []), True, "2/3")
    assert "t0" in held(p)
    send(p, rb.encode_compressed({"counter": 2}, parts[2], []), True, "3/3")
    assert held(p) == {**{n: 4 for n in names[1:8]}, "t8": 8}, "the last part applied, then t0 swept"


def test_an_unsplit_complete_table_removes_what_it_no_longer_lists() -> None:
    p = NamesrvProcessors(RouteTable())
    send(p, rb.encode_json({"counter": 1}, topics("T", "U"), []), part="1/1")
    send(p, rb.encode_json({"counter": 2}, topics("T"), []), part="1/1")
    assert held(p) == {"T": 4}


def test_rocketmq_increments_and_split_parts_add_without_removing() -> None:
    p = NamesrvProcessors(RouteTable())
    send(p, rb.encode_json({"counter": 1}, topics("T", "U"), []))
    send(p, rb.encode_json({"counter": 2}, topics("N"), []))  # registerIncrementBrokerData: one new topic
    assert held(p) == {"T": 4, "U": 4, "N": 4}
    # a later part of the same version: topics the routes lack are added, held ones are not changed (RocketMQ)
    send(p, rb.encode_json({"counter": 2}, [*topics("T", queues=8), *topics("W")], []))
    assert held(p) == {"T": 4, "U": 4, "N": 4, "W": 4}


def test_a_repeated_body_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    p = NamesrvProcessors(RouteTable())
    reads: list[int] = []
    real = rb.decode

    def counting(body: bytes, compressed: bool) -> rb.RegisterBody:
        reads.append(len(body))
        return real(body, compressed)

    monkeypatch.setattr(rb, "decode", counting)
    body = rb.encode_compressed({"counter": 1}, topics(*(f"t{i}" for i in range(3000))), [])
    for _ in range(3):
        assert send(p, body, True, "1/1").code == 0
    assert len(reads) == 1
    live = p.routes.live["127.0.0.1:1"]
    assert p.registrations == 3 and live.conn_id == id(CONN)
    # the same body under another broker id is read again
    send(p, body, True, "1/1", brokerId="1")
    assert len(reads) == 2


def test_hostile_and_malformed_bodies_are_refused_clearly() -> None:
    p = NamesrvProcessors(RouteTable())
    bomb = zlib.compress(bytes(rb.MAX_INFLATED_BYTES + 1))
    r = send(p, bomb, True)
    assert r.code == ResponseCode.SYSTEM_ERROR and "inflates past" in (r.remark or "")
    r = send(p, rb.encode_json({}, [], []), part="4/2")
    assert r.code == ResponseCode.SYSTEM_ERROR and "topicTablePart" in (r.remark or "")
    r = send(p, b"{not json")
    assert r.code == ResponseCode.SYSTEM_ERROR and "malformed RegisterBrokerBody" in (r.remark or "")
    assert not p.routes.live


def test_query_data_version_compares_as_rocketmq() -> None:
    p = NamesrvProcessors(RouteTable())
    send(p, rb.encode_json({"counter": 3, "timestamp": 9}, topics("T"), []), part="1/1")

    def query(dv: dict[str, int]) -> str:
        cmd = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, {**HDR}, orjson.dumps(dv))
        return str(asyncio.run(p.query_data_version(CONN, cmd)).ext_fields["changed"]).lower()  # type: ignore[arg-type]

    assert query({"counter": 3, "stateVersion": 0, "timestamp": 9}) == "false"
    assert query({"counter": 4, "stateVersion": 0, "timestamp": 9}) == "true"
