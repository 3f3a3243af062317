"""Worker pool, registry, policy, signing, config and broker-side liveness: no sockets, real worker processes."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import zlib
from pathlib import Path

import orjson
import pytest

from sievemq.broker.filter_servers import FilterServerManager
from sievemq.errors import ConfigError, RemotingError
from sievemq.filtersrv.config import load_filtersrv_config
from sievemq.filtersrv.pools import TenantsFull, WorkerPools
from sievemq.filtersrv.processors import split_records
from sievemq.filtersrv.registry import FilterRegistry, FunctionSpec, RegistrationPolicy
from sievemq.filtersrv.tenants import TenantLimits, tenant_of
from sievemq.filtersrv.workers import ANY_FUNCTION, FilterFailure, PoolSettings, WorkerPool
from sievemq.protocol.message import MessageExt, encode_record
from sievemq.protocol.reasons import Reason
from sievemq.protocol.sysflag import COMPRESSED_FLAG
from sievemq.protocol.upload_signing import Upload, filter_class_crc, sign_upload, signed_fields, verify_upload
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import SHOP_FILTERS


def records(n: int, *, compressed: bool = False) -> bytes:
    """``n`` stored records; body = JSON {"i": i}; tags alternate A/B; KEYS k<i>."""
    out = b""
    for i in range(n):
        body = orjson.dumps({"i": i})
        m = MessageExt(
            "T",
            zlib.compress(body) if compressed else body,
            properties={"TAGS": "AB"[i % 2], "KEYS": f"k{i}", "color": "red" if i % 3 == 0 else "blue"},
            queue_id=3,
            queue_offset=100 + i,
            sys_flag=COMPRESSED_FLAG if compressed else 0,
            born_timestamp=1_700_000_000_000 + i,
            store_timestamp=1_700_000_000_500 + i,
        )
        out += encode_record(m)
    return out


@pytest.fixture
def filters_dir(tmp_path: Path) -> Path:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "filters.py").write_text(SHOP_FILTERS)
    tmp_path.chmod(0o755)  # workers run as an unprivileged user: the operator's folder must be readable to it
    return tmp_path


FS = "127.0.0.1:4001"
"""The filter server the unit tests' uploads are signed for."""


def fresh(source: bytes, account: str = "a") -> dict[str, str]:
    """Signature fields of an upload of ``F`` for group g on topic T (a new nonce each call)."""
    return signed_fields(account, "k", "g", "T", "F", source, FS)


def src(name: str, body: str) -> FunctionSpec:
    text = f"def {name}(msg):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return FunctionSpec("source", name, text, filter_class_crc(text))


# ------------------------------------------------------------------------------------------------ worker pool


async def test_pool_runs_functions_and_survives_every_failure(filters_dir: Path) -> None:
    pool = WorkerPool(
        PoolSettings(
            size=2,
            batch_timeout=1.0,
            load_timeout=1.5,
            memory_mb=256,
            paths=(str(filters_dir),),
            modules=("shop.filters",),
            tenant=ANY_FUNCTION,  # the worker's mechanics, several functions in one pool (never so in a filter server)
        )
    )
    await pool.start()
    try:
        blob = records(12)
        # Named function from an allowed module on the operator's path; and the message view it gets.
        assert await pool.run(FunctionSpec("named", "shop.filters:tagged_b"), blob, 12) == [1, 3, 5, 7, 9, 11]
        seen = src(
            "Seen",
            "assert msg.topic == 'T' and msg.queue_id == 3 and msg.keys == [f'k{msg.queue_offset - 100}']\n"
            "assert msg.born_timestamp < msg.store_timestamp and len(msg.msg_id) == 32\n"
            "return msg.properties['color'] == 'red' and msg.tags in ('A', 'B')",
        )
        assert await pool.run(seen, blob, 12) == [0, 3, 6, 9]
        # Compressed bodies are inflated for the function.
        assert await pool.run(src("Even", "import json\nreturn json.loads(msg.body)['i'] % 2 == 0"),
                              records(4, compressed=True), 4) == [0, 2]  # fmt: skip
        # print() in a filter does not corrupt the pipe protocol.
        assert await pool.run(src("Chatty", "print('hello from a filter')\nreturn True"), blob, 12) == list(range(12))

        failures = {
            "raise": (src("Boom", "return {}['x']"), "KeyError at line 2: return {}['x']"),
            "result": (src("NoReturn", "pass"), "returned None"),
            "memory": (src("Hog", "h = []\nwhile True:\n    h.append(bytearray(1 << 24))"), "memory limit"),
            "timeout": (src("Spin", "while True:\n    pass"), "1 s time limit"),
            "crash": (src("Quit", "import os\nos._exit(7)"), "exited (code 7)"),
            "load": (FunctionSpec("source", "Nope", "x = 1\n"), "defines no 'Nope'"),
        }
        for kind, (spec, text) in failures.items():
            t0 = time.monotonic()
            with pytest.raises(FilterFailure) as ei:
                await pool.run(spec, blob, 12)
            assert ei.value.kind == kind and text in ei.value.detail, (kind, ei.value.detail)
            assert time.monotonic() - t0 < 3.0
        # Still two workers serving correct answers afterwards.
        for _ in range(4):
            assert await pool.run(FunctionSpec("named", "shop.filters:tagged_b"), blob, 12) == [1, 3, 5, 7, 9, 11]
        assert pool.replaced == {"memory": 1, "timeout": 1, "crash": 1}
        # Loading (what 302 does): errors are reported, including non-Python source and disallowed modules.
        with pytest.raises(FilterFailure, match="must be Python"):
            await pool.load(FunctionSpec("source", "F", "public class F implements MessageFilter {}"))
        with pytest.raises(FilterFailure, match="not allowed"):
            await pool.load(FunctionSpec("named", "os:getcwd"))
        with pytest.raises(FilterFailure, match="time limit"):
            await asyncio.wait_for(pool.load(FunctionSpec("source", "F", "while True:\n    pass\n")), 20)
    finally:
        await pool.stop()


