"""The filter server: serves consumers' filtered pulls, registers with its one broker every 10 s."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
import time
from typing import Any

import orjson

from sievemq.acl.authorizer import AclAuthorizer
from sievemq.acl.classification import FILTERSRV
from sievemq.acl.early import early_check
from sievemq.acl.signature import RequestSigner
from sievemq.acl.strict import strict_policy
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.filtersrv.layers import describe, upload_refusal
from sievemq.filtersrv.pools import WorkerPools
from sievemq.filtersrv.processors import FiltersrvProcessor
from sievemq.filtersrv.registry import FilterRegistry, RegistrationPolicy
from sievemq.filtersrv.replay import NonceWindow
from sievemq.filtersrv.tenants import TenantLimits
from sievemq.filtersrv.workers import PoolSettings
from sievemq.protocol.header_rules import check_request
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from sievemq.remoting.server import ProcessorTable, RemotingServer
from sievemq.version import __version__

log = logging.getLogger(__name__)


class FiltersrvController:
    """Runs one filter server in the current event loop."""

    def __init__(self, config: FiltersrvConfig) -> None:
        self.config = config
        self.registry = FilterRegistry(config.max_consecutive_failures)
        self.policy = RegistrationPolicy(
            modules=config.modules,
            upload_enabled=config.client_upload_filter_enable,
            secret=config.upload_secret,
            accounts=config.accounts,
            max_source_bytes=config.max_source_bytes,
            nonces=NonceWindow(config.upload_window_seconds),
        )
        self.workers = WorkerPools(
            PoolSettings(
                size=config.worker_count,
                batch_timeout=config.batch_timeout_seconds,
                load_timeout=config.load_timeout_seconds,
                cpu_seconds=config.worker_cpu_seconds,
                memory_mb=config.worker_memory_mb,
                max_batches=config.worker_max_batches,
                paths=config.paths,
                modules=config.modules,
                read_paths=config.read_paths,
                user=config.sandbox_user,
                skip=config.sandbox_skipped,
            ),
            TenantLimits(config.upload_worker_count, config.max_upload_workers, config.upload_idle_seconds),
        )
        signer = RequestSigner(config.acl_access_key, config.acl_secret_key) if config.acl_access_key else None
        self.broker_conns = ConnectionPool(rpc_hook=signer)
        strict = strict_policy(config.acl_strict_signatures, config.acl_signature_window_seconds)
        acl = AclAuthorizer(config.acl_file, FILTERSRV, strict=strict) if config.acl_enable else None
        self.table = ProcessorTable("filter server", check_request, acl)
        FiltersrvProcessor(self).register(self.table)
        self.server = RemotingServer(self.table, config.listen_host, config.listen_port, screen=early_check(acl))
        self.broker_name = ""
        self.broker_id = -1
        self.last_registered = 0.0
        self.started_at = time.time()
        self.instance = secrets.token_hex(8)
        """This process's token in its 301 counts (the broker keeps counting per instance: docs/metrics.md §4)."""
        self.done = asyncio.Event()
        """Set when the filter server should exit on its own (its parent broker is gone)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._register_failing = False

    @property
    def addr(self) -> str:
        """``ip:port`` advertised to the broker (valid after ``start``)."""
        return f"{self.config.advertised_ip}:{self.server.port}"

    # ------------------------------------------------------------------ registration with the broker
    async def register_once(self) -> bool:
        """REGISTER_FILTER_SERVER (301) to the broker, its body this server's function counts (``counts_body``);
        True when it answered SUCCESS."""
        cmd = RemotingCommand.request(RequestCode.REGISTER_FILTER_SERVER, {"filterServerAddr": self.addr},
                                      self.counts_body())  # fmt: skip
        try:
            resp = await self.broker_conns.request(self.config.broker_addr, cmd, 3.0)
        except Exception as e:
            self._registration_failed(f"cannot reach it: {e}")
            return False
        if resp.code != ResponseCode.SUCCESS:
            self._registration_failed(f"it answered [{resp.code}] {resp.remark}")
            return False
        f = resp.ext_fields
        name, bid = f.get("brokerName", ""), int(f.get("brokerId", "-1") or -1)
        if self._register_failing or (name, bid) != (self.broker_name, self.broker_id):
            log.info("registered with broker %s (%s, id %d) as %s", self.config.broker_addr, name, bid, self.addr)
        self.broker_name, self.broker_id = name, bid
        self.last_registered = time.time()
        self._register_failing = False
        return True

    def counts_body(self) -> bytes:
        """What every 301 carries: ``{"instance": token, "functions": [...]}`` (``FilterRegistry.counts_report``),
        from which the broker's /metrics shows the functions' decisions (docs/metrics.md §4). A RocketMQ broker
        ignores a 301's body."""
        return orjson.dumps({"instance": self.instance, "functions": self.registry.counts_report()})

    def _registration_failed(self, why: str) -> None:
        if not self._register_failing:
            log.warning("registration with broker %s failed: %s (retrying)", self.config.broker_addr, why)
        self._register_failing = True

    async def _register_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.register_interval_seconds)
            try:
                await self.register_once()
            except Exception:
                log.exception("registration with the broker failed")

    async def _watch_parent(self) -> None:
        parent = self.config.parent_pid
        while True:
            await asyncio.sleep(1.0)
            if os.getppid() != parent:
                log.warning("parent process %d is gone; stopping", parent)
                self.done.set()
                return

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the workers, listen, register with the broker and keep registering."""
        await self.workers.start()
        self._check_sandbox()
        try:
            await self.server.start()
        except Exception:
            await self.workers.stop()
            raise
        await self.register_once()
        self._tasks.append(asyncio.create_task(self._register_loop()))
        if self.config.parent_pid:
            self._tasks.append(asyncio.create_task(self._watch_parent()))
        log.info("filter server %s serving broker %s", self.addr, self.config.broker_addr)

    def _check_sandbox(self) -> None:
        """Log the workers' sandbox; keep uploads off when it has fewer layers than ``sandboxRequire``."""
        report = self.workers.sandbox
        if report is None:
            return
        log.info("filter worker sandbox: %s", describe(report))
        if not self.config.client_upload_filter_enable:
            return
        refusal = upload_refusal(self.config.sandbox_require, report)
        if refusal:
            log.error("uploads stay OFF although clientUploadFilterEnable=true: %s", refusal)
            self.policy = dataclasses.replace(self.policy, upload_refusal=refusal)

    async def stop(self) -> None:
        """Stop serving and kill the workers."""
        for t in self._tasks:
            t.cancel()
        await self.server.stop()
        await self.broker_conns.close()
        await self.workers.stop()
        log.info("filter server %s stopped", self.addr)

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """What ``sievemq filtersrv status`` prints."""
        c = self.config
        return {
            "version": __version__,
            "filterServerAddr": self.addr,
            "pid": os.getpid(),
            "brokerAddr": c.broker_addr,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "lastRegisteredMs": int(self.last_registered * 1000),
            "startedAtMs": int(self.started_at * 1000),
            "uploadsEnabled": c.client_upload_filter_enable and not self.policy.upload_refusal,
            "uploadsRefused": self.policy.upload_refusal,
            "sandboxRequire": c.sandbox_require,
            "filterModules": list(c.modules),
            "workers": self.workers.status(),
            "functions": self.registry.snapshot(),
        }
