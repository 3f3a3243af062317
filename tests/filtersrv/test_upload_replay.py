"""Signed uploads cannot be replayed nor reinterpreted (real filter servers): the same request twice, to another
filter server, too old or too new, fields shifted between group, topic and name, and malformed or non-ASCII
signature fields are all refused with NO_PERMISSION and FILTER_NOT_ALLOWED (never SYSTEM_ERROR)."""

from __future__ import annotations

import time

from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.protocol.upload_signing import NONCE_FIELD, SIGNATURE_FIELD, TIMESTAMP_FIELD
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import ACCOUNT, SECRET, FilterCluster, open_conn
from tests.filtersrv.helpers import register, signed

GROUP, TOPIC, NAME = "replayers", "Replays", "OnlyB"
SOURCE = "def OnlyB(msg):\n    return msg.tags == 'B'\n"


def refused(resp: RemotingCommand, why: str, text: str) -> None:
    """``resp`` is a policy refusal whose remark contains ``text``."""
    remark = resp.remark or ""
    assert resp.code == ResponseCode.NO_PERMISSION, (why, resp.code, remark)
    assert resp.ext_fields.get(REASON_FIELD) == Reason.FILTER_NOT_ALLOWED, (why, resp.ext_fields)
    assert text in remark, (why, remark)


async def test_replayed_and_reinterpreted_uploads_are_refused(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    args = ("--client-upload-filter-enable", "true", "--upload-secret", SECRET, "--upload-accounts", ACCOUNT,
            "--upload-window-seconds", "300", "--sandbox-require", "basic")  # fmt: skip
    fs = fc.filtersrv(broker, *args, name="fs-a")
    other = fc.filtersrv(broker, *args, name="fs-b")
    conn = await open_conn(conns, fs)
    other_conn = await open_conn(conns, other)

    # A signed upload is accepted once; the very same request again is a replay.
    fields = signed(ACCOUNT, SECRET, GROUP, TOPIC, NAME, SOURCE, to=fs.addr)
    first = await register(conn, GROUP, TOPIC, NAME, SOURCE, extra=fields)
    assert first.code == ResponseCode.SUCCESS, first.remark
    refused(await register(conn, GROUP, TOPIC, NAME, SOURCE, extra=fields), "same request twice", "already used")
    # Sent to another filter server (sharing the secret): signed for the first one, so it does not verify there.
    refused(await register(other_conn, GROUP, TOPIC, NAME, SOURCE, extra=fields), "other server", "does not verify")

    # Outside the window, in either direction (and a fresh nonce does not help).
    now = int(time.time() * 1000)
    for why, ts, text in (("old", now - 301_000, "s old"), ("future", now + 301_000, "in the future")):
        late = signed(ACCOUNT, SECRET, GROUP, TOPIC, NAME, SOURCE, to=fs.addr, timestamp_ms=ts)
        refused(await register(conn, GROUP, TOPIC, NAME, SOURCE, extra=late), why, text)

    # Fields shifted between group, topic and name: the plain concatenation is the same, the signature is not.
    slides = [
        (("GroupAB", "Topic", "F"), ("GroupA", "BTopic", "F")),  # group -> topic
        (("Group", "TopicSl", "ideF"), ("Group", "TopicSlide", "F")),  # name -> topic
        (("Group", "Topic", "F"), ("GroupT", "opic", "F")),  # topic -> group
    ]
    for (sg, st, sn), (g, t, n) in slides:
        assert sg + st + sn == g + t + n
        src = f"def {n}(msg):\n    return True\n"
        moved = signed(ACCOUNT, SECRET, sg, st, sn, src, to=fs.addr)
        refused(await register(conn, g, t, n, src, extra=moved), f"slide {sg}/{st}/{sn}", "does not verify")
    # Malformed or non-ASCII fields: a clear refusal, not a SYSTEM_ERROR.
    good = signed(ACCOUNT, SECRET, GROUP, TOPIC, NAME, SOURCE, to=fs.addr)
    bad_fields = {
        "non-ASCII signature": ({SIGNATURE_FIELD: "é" * 64}, "malformed"),
        "non-ASCII hex digits": ({SIGNATURE_FIELD: "٣" * 64}, "malformed"),
        "short signature": ({SIGNATURE_FIELD: good[SIGNATURE_FIELD][:-1]}, "malformed"),
        "no signature": ({SIGNATURE_FIELD: ""}, "missing"),
        "non-ASCII timestamp": ({TIMESTAMP_FIELD: "\uff11" * 13}, TIMESTAMP_FIELD),  # fullwidth digit one
        "negative timestamp": ({TIMESTAMP_FIELD: "-" + good[TIMESTAMP_FIELD]}, TIMESTAMP_FIELD),
        "non-ASCII nonce": ({NONCE_FIELD: "ü" * 32}, NONCE_FIELD),
        "short nonce": ({NONCE_FIELD: "abc"}, NONCE_FIELD),
    }
    for why, (change, text) in bad_fields.items():
        refused(await register(conn, GROUP, TOPIC, NAME, SOURCE, extra={**good, **change}), why, text)
    # None of that consumed the good request's nonce: it is accepted (the same function: nothing reloads).
    assert (await register(conn, GROUP, TOPIC, NAME, SOURCE, extra=good)).code == ResponseCode.SUCCESS
