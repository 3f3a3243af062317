"""``sievemq message verify`` (CONSUME_MESSAGE_DIRECTLY 309, docs/admin.md §8) against a real ``sievemq dev`` with
sievemq's PushConsumer: the listener runs on the one message and its verdict comes back; offsets do not move;
unknown clients, groups without consumers, slow listeners and records forged inside a body are clear refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import orjson
import pytest

from sievemq import ConsumeResult, Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.admin.messages import show
from sievemq.admin.progress import group_progress
from sievemq.protocol.consume_directly import DirectlyHeader
from sievemq.protocol.message import encode_record
from sievemq.protocol.msgid import make_offset_msg_id, parse_offset_msg_id
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.client.conftest import eventually, ready, start_dev
from tests.integration.test_admin_api import _fill
from tests.integration.test_cli import run_cli
from tests.support.procs import Proc

_n = iter(range(1, 10_000))


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    proc = start_dev(tmp_path_factory.mktemp("verify-dev"))
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture
def namesrv(dev: Proc) -> str:
    return str(dev.extra["namesrv"])


@pytest.fixture
async def admin(namesrv: str) -> AsyncIterator[AdminClient]:
    async with AdminClient(namesrv) as a:
        yield a


class Listener:
    """Records what it got; answers by the body: ``later`` RECONSUME_LATER, ``boom`` raises, ``slow`` sleeps 3 s."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        self.bodies.extend(m.body for m in msgs)
        body = msgs[0].body
        if body == b"boom":
            raise ValueError("the listener fails on purpose")
        if body == b"slow":
            await asyncio.sleep(3.0)
        return ConsumeResult.RECONSUME_LATER if body == b"later" else ConsumeResult.SUCCESS


async def _started(namesrv: str, group: str, topic: str) -> tuple[PushConsumer, Listener]:
    consumer = PushConsumer(namesrv, group, consume_from="first", persist_interval=0.2)
    consumer.subscribe(topic)
    got = Listener()
    consumer.listener(got)
    await consumer.start()
    await ready(consumer, topic)
    return consumer, got


async def verify_json(namesrv: str, *args: str) -> tuple[int, dict[str, object]]:
    rc, out, err = await run_cli("message", "verify", *args, "--namesrv", namesrv, "--json")
    assert out, f"no JSON (exit {rc}): {err}"
    doc = orjson.loads(out)
    assert isinstance(doc, dict)
    return rc, doc


async def test_the_listener_consumes_the_message_again_and_offsets_stay(namesrv: str, admin: AdminClient) -> None:
    n = next(_n)
    topic, group = f"VerifyT{n}", f"verify-g{n}"
    ids = await _fill(namesrv, topic, ["first", "later", "boom"])
    consumer, got = await _started(namesrv, group, topic)
    try:
        await eventually(lambda: b"first" in got.bodies and b"boom" in got.bodies, what="consumed once")

        async def committed() -> bool:  # each message done (CR_LATER and a failure go to the retry topic)
            queues = [q for q in (await group_progress(admin, group)).queues if q.topic == topic]
            return bool(queues) and all(q.lag == 0 for q in queues)

        await eventually(committed, timeout=15, what="the group's offsets at the end of the topic")
        before = [(q.queue_id, q.consumer_offset) for q in (await group_progress(admin, group)).queues
                  if q.topic == topic]  # fmt: skip
        seen = len(got.bodies)

        rc, doc = await verify_json(namesrv, ids[0], "--group", group, "--topic", topic)
        assert rc == 0 and doc["ok"] is True, doc
        result = doc["result"]
        assert isinstance(result, dict) and result["consumeResult"] == "CR_SUCCESS", doc
        assert doc["clientId"] == consumer.client_id and doc["topic"] == topic
        assert got.bodies[seen:] == [b"first"], "the listener ran on exactly that message, once"

        rc, doc = await verify_json(namesrv, ids[1], "--group", group)
        assert rc == 1 and doc["ok"] is False and doc["result"]["consumeResult"] == "CR_LATER", doc  # type: ignore[index]
        rc, doc = await verify_json(namesrv, ids[2], "--group", group)
        r = doc["result"]
        assert rc == 1 and isinstance(r, dict) and r["consumeResult"] == "CR_THROW_EXCEPTION", doc
        assert "the listener fails on purpose" in str(r["remark"])

        # people's output: the verdict in words, exit 0
        rc, out, err = await run_cli("message", "verify", ids[0], "--group", group, "--namesrv", namesrv)
        assert rc == 0 and f"consumer {consumer.client_id} of group {group} answered CR_SUCCESS" in out, (out, err)

        after = [(q.queue_id, q.consumer_offset) for q in (await group_progress(admin, group)).queues
                 if q.topic == topic]  # fmt: skip
        assert after == before, "verifying moves no offset"
    finally:
        await consumer.close()


