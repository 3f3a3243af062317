"""The signed content and HMAC-SHA1 signatures, checked against frames real clients sent (captures/)."""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from sievemq.acl.signature import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    RequestSigner,
    request_content,
    signature_matches,
    signature_of,
)
from sievemq.remoting.command import FrameDecoder, RemotingCommand, decode_header, encode

CAPTURES = Path(__file__).resolve().parents[2] / "interop" / "captures" / "client_frames.jsonl"
SECRETS = {"rmqcp": "", "rmq044": "", "ons": "sievemq-dummy-sk"}
"""The capture run's keys: the C++ core signs with empty keys when it has none; ali-ons had dummy ones."""


def _frames() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CAPTURES.read_text().splitlines() if line.strip()]


def _decoded(frame: dict[str, Any]) -> RemotingCommand:
    cmds = FrameDecoder().feed(bytes.fromhex(frame["hex"]))
    assert len(cmds) == 1
    return cmds[0]


@pytest.mark.parametrize("frame", _frames(), ids=lambda f: f"{f['client']}-{f['code']}")
def test_every_captured_signature_verifies(frame: dict[str, Any]) -> None:
    cmd = _decoded(frame)
    secret = SECRETS[frame["client"]]
    content = request_content(cmd.ext_fields, cmd.body)
    assert signature_of(content, secret) == cmd.ext_fields[SIGNATURE]
    mac = hmac.new(secret.encode(), digestmod="sha1")
    assert signature_matches(mac, cmd.ext_fields, cmd.body)
    wrong = hmac.new(b"not-the-secret", digestmod="sha1")
    assert not signature_matches(wrong, cmd.ext_fields, cmd.body)
    if cmd.body:  # the body is signed: change one byte and the signature no longer matches
        assert not signature_matches(mac, cmd.ext_fields, cmd.body[:-1] + bytes([cmd.body[-1] ^ 1]))


def test_a_known_vector() -> None:
    """The C++ core's GET_ROUTEINFO_BY_TOPIC of the capture: AccessKey "", OnsChannel ALIYUN, topic CapTopic."""
    fields = {"AccessKey": "", "OnsChannel": "ALIYUN", "topic": "CapTopic", SIGNATURE: "ignored"}
    assert request_content(fields) == b"ALIYUNCapTopic"
    assert signature_of(b"ALIYUNCapTopic", "") == "+rM97VCcgTfNE+edTFp6UMizq5E="


def test_content_order_is_java_string_order() -> None:
    # U+FF5E sorts before U+10000 by code point, after it by UTF-16 code unit (0xFF5E > 0xD800, Java's order)
    fields = {"\U00010000": "a", "\uff5e": "b", "B": "c", "a": "d"}
    assert request_content(fields) == b"cdab"


def test_the_signer_signs_what_goes_on_the_wire() -> None:
    cmd = RemotingCommand.request(310, {"a": "PG", "b": "TopicA", "d": 4}, b"body")
    RequestSigner("RocketMQ", "12345678", strict=False)(cmd)
    wire = FrameDecoder().feed(encode(cmd))[0]
    assert wire.ext_fields[ACCESS_KEY] == "RocketMQ"
    expected = signature_of(b"RocketMQPGTopicA4body", "12345678")  # AccessKey sorts first
    assert wire.ext_fields[SIGNATURE] == expected
    RequestSigner("RocketMQ", "12345678", strict=False)(cmd)  # signing again (a retry) gives the same signature
    assert cmd.ext_fields[SIGNATURE] == expected


def test_a_strict_signer_still_signs_every_field_the_rocketmq_way() -> None:
    # sievemq's signers add SignedAt, SignNonce and StrictSignature first: RocketMQ's Signature covers them too, so
    # a RocketMQ broker (which signs every field's value) verifies the request as it does any other
    cmd = RemotingCommand.request(310, {"a": "PG", "b": "TopicA", "d": 4}, b"body")
    RequestSigner("RocketMQ", "12345678")(cmd)
    wire = FrameDecoder().feed(encode(cmd))[0]
    assert {"SignedAt", "SignNonce", "StrictSignature"} <= set(wire.ext_fields)
    assert wire.ext_fields[SIGNATURE] == signature_of(request_content(wire.ext_fields, wire.body), "12345678")
    first = dict(wire.ext_fields)
    RequestSigner("RocketMQ", "12345678")(cmd)  # a retry is signed anew: another nonce
    assert cmd.ext_fields["SignNonce"] != first["SignNonce"]


def test_unique_key_query_flag_is_accepted_signed_or_not() -> None:
    mac = hmac.new(b"12345678", digestmod="sha1")
    fields = {"topic": "T", "key": "k", ACCESS_KEY: "RocketMQ"}
    without = signature_of(request_content(fields), "12345678")
    signed = {**fields, UNIQUE_KEY_QUERY: "true"}
    with_flag = signature_of(request_content(signed), "12345678")
    assert signature_matches(mac, {**signed, SIGNATURE: without}, b"")  # RocketMQ's broker leaves it out
    assert signature_matches(mac, {**signed, SIGNATURE: with_flag}, b"")  # a Java client signs it


def test_secret_never_in_repr() -> None:
    assert "12345678" not in repr(RequestSigner("RocketMQ", "12345678"))


def test_header_json_numbers_and_booleans_are_signed_as_text() -> None:
    header = b'{"code":36,"extFields":{"AccessKey":"ak","offset":12,"unitMode":false},"flag":0,"opaque":1}'
    cmd = decode_header(header, 0)  # type: ignore[arg-type]
    assert request_content(cmd.ext_fields) == b"ak12false"