async def test_worker_cpu_limit(filters_dir: Path) -> None:
    """RLIMIT_CPU stops a spinning worker even when the wall-clock limit is generous."""
    pool = WorkerPool(PoolSettings(size=1, batch_timeout=20.0, cpu_seconds=1, tenant=ANY_FUNCTION))
    await pool.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(FilterFailure) as ei:
            await pool.run(src("Spin", "while True:\n    pass"), records(1), 1)
        assert ei.value.kind == "cpu" and "RLIMIT_CPU 1 s" in ei.value.detail, (ei.value.kind, ei.value.detail)
        assert time.monotonic() - t0 < 5.0
        assert await pool.run(src("Yes", "return True"), records(2), 2) == [0, 1]
    finally:
        await pool.stop()


async def test_cancelled_caller_does_not_cost_a_worker() -> None:
    """A consumer hanging up mid-batch: the batch finishes in the worker, which stays in the pool."""
    pool = WorkerPool(PoolSettings(size=1, batch_timeout=5.0, tenant=ANY_FUNCTION))
    await pool.start()
    try:
        slow = src("Slow", "import time\ntime.sleep(0.3)\nreturn True")
        task = asyncio.create_task(pool.run(slow, records(1), 1))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await pool.run(src("Yes", "return True"), records(2), 2) == [0, 1]
        assert pool.replaced == {} and pool.spawned == 1
    finally:
        await pool.stop()


async def test_workers_get_no_sievemq_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIEVEMQ_FILTERSRV_UPLOAD_SECRET", "top-secret")
    pool = WorkerPool(PoolSettings(size=1, tenant=ANY_FUNCTION))
    await pool.start()
    try:
        leak = src("Leak", "import os\nreturn any(k.startswith('SIEVEMQ') for k in os.environ)")
        assert await pool.run(leak, records(1), 1) == []
    finally:
        await pool.stop()


