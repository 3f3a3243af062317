"""No sockets: the upload signature's encoding, the timestamp/nonce window, the sandbox-layer decisions, and how
workers name the errors of uploaded code (a real worker process, over its pipes)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import struct
from pathlib import Path

import pytest

from sievemq.errors import ConfigError, RemotingError
from sievemq.filtersrv.config import load_filtersrv_config
from sievemq.filtersrv.layers import (
    LAYERS,
    REQUIREMENTS,
    LayerReport,
    missing_for,
    parse_skip,
    skip_is_valid,
    upload_refusal,
)
from sievemq.filtersrv.lockdown import readable_dirs
from sievemq.filtersrv.registry import FunctionSpec, RegistrationPolicy
from sievemq.filtersrv.replay import NonceWindow
from sievemq.filtersrv.workers import ANY_FUNCTION, FilterFailure, PoolSettings, WorkerPool
from sievemq.protocol.reasons import Reason
from sievemq.protocol.upload_signing import (
    NONCE_FIELD,
    SIGNATURE_FIELD,
    SIGNING_TAG,
    TIMESTAMP_FIELD,
    Upload,
    filter_class_crc,
    parse_nonce,
    parse_timestamp,
    sign_upload,
    signed_fields,
    verify_upload,
)
from sievemq.remoting.codes import ResponseCode
from tests.filtersrv.test_units import records

FS = "127.0.0.1:4001"
T0 = 1_700_000_000.0


def up(**changes: object) -> Upload:
    """An upload; ``changes`` replace fields."""
    base = Upload("shop-team", "g", "T", "F", FS, int(T0 * 1000), "n" * 32, b"def F(msg):\n    return True\n")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ signature
def test_signed_content_is_each_field_length_prefixed() -> None:
    u = up(source=b"src")
    parts = [SIGNING_TAG, b"shop-team", b"g", b"T", b"F", FS.encode(), str(int(T0 * 1000)).encode(), b"n" * 32, b"src"]
    assert u.content() == b"".join(struct.pack(">I", len(p)) + p for p in parts)
    expected = hmac.new(b"k", u.content(), hashlib.sha256).hexdigest()
    assert sign_upload("k", u) == expected and verify_upload("k", u, expected.upper())


def test_fields_cannot_slide_into_each_other() -> None:
    """Pairs whose fields joined (plainly or with newlines, as the first scheme did) are equal sign differently."""
    pairs = [
        (up(group="ab", topic="c"), up(group="a", topic="bc")),
        (up(topic="Sl", class_name="ideF"), up(topic="Slide", class_name="F")),
        (up(group="g\nT", topic="F"), up(group="g", topic="T\nF")),  # the same "\n"-joined text
        (up(class_name="F", source=b"x"), up(class_name="Fx", source=b"")),
        (up(timestamp_ms=12, nonce="3" * 16), up(timestamp_ms=123, nonce="3" * 15)),
        (up(access_key="ab", group="c"), up(access_key="a", group="bc")),
        (up(filter_server="127.0.0.1:40", timestamp_ms=1), up(filter_server="127.0.0.1:4", timestamp_ms=1)),
    ]
    for a, b in pairs:
        assert a.content() != b.content(), (a, b)
        assert not verify_upload("k", b, sign_upload("k", a)), (a, b)


def test_signature_form() -> None:
    u = up()
    sig = sign_upload("k", u)
    for bad in ("", sig[:-1], sig + "0", "é" * 64, "\u0663" * 64, " " + sig[1:], sig[:-1] + "g"):
        assert not verify_upload("k", u, bad), bad
    assert not verify_upload("", u, sign_upload("", u))  # no secret: nothing verifies
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    for bad in ("", "-1", "1e3", "\uff11" * 3, "1" * 17, " 12"):
        assert parse_timestamp(bad) is None, bad
    assert parse_nonce("a" * 16) and parse_nonce("A-_9" * 16)
    for bad in ("a" * 15, "a" * 65, "ü" * 20, "a b" * 8):
        assert parse_nonce(bad) is None, bad


def test_client_fields_are_fresh_each_time() -> None:
    a = signed_fields("shop-team", "k", "g", "T", "F", "src", FS)
    b = signed_fields("shop-team", "k", "g", "T", "F", "src", FS)
    assert a[NONCE_FIELD] != b[NONCE_FIELD] and a[SIGNATURE_FIELD] != b[SIGNATURE_FIELD]
    assert len(a[NONCE_FIELD]) == 32 and a[TIMESTAMP_FIELD].isdigit()


# ------------------------------------------------------------------------------------------------ window
class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_timestamp_window() -> None:
    w = NonceWindow(300.0, clock=Clock())
    ms = int(T0 * 1000)
    assert w.stale(ms) is None and w.stale(ms - 300_000) is None and w.stale(ms + 300_000) is None
    assert "301 s old" in (w.stale(ms - 301_000) or "")
    assert "301 s in the future" in (w.stale(ms + 301_000) or "")


def test_nonces_are_single_use_and_bounded() -> None:
    clock = Clock()
    w = NonceWindow(300.0, max_nonces=3, clock=clock)
    ms = int(T0 * 1000)
    assert w.claim("a", "n1", ms) is None
    assert "already used" in (w.claim("a", "n1", ms) or "")
    assert w.claim("b", "n1", ms) is None  # per account
    assert w.claim("a", "n2", ms + 100_000) is None
    assert "more than 3 uploads" in (w.claim("a", "n3", ms) or "")  # full: refused, nothing evicted
    assert "already used" in (w.claim("a", "n1", ms) or "")
    clock.now = T0 + 301  # n1 (both) left the window; n2 (signed 100 s later) has not
    assert w.claim("a", "n4", int(clock.now * 1000)) is None and len(w) == 2
    assert "already used" in (w.claim("a", "n2", ms + 100_000) or "")
    clock.now = T0 + 401
    assert w.claim("a", "n5", int(clock.now * 1000)) is None and len(w) == 2


def test_policy_refuses_replays_old_and_malformed_signatures() -> None:
    clock = Clock()
    pol = RegistrationPolicy(upload_enabled=True, secret="k", accounts=("a",), nonces=NonceWindow(300.0, clock=clock))
    src = b"def F(msg):\n    return True\n"
    crc = filter_class_crc(src)
    ms = int(T0 * 1000)
    fields = signed_fields("a", "k", "g", "T", "F", src, FS, timestamp_ms=ms)
    assert pol.spec_for("g", "T", "F", crc, src, fields, FS) == FunctionSpec("source", "F", src.decode(), crc, "a")
    cases = {
        "replayed": (fields, "already used"),
        "old": (signed_fields("a", "k", "g", "T", "F", src, FS, timestamp_ms=ms - 400_000), "s old"),
        "non-ASCII": ({**fields, SIGNATURE_FIELD: "ä" * 64}, "malformed"),
        "other server": (signed_fields("a", "k", "g", "T", "F", src, "127.0.0.1:4002", timestamp_ms=ms), "verify"),
    }
    for why, (f, text) in cases.items():
        with pytest.raises(RemotingError) as ei:
            pol.spec_for("g", "T", "F", crc, src, f, FS)
        e = ei.value
        assert (e.code, e.reason) == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED), (why, e.code, e.remark)
        assert text in (e.remark or ""), (why, e.remark)


# ------------------------------------------------------------------------------------------------ layers
def test_layer_requirements() -> None:
    assert REQUIREMENTS["strict"] == LAYERS and set(REQUIREMENTS["basic"]) == {"rlimits", "no_new_privs", "seccomp"}
    full = LayerReport(LAYERS)
    assert missing_for("strict", LAYERS) == [] and upload_refusal("strict", full) is None
    no_user = LayerReport(tuple(n for n in LAYERS if n != "user"), {"user": "not root"})
    assert missing_for("strict", no_user.active) == ["user"]
    text = upload_refusal("strict", no_user) or ""
    assert "user: not root" in text and 'sandboxRequire = "basic"' in text
    assert upload_refusal("basic", no_user) is None
    bare = LayerReport(("rlimits",), {"seccomp": "no libseccomp", "no_new_privs": "EINVAL"})
    assert missing_for("basic", bare.active) == ["no_new_privs", "seccomp"]
    assert "seccomp: no libseccomp" in (upload_refusal("basic", bare) or "")


def test_layer_reports_from_workers() -> None:
    for garbage in (None, "x", [], {"active": "seccomp"}, {"active": ["made-up"]}):
        assert LayerReport.from_json(garbage).active == (), garbage
    r = LayerReport.from_json({"active": ["seccomp", "rlimits", "bogus"], "missing": {"user": "not root"}})
    assert r.active == ("rlimits", "seccomp") and r.missing["user"] == "not root"
    assert r.missing["landlock"] == "not reported"
    other = LayerReport(("rlimits", "seccomp", "landlock"))
    assert r.weaker_than(other) == ["landlock"] and other.weaker_than(r) == []
    assert r.common(other).active == ("rlimits", "seccomp")


def test_skip_setting(tmp_path: Path) -> None:
    assert parse_skip(" landlock, netns ") == {"landlock", "netns"} and skip_is_valid("")
    assert not skip_is_valid("rlimits") and not skip_is_valid("landlok")
    cfg = load_filtersrv_config(None, {"SIEVEMQ_FILTERSRV_SANDBOX_SKIP": "seccomp,user"})
    assert cfg.sandbox_skipped == {"seccomp", "user"} and cfg.sandbox_require == "strict"
    for bad in ({"sandbox_skip": "rlimits"}, {"sandbox_require": "lax"}, {"sandbox_user": "no body"}):
        with pytest.raises(ConfigError):
            load_filtersrv_config(None, {}, bad)


def test_readable_dirs(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    paths = [str(tmp_path / "a" / "b"), str(tmp_path / "a"), str(tmp_path / "missing"), str(tmp_path / "ab"), ""]
    assert readable_dirs(paths) == (str(tmp_path / "a"),)


# ------------------------------------------------------------------------------------------------ errors
def src(name: str, body: str) -> FunctionSpec:
    text = f"def {name}(msg):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return FunctionSpec("source", name, text, filter_class_crc(text))


async def test_uploaded_errors_name_type_and_line_only() -> None:
    pool = WorkerPool(PoolSettings(size=1, tenant=ANY_FUNCTION))
    await pool.start()
    try:
        leak = src("Leak", "data = 'the-contents-of-a-file'\nraise ValueError(data)")
        with pytest.raises(FilterFailure) as ei:
            await pool.run(leak, records(1), 1)
        detail = ei.value.detail
        assert "ValueError at line 3: raise ValueError(data)" in detail and "the-contents" not in detail, detail
        deep = src("Deep", "import json\nreturn json.loads(msg.body[:3])")  # fails inside json: the function's line
        with pytest.raises(FilterFailure) as ei:
            await pool.run(deep, records(1), 1)
        assert "JSONDecodeError at line 3: return json.loads" in ei.value.detail, ei.value.detail
        assert "decoder.py" not in ei.value.detail
        at_load = FunctionSpec("source", "F", "import json\nraise KeyError(json.__file__)\n")
        with pytest.raises(FilterFailure) as ei:
            await pool.load(at_load)
        assert ei.value.detail == "KeyError at line 2: raise KeyError(json.__file__)", ei.value.detail
    finally:
        await pool.stop()
