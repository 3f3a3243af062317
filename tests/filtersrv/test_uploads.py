"""Uploaded source: refused when uploads are off, refused without a valid signature when on, accepted with one."""

from __future__ import annotations

import orjson

from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.protocol.upload_signing import ACCESS_KEY_FIELD as ACCESS_KEY
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import ACCOUNT, SECRET, FilterCluster, open_conn
from tests.filtersrv.helpers import BIG_EU_SOURCE as SOURCE
from tests.filtersrv.helpers import drain, register, send_orders, signed

TOPIC = "Uploads"
GROUP = "uploaders"
ALL_B = "def OnlyB(msg):\n    return msg.tags == 'B'\n"


async def test_uploads(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    off = fc.filtersrv(broker, name="fs-off")
    on = fc.filtersrv(
        broker,
        "--client-upload-filter-enable", "true",
        "--upload-accounts", f"{ACCOUNT},other",
        name="fs-on",
    )  # fmt: skip
    bconn = await open_conn(conns, broker)
    await send_orders(bconn, TOPIC, range(40), queues=1)

    # Uploads off (the default): refused even with a valid signature.
    conn_off = await open_conn(conns, off)
    resp = await register(
        conn_off,
        GROUP,
        TOPIC,
        "BigEuOrders",
        SOURCE,
        extra=signed(ACCOUNT, SECRET, GROUP, TOPIC, "BigEuOrders", SOURCE, to=off.addr),
    )
    assert (resp.code, resp.ext_fields.get(REASON_FIELD)) == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED)
    assert "clientUploadFilterEnable=false" in (resp.remark or ""), resp.remark  # names the setting

    # Uploads on but no secret configured: nothing can verify.
    conn_on = await open_conn(conns, on)
    resp = await register(
        conn_on,
        GROUP,
        TOPIC,
        "BigEuOrders",
        SOURCE,
        extra=signed(ACCOUNT, SECRET, GROUP, TOPIC, "BigEuOrders", SOURCE, to=on.addr),
    )
    assert (resp.code, resp.ext_fields.get(REASON_FIELD)) == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED)
    assert "no uploadSecret" in (resp.remark or ""), resp.remark  # names the missing setting


async def test_signed_uploads(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(
        broker,
        "--client-upload-filter-enable", "true",
        "--upload-secret", SECRET,
        "--upload-accounts", ACCOUNT,
    )  # fmt: skip
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_orders(bconn, TOPIC, range(40), queues=1)
    name = "BigEuOrders"

    def sign(*args: str) -> dict[str, str]:
        return signed(*args, to=fs.addr)

    refusals = {
        "no signature": {},
        "no account": {k: v for k, v in sign(ACCOUNT, SECRET, GROUP, TOPIC, name, SOURCE).items() if k != ACCESS_KEY},
        "unknown account": sign("mallory", SECRET, GROUP, TOPIC, name, SOURCE),
        "wrong secret": sign(ACCOUNT, "guess", GROUP, TOPIC, name, SOURCE),
        "signed for another group": sign(ACCOUNT, SECRET, "other", TOPIC, name, SOURCE),
        "signed other source": sign(ACCOUNT, SECRET, GROUP, TOPIC, name, ALL_B),
    }
    for why, extra in refusals.items():
        resp = await register(fconn, GROUP, TOPIC, name, SOURCE, extra=extra)
        refusal = (resp.code, resp.ext_fields.get(REASON_FIELD))
        assert refusal == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED), (why, refusal, resp.remark)
    # Nothing was registered by those attempts.
    p = await drain_or_error(fconn)
    assert p == "not registered"

    # Signed, but not Python (a 4.x Java class filter), or a wrong CRC: clear errors.
    java = "public class BigEuOrders implements MessageFilter { }"
    resp = await register(fconn, GROUP, TOPIC, name, java, extra=sign(ACCOUNT, SECRET, GROUP, TOPIC, name, java))
    assert (resp.code, resp.ext_fields.get(REASON_FIELD)) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_LOAD_FAILED)
    assert "must be Python" in (resp.remark or ""), resp.remark  # what a 4.x user of Java filters is told
    resp = await register(
        fconn, GROUP, TOPIC, name, SOURCE, crc=12345, extra=sign(ACCOUNT, SECRET, GROUP, TOPIC, name, SOURCE)
    )
    assert (resp.code, resp.ext_fields.get(REASON_FIELD)) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_INVALID)
    assert "classCRC 12345" in (resp.remark or ""), resp.remark  # names the field and the value

    # Signed and valid: accepted, and the consumer gets exactly the matches.
    resp = await register(fconn, GROUP, TOPIC, name, SOURCE, extra=sign(ACCOUNT, SECRET, GROUP, TOPIC, name, SOURCE))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    msgs, _ = await drain(fconn, GROUP, TOPIC, 0)
    assert [orjson.loads(m.body)["id"] for m in msgs] == [10, 15, 30, 35]

    # Replacing the function for the group (a new CRC) takes effect for the next pull.
    resp = await register(
        fconn, GROUP, TOPIC, "OnlyB", ALL_B, extra=sign(ACCOUNT, SECRET, GROUP, TOPIC, "OnlyB", ALL_B)
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    msgs, _ = await drain(fconn, GROUP, TOPIC, 0)
    assert [orjson.loads(m.body)["id"] for m in msgs] == list(range(1, 40, 2))


async def drain_or_error(conn: Connection) -> str:
    """``not registered`` when the filter server has no function for (TOPIC, GROUP)."""
    from tests.filtersrv.helpers import class_pull

    p = await class_pull(conn, GROUP, TOPIC, 0, 0)
    if (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_NOT_REGISTERED):
        return "not registered"
    return f"[{p.code}] {p.remark}"