async def test_tenant_pools_never_mix_functions(filters_dir: Path) -> None:
    """Uploads get workers of their own tenant (disjoint pids, refused past the cap, freed when idle); a worker
    refuses a function that is not its tenant's, so even a routing mistake would not mix them."""
    now = [0.0]
    settings = PoolSettings(size=1, paths=(str(filters_dir),), modules=("shop.filters",))
    pools = WorkerPools(settings, TenantLimits(1, 2, idle_seconds=60.0), clock=lambda: now[0])
    await pools.start()
    try:
        a, b, c = src("A", "return True"), src("B", "return msg.tags == 'B'"), src("C", "return False")
        ka, kb, kc = (tenant_of("T", g, s) for g, s in (("ga", a), ("gb", b), ("gc", c)))
        await pools.load(a, ka)
        assert await pools.run(b, kb, records(4), 4) == [1, 3]  # a pull may start a tenant's workers too
        assert await pools.run(FunctionSpec("named", "shop.filters:tagged_b"), None, records(2), 2) == [1]
        by_fid = {t["fid"]: set(t["pids"]) for t in pools.tenants()}
        assert len(by_fid) == 2 and not by_fid[a.fid] & by_fid[b.fid] and not by_fid[a.fid] & set(pools.pids())
        with pytest.raises(TenantsFull, match="maxUploadWorkers 2"):
            await pools.load(c, kc)
        now[0] = 61.0  # both idle: their workers stop, the slots are free
        await pools.load(c, kc)
        assert [t["fid"] for t in pools.tenants()] == [c.fid] and pools.retired == {"idle": 2}
        assert pools.status()["uploads"]["refused"] == 1
        # The worker's own check: a tenant's worker loads nothing else, a shared one no upload.
        own = WorkerPool(PoolSettings(size=1, tenant=a.fid))
        await own.start()
        try:
            with pytest.raises(FilterFailure, match="only the uploaded function"):
                await own.run(b, records(1), 1)
            assert own.replaced == {"protocol": 1}
        finally:
            await own.stop()
        with pytest.raises(FilterFailure, match="named functions only"):
            await pools.shared.load(a)
    finally:
        await pools.stop()


def test_split_records() -> None:
    blob = records(3)
    spans = split_records(blob)
    assert len(spans) == 3 and spans[0][0] == 0 and spans[-1][1] == len(blob)
    with pytest.raises(ValueError):
        split_records(blob[:-1])


# ------------------------------------------------------------------------------------------------ registry


def test_registry_disable_and_reenable() -> None:
    reg_table = FilterRegistry(max_consecutive_failures=3)
    spec = FunctionSpec("named", "shop.filters:f", "", 7)
    reg = reg_table.put("T", "g", spec)
    assert reg_table.unchanged("T", "g", FunctionSpec("named", "shop.filters:f", "", 7)) is reg
    assert reg_table.unchanged("T", "g", FunctionSpec("named", "shop.filters:f", "", 8)) is None
    assert reg_table.unchanged("T", "other", spec) is None
    reg_table.record_batch(reg, 32, 4, 0.01)
    assert not reg_table.record_failure(reg, "boom", 0.1)
    reg_table.record_batch(reg, 10, 0, 0.01)  # a success ends the streak
    assert not reg_table.record_failure(reg, "boom", 0.1)
    assert not reg_table.record_failure(reg, "boom", 0.1)
    assert reg_table.record_failure(reg, "bang", 0.1) and not reg.enabled
    assert "3 consecutive failures (last: bang)" in reg.disabled_reason
    reg_table.reenable(reg)
    assert reg.enabled and reg.consecutive_failures == 0
    (snap,) = reg_table.snapshot()
    assert (snap["seen"], snap["matched"], snap["filteredOut"], snap["errors"], snap["batches"]) == (42, 4, 38, 4, 2)
    # A different function replaces the registration with fresh counts.
    reg2 = reg_table.put("T", "g", FunctionSpec("named", "shop.filters:h", "", 9))
    assert reg_table.get("T", "g") is reg2 and reg2.stats.seen == 0


def test_policy() -> None:
    pol = RegistrationPolicy(modules=("shop.filters",), upload_enabled=True, secret="k", accounts=("a",))
    assert pol.spec_for("g", "T", "shop.filters:f", 1, b"", {}).kind == "named"
    assert pol.spec_for("g", "T", "shop.filters.sub:f", 1, b"", {}).name == "shop.filters.sub:f"
    for bad, code in (("shop.filtersx:f", 16), ("shop:f", 16), ("shop.filters:_f", 1), ("f", 1), ("a:b:c", 1)):
        with pytest.raises(RemotingError) as ei:
            pol.spec_for("g", "T", bad, 1, b"", {})
        assert ei.value.code == code, bad
    source = b"def F(msg):\n    return True\n"
    spec = pol.spec_for("g", "T", "F", filter_class_crc(source), source, fresh(source), FS)
    assert spec.kind == "source" and spec.source == source.decode()
    with pytest.raises(RemotingError, match="classCRC") as ei:  # the remark names the field
        pol.spec_for("g", "T", "F", 5, source, fresh(source), FS)
    assert (ei.value.code, ei.value.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_INVALID)
    with pytest.raises(RemotingError) as ei:  # signed for group g: does not verify for g2
        pol.spec_for("g2", "T", "F", filter_class_crc(source), source, fresh(source), FS)
    assert (ei.value.code, ei.value.reason) == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED)
    off = RegistrationPolicy(modules=("shop.filters",))
    with pytest.raises(RemotingError) as ei:
        off.spec_for("g", "T", "F", filter_class_crc(source), source, fresh(source), FS)
    assert ei.value.code == ResponseCode.NO_PERMISSION


