"""Typed results and typed errors of client/api.py, against a fake connection (no sockets)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import HeartbeatData, Subscription
from sievemq.protocol.reasons import (
    REASON_FIELD,
    REFUSED_SUBSCRIPTIONS_FIELD,
    Reason,
    RefusedSubscription,
    encode_refused_subscriptions,
)
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection


class FakeConn:
    """Answers the next request with a prepared response and keeps the request."""

    def __init__(
        self, code: int, remark: str | None = None, fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> None:
        self.answer = (code, remark, fields, body)
        self.sent: list[RemotingCommand] = []

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        self.sent.append(cmd)
        code, remark, fields, body = self.answer
        return cmd.response(code, remark, fields, body)


def conn(*args: Any, **kw: Any) -> Connection:
    return FakeConn(*args, **kw)  # type: ignore[return-value]


def header(queue_id: int = 2) -> SendMessageHeader:
    return SendMessageHeader(producer_group="p", topic="T", queue_id=queue_id, born_timestamp=1)


async def test_a_stored_send_is_a_send_result() -> None:
    fields = {"msgId": "AB", "queueId": 3, "queueOffset": 41, "MSG_REGION": "eu", "TRACE_ON": "false"}
    r = await api.send_request(conn(ResponseCode.FLUSH_DISK_TIMEOUT, "slow disk", fields), header(), b"x")
    assert r == api.SendResult(ResponseCode.FLUSH_DISK_TIMEOUT, "AB", 3, 41, "slow disk", "eu", False)
    r = await api.send_request(conn(ResponseCode.SUCCESS, None, {"msgId": "CD"}), header(queue_id=2), b"x")
    assert (r.queue_id, r.queue_offset, r.region_id, r.trace_on) == (2, 0, "DefaultRegion", True)


async def test_a_refused_send_raises_with_its_code_and_reason() -> None:
    c = conn(ResponseCode.NO_PERMISSION, "read only", {REASON_FIELD: "SOMETHING"})
    with pytest.raises(RemotingError) as e:
        await api.send_request(c, header(), b"x", code=RequestCode.SEND_BATCH_MESSAGE)
    assert (e.value.code, e.value.remark, e.value.reason) == (ResponseCode.NO_PERMISSION, "read only", "SOMETHING")


async def test_a_heartbeat_answer_lists_the_refused_subscriptions() -> None:
    refused = [RefusedSubscription("g", "T", "inconsistent subscription")]
    fields = {
        REASON_FIELD: Reason.SUBSCRIPTION_INCONSISTENT,
        REFUSED_SUBSCRIPTIONS_FIELD: encode_refused_subscriptions(refused),
    }
    r = await api.heartbeat(conn(ResponseCode.SUCCESS, "inconsistent subscription", fields), HeartbeatData("c@1"))
    assert r == api.HeartbeatResult("inconsistent subscription", Reason.SUBSCRIPTION_INCONSISTENT, tuple(refused))
    assert await api.heartbeat(conn(ResponseCode.SUCCESS), HeartbeatData("c@1")) == api.HeartbeatResult()
    with pytest.raises(RemotingError):
        await api.heartbeat(conn(ResponseCode.SYSTEM_ERROR, "bad json"), HeartbeatData("c@1"))


async def test_consumer_ids_are_empty_for_a_group_without_clients_and_raise_otherwise() -> None:
    body = orjson.dumps({"consumerIdList": ["a@1", "b@2"]})
    assert await api.consumer_ids(conn(ResponseCode.SUCCESS, body=body), "g") == ["a@1", "b@2"]
    assert await api.consumer_ids(conn(api.NO_CONSUMER_CODE, "no consumer for this group, g"), "g") == []
    with pytest.raises(RemotingError) as e:
        await api.consumer_ids(conn(ResponseCode.REQUEST_CODE_NOT_SUPPORTED), "g")
    assert e.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_check_client_config_and_filter_registration_raise_refusals_with_reasons() -> None:
    sub = Subscription("T", "a = 1", "SQL92", 1)
    await api.check_client_config(conn(ResponseCode.SUCCESS), "c@1", "g", sub)
    with pytest.raises(RemotingError) as e:
        await api.check_client_config(
            conn(ResponseCode.SYSTEM_ERROR, "no", {REASON_FIELD: Reason.SQL92_DISABLED}), "c", "g", sub
        )
    assert (e.value.code, e.value.reason) == (ResponseCode.SYSTEM_ERROR, Reason.SQL92_DISABLED)

    await api.register_filter_class(conn(ResponseCode.SUCCESS), {"topic": "T"})
    with pytest.raises(RemotingError) as e:
        await api.register_filter_class(
            conn(ResponseCode.SYSTEM_ERROR, None, {REASON_FIELD: Reason.FILTER_NOT_ALLOWED}), {}
        )
    assert (e.value.remark, e.value.reason) == ("", Reason.FILTER_NOT_ALLOWED)
