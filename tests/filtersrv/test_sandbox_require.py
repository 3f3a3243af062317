"""``sandboxRequire`` with real filter servers: a missing layer (here turned off with ``sandboxSkip``) keeps uploads
off under "strict" and says why (log, status, refusal), named functions keep working, and "basic" accepts it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sievemq.cli.filtersrv import fetch_status, print_status
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import ACCOUNT, SECRET, FilterCluster, open_conn
from tests.filtersrv.helpers import drain, is_big_eu, register, send_orders, signed, until
from tests.support.procs import free_port, wait_port

TOPIC, GROUP = "Required", "requirers"
SOURCE = "def OnlyB(msg):\n    return msg.tags == 'B'\n"
UPLOADS = ("--client-upload-filter-enable", "true", "--upload-secret", SECRET, "--upload-accounts", ACCOUNT)


async def test_strict_keeps_uploads_off_without_every_layer(
    fc: FilterCluster, conns: list[Connection], capsys: pytest.CaptureFixture[str]
) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    await send_orders(bconn, TOPIC, range(20), queues=1)
    strict = fc.filtersrv(broker, *UPLOADS, "--sandbox-skip", "landlock,netns", name="fs-strict")
    basic = fc.filtersrv(broker, *UPLOADS, "--sandbox-skip", "landlock,netns", "--sandbox-require", "basic",
                         name="fs-basic")  # fmt: skip

    st = await fetch_status(strict.addr)
    sandbox = st["workers"]["sandbox"]
    assert "landlock" not in sandbox["active"] and sandbox["missing"]["landlock"] == "skipped (sandboxSkip)", sandbox
    assert st["sandboxRequire"] == "strict" and st["uploadsEnabled"] is False, st
    assert "landlock" in st["uploadsRefused"] and "netns" in st["uploadsRefused"], st["uploadsRefused"]
    print_status(st)
    shown = capsys.readouterr().out
    assert "sandbox (sandboxRequire strict): active" in shown and "landlock: skipped" in shown, shown

    async def logged() -> bool:
        return "uploads stay OFF" in strict.log() and "filter worker sandbox: active" in strict.log()

    await until(logged, what="the sandbox lines in the log")

    # An upload is refused with the reason; a named function from the operator's module still runs.
    conn = await open_conn(conns, strict)
    resp = await register(conn, GROUP, TOPIC, "OnlyB", SOURCE,
                          extra=signed(ACCOUNT, SECRET, GROUP, TOPIC, "OnlyB", SOURCE, to=strict.addr))  # fmt: skip
    assert resp.code == ResponseCode.NO_PERMISSION and "landlock" in (resp.remark or ""), resp.remark
    assert resp.ext_fields.get(REASON_FIELD) == Reason.FILTER_NOT_ALLOWED
    assert (await register(conn, GROUP, TOPIC, "shop.filters:big_eu_orders")).code == ResponseCode.SUCCESS
    msgs, _ = await drain(conn, GROUP, TOPIC, 0)
    assert [orjson.loads(m.body)["id"] for m in msgs] == [i for i in range(20) if is_big_eu(i)]

    # "basic" needs only no_new_privs, seccomp and rlimits: the same sandbox accepts uploads.
    st = await fetch_status(basic.addr)
    assert st["uploadsEnabled"] is True and st["uploadsRefused"] == "", st
    conn = await open_conn(conns, basic)
    resp = await register(conn, GROUP, TOPIC, "OnlyB", SOURCE,
                          extra=signed(ACCOUNT, SECRET, GROUP, TOPIC, "OnlyB", SOURCE, to=basic.addr))  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    msgs, _ = await drain(conn, GROUP, TOPIC, 0)
    assert [orjson.loads(m.body)["id"] for m in msgs] == list(range(1, 20, 2))


async def test_a_filter_server_that_is_not_root_keeps_uploads_off(tmp_path: Path) -> None:
    """Started as uid 1000 (in a user namespace): its workers cannot switch user, so "strict" keeps uploads off."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) to start a filter server as another user")
    port = free_port()
    cmd = [unshare, "--user", "--map-user=1000", "--map-group=1000", sys.executable, "-m", "sievemq.cli",
           "filtersrv", "--listen-port", str(port), "--broker", "127.0.0.1:1", *UPLOADS]  # fmt: skip
    log = tmp_path / "fs.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            wait_port(port, proc=proc)
        except RuntimeError:
            pytest.skip(f"no filter server in a user namespace here: {log.read_text()[-500:]}")
        st = await fetch_status(f"127.0.0.1:{port}")
        sandbox = st["workers"]["sandbox"]
        print(f"as uid 1000: active {sandbox['active']}, missing {sandbox['missing']}")
        assert "user" in sandbox["missing"] and "not root" in sandbox["missing"]["user"], sandbox
        assert {"seccomp", "no_new_privs", "rlimits"} <= set(sandbox["active"]), sandbox
        assert st["uploadsEnabled"] is False and "user" in st["uploadsRefused"], st
    finally:
        proc.kill()
        proc.wait()
