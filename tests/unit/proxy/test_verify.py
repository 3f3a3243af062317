"""The proxy's message verification (proxy/verify.py, docs/proxy.md §10), without sockets: a broker's 309 becomes
a VerifyMessageCommand on the client's Telemetry stream; the client's answer (its nonce, its status) becomes the
broker's answer; other clients' and late answers change nothing; limits hold."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from sievemq.protocol.consume_directly import DirectlyHeader
from sievemq.protocol.message import MessageExt, encode_record
from sievemq.proxy import verify as verify_module
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.verify import VerifyRelay, answer_of
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand

Out = asyncio.Queue[svc.TelemetryCommand | None]


def _ask(client: str = "c1", timeout_ms: int = 2000) -> RemotingCommand:
    msg = MessageExt("T", b"hello", properties={"TAGS": "TagA", "UNIQ_KEY": "ID1", "k": "v"})
    header = DirectlyHeader("g", client, "0A0000010000277B0000000000000000", timeout_ms, "broker-a")
    return RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_fields(), body=encode_record(msg))


@pytest.mark.parametrize(
    ("code", "expected_code", "word"),
    [
        (pb.OK, ResponseCode.SUCCESS, "CR_SUCCESS"),
        (pb.FAILED_TO_CONSUME_MESSAGE, ResponseCode.SUCCESS, "CR_LATER"),
        (pb.MESSAGE_CORRUPTED, ResponseCode.SUCCESS, "CR_RETURN_NULL"),
        (pb.INTERNAL_ERROR, ResponseCode.SUCCESS, "CR_THROW_EXCEPTION"),
        (pb.NOT_IMPLEMENTED, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, None),
        (pb.UNSUPPORTED, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, None),
    ],
)
def test_a_clients_status_as_the_brokers_answer(code: int, expected_code: int, word: str | None) -> None:
    got_code, remark, result = answer_of("c1", pb.Status(code=code, message="said"))  # type: ignore[arg-type]
    assert got_code == expected_code
    assert (result.consume_result.value if result and result.consume_result else None) == word
    if word is None:
        assert pb.Code.Name(code) in remark  # type: ignore[arg-type]  # the remark names what the client said


async def _relayed(relay: VerifyRelay, cmd: RemotingCommand) -> asyncio.Task[RemotingCommand]:
    task = asyncio.create_task(relay.relay(None, cmd))  # type: ignore[arg-type]  # the connection is not used
    for _ in range(100):
        if relay.pending:
            break
        await asyncio.sleep(0)
    return task


async def test_the_answer_of_the_client_with_the_nonce_is_the_brokers_answer() -> None:
    relay = VerifyRelay()
    out: Out = asyncio.Queue(4)
    relay.attach("c1", out)
    task = await _relayed(relay, _ask())
    sent = out.get_nowait()
    assert sent is not None and sent.WhichOneof("command") == "verify_message_command"
    m = sent.verify_message_command.message
    assert (m.topic.name, m.body, m.system_properties.tag, m.system_properties.message_id) == ("T", b"hello", "TagA",
                                                                                                "ID1")  # fmt: skip
    assert dict(m.user_properties) == {"k": "v"} and not m.system_properties.receipt_handle
    nonce = sent.verify_message_command.nonce
    # another client cannot answer for c1, nor can c1 answer a nonce it was not sent
    ok = pb.Status(code=pb.OK)
    other = svc.TelemetryCommand(status=ok, verify_message_result=svc.VerifyMessageResult(nonce=nonce))
    assert relay.answered("c2", other) is False and not task.done()
    stray = svc.TelemetryCommand(status=ok, verify_message_result=svc.VerifyMessageResult(nonce="x"))
    assert relay.answered("c1", stray) is False
    assert relay.answered("c1", other) is True
    resp = await task
    assert resp.code == ResponseCode.SUCCESS and orjson.loads(resp.body)["consumeResult"] == "CR_SUCCESS"
    assert not relay.pending
    assert relay.answered("c1", other) is False, "a late second answer changes nothing"


async def test_the_nodejs_clients_not_implemented_answer_is_understood() -> None:
    relay = VerifyRelay()
    out: Out = asyncio.Queue(4)
    relay.attach("node", out)
    task = await _relayed(relay, _ask("node"))
    sent = out.get_nowait()
    assert sent is not None
    echo = svc.TelemetryCommand(status=pb.Status(code=pb.NOT_IMPLEMENTED),
                                verify_message_command=svc.VerifyMessageCommand(nonce=sent.verify_message_command.nonce))
    assert relay.answered("node", echo) is True
    resp = await task
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "NOT_IMPLEMENTED" in (resp.remark or "")


async def test_no_stream_no_answer_and_limits() -> None:
    relay = VerifyRelay()
    resp = await relay.relay(None, _ask("gone"))  # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields["reason"] == "CONSUMER_NOT_ONLINE"

    out: Out = asyncio.Queue(4)
    relay.attach("silent", out)
    resp = await relay.relay(None, _ask("silent", timeout_ms=500))  # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields["reason"] == "CLIENT_NO_ANSWER"
    assert not relay.pending, "a verification that timed out is forgotten"

    full: Out = asyncio.Queue(1)
    full.put_nowait(None)
    relay.attach("stuck", full)
    resp = await relay.relay(None, _ask("stuck"))  # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_BUSY, "a client that does not read its stream is not queued for"

    bad = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {"clientId": "silent"}, body=b"junk")
    resp = await relay.relay(None, bad)  # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields["reason"] == "INVALID_HEADER"


async def test_at_most_max_pending_verifications_wait(monkeypatch: Any) -> None:
    monkeypatch.setattr(verify_module, "MAX_PENDING", 2)
    relay = VerifyRelay()
    out: Out = asyncio.Queue(8)
    relay.attach("c1", out)
    waiting = [asyncio.create_task(relay.relay(None, _ask())) for _ in range(2)]  # type: ignore[arg-type]
    for _ in range(100):
        if len(relay.pending) == 2:
            break
        await asyncio.sleep(0)
    resp = await relay.relay(None, _ask())  # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_BUSY
    for t in waiting:
        t.cancel()


def test_a_newer_stream_of_the_client_stays_when_an_older_one_ends() -> None:
    relay = VerifyRelay()
    old: Out = asyncio.Queue(1)
    new: Out = asyncio.Queue(1)
    relay.attach("c1", old)
    relay.attach("c1", new)
    relay.detach("c1", old)
    assert relay.streams["c1"] is new
    relay.detach("c1", new)
    assert "c1" not in relay.streams
