"""Machine-readable refusals: a RemotingError's reason travels in the ``reason`` field and comes back out of it."""

from __future__ import annotations

import asyncio

from sievemq.errors import RemotingError
from sievemq.protocol.reasons import (
    REASON_FIELD,
    REFUSED_SUBSCRIPTIONS_FIELD,
    Reason,
    RefusedSubscription,
    decode_refused_subscriptions,
    encode_refused_subscriptions,
    reason_of,
)
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.server import ProcessorTable


def test_reason_of_known_unknown_and_absent() -> None:
    assert reason_of({REASON_FIELD: "FILTER_DISABLED"}) is Reason.FILTER_DISABLED
    assert reason_of({REASON_FIELD: "SOMETHING_NEWER"}) is None
    assert reason_of({}) is None


def test_refused_subscriptions_round_trip_and_tolerate_garbage() -> None:
    refused = [RefusedSubscription("g", "T", "use 'TagA'"), RefusedSubscription("h", "U", 'quote " and \n')]
    fields = {REFUSED_SUBSCRIPTIONS_FIELD: encode_refused_subscriptions(refused)}
    assert decode_refused_subscriptions(fields) == refused
    assert decode_refused_subscriptions({REFUSED_SUBSCRIPTIONS_FIELD: "not json"}) == []
    assert decode_refused_subscriptions({REFUSED_SUBSCRIPTIONS_FIELD: '{"a": 1}'}) == []
    assert decode_refused_subscriptions({}) == []


def test_a_processors_reason_reaches_the_response_and_back() -> None:
    async def refuse(conn: object, cmd: RemotingCommand) -> RemotingCommand:
        raise RemotingError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "words for people", Reason.SUBSCRIPTION_INCONSISTENT)

    async def plain(conn: object, cmd: RemotingCommand) -> RemotingCommand:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, "no reason")

    table = ProcessorTable("test")
    table.register(1, refuse)  # type: ignore[arg-type]
    table.register(2, plain)  # type: ignore[arg-type]
    resp = asyncio.run(table.handle(None, RemotingCommand.request(1)))  # type: ignore[arg-type]
    assert resp is not None and resp.ext_fields == {REASON_FIELD: "SUBSCRIPTION_INCONSISTENT"}
    err = RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    assert (err.code, err.remark, err.reason) == (
        ResponseCode.SUBSCRIPTION_NOT_EXIST,
        "words for people",
        Reason.SUBSCRIPTION_INCONSISTENT,
    )
    resp = asyncio.run(table.handle(None, RemotingCommand.request(2)))  # type: ignore[arg-type]
    assert resp is not None and REASON_FIELD not in resp.ext_fields
    assert RemotingError.from_response(resp.code, resp.remark, resp.ext_fields).reason is None
