"""The filter server: serves consumers' filtered pulls, registers with its one broker every 10 s."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from typing import Any

from sievemq.acl.authorizer import AclAuthorizer
from sievemq.acl.classification import FILTERSRV
from sievemq.acl.early import early_check
from sievemq.acl.signature import RequestSigner
from sievemq.acl.strict import strict_policy
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.filtersrv.layers import describe, upload_refusal
from sievemq.filtersrv.pools import WorkerPools
from sievemq.filtersrv.processors import FilterPullProcessor, PullSettings, RegisterFilterProcessor, StatusProcessor
from sievemq.filtersrv.registration import BrokerRegistration
from sievemq.filtersrv.registry import FilterRegistry, RegistrationPolicy
from sievemq.filtersrv.replay import NonceWindow
from sievemq.filtersrv.tenants import TenantLimits
from sievemq.filtersrv.workers import PoolSettings
from sievemq.protocol.header_rules import check_request
from sievemq.remoting.connection import ConnectionPool
from sievemq.remoting.server import ProcessorTable, RemotingServer
from sievemq.util.tasks import Background
from sievemq.version import __version__

log = logging.getLogger(__name__)


class FiltersrvController:
    """Runs one filter server in the current event loop: builds the services and hands each processor the ones it
    uses."""

    def __init__(self, config: FiltersrvConfig) -> None:
        self.config = config
        self.registry = FilterRegistry(config.max_consecutive_failures)
        policy = RegistrationPolicy(
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
        self._register_filter = RegisterFilterProcessor(self.registry, self.workers, policy, self._addr)
        pull = PullSettings(config.broker_addr, config.broker_timeout_seconds, config.read_ahead_batches)
        for proc in (
            self._register_filter,
            FilterPullProcessor(self.registry, self.workers, self.broker_conns, pull, self._addr),
            StatusProcessor(self.status),
        ):
            proc.register(self.table)
        self.server = RemotingServer(self.table, config.listen_host, config.listen_port, screen=early_check(acl))
        self.registration = BrokerRegistration(self.broker_conns, config.broker_addr, self._addr, self.registry,
                                               config.register_interval_seconds)  # fmt: skip
        self.started_at = time.time()
        self.done = asyncio.Event()
        """Set when the filter server should exit on its own (its parent broker is gone)."""
        self._parent_watch = Background("filtersrv-parent-watch")

    @property
    def addr(self) -> str:
        """``ip:port`` advertised to the broker (valid after ``start``)."""
        return f"{self.config.advertised_ip}:{self.server.port}"

    def _addr(self) -> str:
        return self.addr

    @property
    def policy(self) -> RegistrationPolicy:
        """The rules 302 requests are checked against."""
        return self._register_filter.policy

    # ------------------------------------------------------------------ parent
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
        await self.registration.register_once()
        self.registration.start()
        if self.config.parent_pid:
            self._parent_watch.start(self._watch_parent())
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
            self._register_filter.policy = dataclasses.replace(self.policy, upload_refusal=refusal)

    async def stop(self) -> None:
        """Stop serving and kill the workers."""
        await self.registration.stop()
        await self._parent_watch.stop()
        await self.server.stop()
        await self.broker_conns.close()
        await self.workers.stop()
        log.info("filter server %s stopped", self.addr)

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """What ``sievemq filtersrv status`` prints."""
        c = self.config
        reg = self.registration
        return {
            "version": __version__,
            "filterServerAddr": self.addr,
            "pid": os.getpid(),
            "brokerAddr": c.broker_addr,
            "brokerName": reg.broker_name,
            "brokerId": reg.broker_id,
            "lastRegisteredMs": int(reg.last_registered * 1000),
            "startedAtMs": int(self.started_at * 1000),
            "uploadsEnabled": c.client_upload_filter_enable and not self.policy.upload_refusal,
            "uploadsRefused": self.policy.upload_refusal,
            "sandboxRequire": c.sandbox_require,
            "filterModules": list(c.modules),
            "workers": self.workers.status(),
            "functions": self.registry.snapshot(),
        }
