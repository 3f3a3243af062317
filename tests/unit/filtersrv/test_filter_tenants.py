"""Which workers an uploaded filter function may use: tenant keys, the slot book, the limits and the worker's own
refusal of foreign functions (pure logic; docs/protocol/filter-server.md §8)."""

from __future__ import annotations

import dataclasses

import pytest

from sievemq.errors import ConfigError
from sievemq.filtersrv.config import FiltersrvConfig, load_filtersrv_config
from sievemq.filtersrv.pools import WorkerPools
from sievemq.filtersrv.registry import FilterRegistry, FunctionSpec
from sievemq.filtersrv.sandbox import foreign
from sievemq.filtersrv.tenants import TenantBook, TenantKey, TenantLimits, tenant_of
from sievemq.protocol.upload_signing import filter_class_crc

SRC = "def F(msg):\n    return True\n"


def upload(account: str = "a", source: str = SRC, name: str = "F") -> FunctionSpec:
    return FunctionSpec("source", name, source, filter_class_crc(source), account)


def key(group: str = "g", account: str = "a") -> TenantKey:
    spec = upload(account)
    return TenantKey(account, group, "T", spec.fid, "F")


def test_a_tenant_is_account_group_topic_and_content() -> None:
    assert tenant_of("T", "g", FunctionSpec("named", "shop.filters:f")) is None  # the shared pool
    k = tenant_of("T", "g", upload())
    assert k == TenantKey("a", "g", "T", upload().fid, "F") and k is not None and "uploaded by a" in k.label
    others = [
        tenant_of("T", "g", upload(account="b")),
        tenant_of("T", "h", upload()),
        tenant_of("U", "g", upload()),
        tenant_of("T", "g", upload(source=SRC + "# changed\n")),
    ]
    assert len({k, *others}) == 5  # any difference is another tenant
    assert tenant_of("T", "g", upload()) == k  # the same registration again is the same tenant
    assert k.to_json() == {"account": "a", "consumerGroup": "g", "topic": "T", "className": "F", "fid": k.fid}


def test_limits() -> None:
    assert TenantLimits(1, 8).max_tenants == 8
    assert TenantLimits(2, 5).max_tenants == 2
    assert TenantLimits(3, 2).max_tenants == 0


def test_the_book_caps_tenants_and_keeps_those_it_has() -> None:
    book = TenantBook(TenantLimits(workers_per_tenant=1, max_workers=2, idle_seconds=10.0))
    a, b, c = key("a"), key("b"), key("c")
    assert book.enter(a, 0.0) is None and book.enter(b, 0.0) is None
    refusal = book.enter(c, 0.0)
    assert refusal is not None and "maxUploadWorkers 2" in refusal and "uploadIdleSeconds 10 s" in refusal
    assert c not in book and len(book) == 2
    assert book.enter(a, 1.0) is None  # a tenant holding a slot is never refused
    state = book.state(a)
    assert state is not None and state.busy == 2


def test_idle_tenants_free_their_slots_but_never_mid_batch() -> None:
    book = TenantBook(TenantLimits(1, 2, idle_seconds=10.0))
    a, b, c = key("a"), key("b"), key("c")
    book.enter(a, 0.0)
    book.enter(b, 0.0)
    assert book.leave(a, 1.0) is None  # b stays busy
    assert book.idle(10.9) == [] and book.idle(11.0) == [a]
    assert book.idle(100.0) == [] and b in book  # busy: never idle, however long
    assert book.enter(c, 100.0) is None  # a's slot went to c
    assert book.leave(b, 100.0) is None
    assert book.idle(109.0) == [] and book.idle(110.0) == [b] and c in book  # c's load still runs


def test_retiring_waits_for_the_running_batch() -> None:
    book = TenantBook(TenantLimits(1, 2, idle_seconds=10.0))
    a, b = key("a"), key("b")
    book.enter(a, 0.0)
    assert book.retire(a, "replaced") is False and a in book  # a batch runs: retired when it ends
    assert book.leave(a, 1.0) == "replaced" and a not in book
    book.enter(b, 0.0)
    book.leave(b, 0.0)
    assert book.retire(b, "failed") is True and b not in book  # idle: at once
    assert book.retire(b, "failed") is False  # unknown: nothing to do
    book.enter(a, 2.0)
    book.retire(a, "replaced")
    book.enter(a, 3.0)  # wanted again before its batch ended: no longer retiring
    assert book.leave(a, 4.0) is None and book.leave(a, 5.0) is None and a in book


def test_the_worker_refuses_foreign_functions() -> None:
    named = {"kind": "named", "fid": "n1", "name": "shop.filters:f"}
    mine = upload().to_json()
    theirs = upload(account="b", source=SRC + "# theirs\n").to_json()
    assert foreign(named, "") is None
    assert "named functions only" in (foreign(mine, "") or "")
    assert foreign(mine, mine["fid"]) is None
    assert "only the uploaded function" in (foreign(theirs, mine["fid"]) or "")
    assert "only the uploaded function" in (foreign({**named, "fid": mine["fid"]}, mine["fid"]) or "")


def test_pools_route_each_kind_to_its_own_pool_only() -> None:
    spec = upload()
    WorkerPools._check(spec, tenant_of("T", "g", spec))
    WorkerPools._check(FunctionSpec("named", "shop.filters:f"), None)
    for bad_spec, bad_tenant in (
        (spec, None),  # an upload in the shared pool
        (FunctionSpec("named", "shop.filters:f"), tenant_of("T", "g", spec)),  # a named function in a tenant's
        (upload(source=SRC + "# other\n"), tenant_of("T", "g", spec)),  # another upload in a tenant's
    ):
        with pytest.raises(ValueError):
            WorkerPools._check(bad_spec, bad_tenant)


def test_a_new_account_with_the_same_source_is_a_new_registration() -> None:
    reg = FilterRegistry()
    reg.put("T", "g", upload("a"))
    assert reg.unchanged("T", "g", upload("a")) is not None
    assert reg.unchanged("T", "g", upload("b")) is None  # another tenant: loaded in workers of its own


def test_settings() -> None:
    cfg = FiltersrvConfig()
    assert (cfg.upload_worker_count, cfg.max_upload_workers, cfg.upload_idle_seconds) == (1, 8, 300.0)
    env = {"SIEVEMQ_FILTERSRV_UPLOAD_WORKER_COUNT": "2", "SIEVEMQ_FILTERSRV_MAX_UPLOAD_WORKERS": "6"}
    cfg = load_filtersrv_config(None, env, {"upload_idle_seconds": 30.0})
    assert (cfg.upload_worker_count, cfg.max_upload_workers, cfg.upload_idle_seconds) == (2, 6, 30.0)
    with pytest.raises(ConfigError, match="maxUploadWorkers"):
        dataclasses.replace(cfg, max_upload_workers=1)
    for bad in ({"upload_worker_count": 0}, {"max_upload_workers": 0}, {"upload_idle_seconds": 0}):
        with pytest.raises(ConfigError):
            load_filtersrv_config(None, {}, bad)