async def test_refusals_say_why(namesrv: str) -> None:
    n = next(_n)
    topic, group = f"VerifyR{n}", f"verify-r{n}"
    ids = await _fill(namesrv, topic, ["x", "slow"])
    consumer, got = await _started(namesrv, group, topic)
    try:
        await eventually(lambda: b"x" in got.bodies and b"slow" in got.bodies, timeout=15.0, what="consumed once")
        rc, doc = await verify_json(namesrv, ids[0], "--group", group, "--client", "192.0.2.1@nobody")
        err = doc["error"]
        assert rc == 1 and isinstance(err, dict), doc
        assert (err["code"], err["reason"]) == (ResponseCode.SYSTEM_ERROR, "CONSUMER_NOT_ONLINE"), doc
        assert consumer.client_id in str(err["message"]), "the refusal lists who is online"

        rc, doc = await verify_json(namesrv, ids[1], "--group", group, "--timeout", "1")
        err = doc["error"]
        assert rc == 1 and isinstance(err, dict) and err["reason"] == "CLIENT_NO_ANSWER", doc
    finally:
        await consumer.close()
    # nobody online: said so, and an unknown group is not mistaken for an idle one
    rc, out, err = await run_cli("message", "verify", ids[0], "--group", group, "--namesrv", namesrv)
    assert rc == 1 and "no consumer online" in err, (out, err)
    rc, out, err = await run_cli("message", "verify", ids[0], "--group", f"never-{n}", "--namesrv", namesrv)
    assert rc == 1 and "does not exist" in err, (out, err)


async def test_a_record_forged_inside_a_body_is_not_passed_on(namesrv: str, admin: AdminClient) -> None:
    n = next(_n)
    topic, group = f"VerifyF{n}", f"verify-f{n}"
    forged = encode_record(MessageExt(topic=f"Victim{n}", body=b"forged", queue_id=0))
    ids = await _fill(namesrv, topic, ["cover"])
    view = (await show(admin, ids[0], topic)).messages[0]
    consumer, got = await _started(namesrv, group, topic)
    try:
        await eventually(lambda: b"cover" in got.bodies, what="consumed once")
        # a message whose body is a well-formed stored record: its offset is not a record's
        async with Producer(namesrv, f"forger-{n}") as p:
            sent = await p.send(Message(topic, b"pad" + forged))
        host, port, phy = parse_offset_msg_id(sent.offset_msg_id)
        raw = (await admin.call(f"{host}:{port}", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})).body
        inside = phy + raw.index(forged)
        await eventually(lambda: b"pad" + forged in got.bodies, what="the forger's message consumed")
        seen = len(got.bodies)
        header = DirectlyHeader(group, consumer.client_id, make_offset_msg_id(host, port, inside), 3000)
        resp = await admin.pool.request(f"{host}:{port}", RemotingCommand.request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_fields()), 10.0)  # fmt: skip
        assert resp.code == ResponseCode.SYSTEM_ERROR and "no message at commit-log offset" in (resp.remark or "")
        # the genuine record's offset is accepted
        header = DirectlyHeader(group, consumer.client_id, view.msg.offset_msg_id, 3000)
        resp = await admin.pool.request(f"{host}:{port}", RemotingCommand.request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_fields()), 10.0)  # fmt: skip
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert got.bodies[seen:] == [b"cover"], "only the genuine message reached the listener"
    finally:
        await consumer.close()