def test_policy_refusals_carry_reasons() -> None:
    pol = RegistrationPolicy(modules=("shop.filters",), upload_enabled=True, secret="k", accounts=("a",))
    source = b"def F(msg):\n    return True\n"
    crc = filter_class_crc(source)
    cases = [
        (("g", "T", "ops.rules:f", 1, b"", {}), Reason.FILTER_NOT_ALLOWED),
        (("g", "T", "nocolon", 1, b"", {}), Reason.FILTER_INVALID),
        (("g", "T", "F", crc, source, fresh(source, "b")), Reason.FILTER_NOT_ALLOWED),
        (("g", "T", "F", crc + 1, source, fresh(source)), Reason.FILTER_INVALID),
    ]
    for args, reason in cases:
        with pytest.raises(RemotingError) as ei:
            pol.spec_for(*args, FS)  # type: ignore[arg-type]
        assert ei.value.reason == reason, args


def test_signing() -> None:
    up = Upload("a", "g", "T", "F", FS, 1_700_000_000_000, "n" * 32, b"src")
    sig = sign_upload("k", up)
    assert len(sig) == 64 and verify_upload("k", up, sig.upper())
    assert not verify_upload("", up, sign_upload("", up))
    assert not verify_upload("k", dataclasses.replace(up, source=b"src2"), sig)
    assert filter_class_crc("abc") == zlib.crc32(b"abc") & 0x7FFFFFFF


def test_config_layers(tmp_path: Path) -> None:
    toml = tmp_path / "fs.toml"
    toml.write_text(
        'brokerAddr = "10.0.0.1:10911"\nfilterModules = ["shop.filters", "ops.rules"]\n'
        'filterPaths = ["/opt/filters"]\nclientUploadFilterEnable = true\nworkerCount = 3\n'
    )
    env = {
        "SIEVEMQ_FILTERSRV_UPLOAD_SECRET": "from-env",
        "SIEVEMQ_LISTEN_PORT": "10911",
        "SIEVEMQ_FILTERSRV_WORKER_COUNT": "4",
    }
    cfg = load_filtersrv_config(toml, env, {"worker_count": 5})
    assert cfg.modules == ("shop.filters", "ops.rules") and cfg.paths == ("/opt/filters",)
    assert cfg.upload_secret == "from-env" and cfg.listen_port == 0 and cfg.worker_count == 5
    assert cfg.client_upload_filter_enable and cfg.broker_addr == "10.0.0.1:10911"
    assert load_filtersrv_config(None, {}).client_upload_filter_enable is False
    toml.write_text("nonsense = 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'nonsense'"):
        load_filtersrv_config(toml, {})
    with pytest.raises(ConfigError):
        load_filtersrv_config(None, {}, {"filter_modules": "not a module!"})


# ------------------------------------------------------------------------------------------------ broker side


async def test_broker_liveness() -> None:
    changes: list[list[str]] = []
    mgr = FilterServerManager("127.0.0.1:10911", "broker-a", 0, expire_seconds=30.0)
    mgr.on_change = lambda: changes.append(mgr.addresses())
    mgr.heard("127.0.0.1:4001", now=100.0)
    mgr.heard("127.0.0.1:4002", now=110.0)
    mgr.heard("127.0.0.1:4001", now=125.0)  # a refresh is not a change
    assert len(changes) == 2
    assert mgr.addresses(now=139.0) == ["127.0.0.1:4001", "127.0.0.1:4002"]
    assert mgr.addresses(now=141.0) == ["127.0.0.1:4001"]  # 4002 silent for 31 s
    assert mgr.expire(now=141.0) == ["127.0.0.1:4002"] and len(changes) == 3
    # A registering connection that closes drops its filter server at once.
    conn = Connection()
    mgr.heard("127.0.0.1:4003", conn)
    assert "127.0.0.1:4003" in mgr.addresses()
    mgr.connection_closed(conn)
    assert "127.0.0.1:4003" not in mgr.addresses() and len(changes) == 5
