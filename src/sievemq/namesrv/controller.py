"""The name server: a RemotingServer over the route table, plus the expiry of silent brokers."""

from __future__ import annotations

import asyncio
import logging
import time

from sievemq.acl.authorizer import AclAuthorizer
from sievemq.acl.classification import NAMESRV
from sievemq.acl.early import early_check
from sievemq.acl.strict import strict_policy
from sievemq.namesrv.config import NamesrvConfig
from sievemq.namesrv.etcd_controller import ControllerEtcd, ControllerProcessor
from sievemq.namesrv.processors import NamesrvProcessors
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol.header_rules import check_request
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable, RemotingServer
from sievemq.settings import split_addrs
from sievemq.settings.tls import server_tls
from sievemq.util.tasks import Background

log = logging.getLogger(__name__)


class NamesrvController:
    """Runs one name server in the current event loop."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.routes = RouteTable()
        self.processors = NamesrvProcessors(self.routes, config.order_message_enable, config)
        strict = strict_policy(config.acl_strict_signatures, config.acl_signature_window_seconds)
        self.acl = AclAuthorizer(config.acl_file, NAMESRV, strict=strict) if config.acl_enable else None
        """With ``aclEnable``: write requests need an admin account's signature (docs/protocol/acl.md §4)."""
        table = ProcessorTable("name server", check_request, self.acl)
        self.processors.register(table)
        self.controller: ControllerProcessor | None = None
        """With ``etcdEndpoints``: RocketMQ's controller requests, answered from etcd (``etcd_controller.py``)."""
        if config.etcd_endpoints:
            etcd = ControllerEtcd(split_addrs(config.etcd_endpoints), config.etcd_root)
            self.controller = ControllerProcessor(etcd, lambda: self.addr, self._cluster_of)
            self.controller.register(table)
        self.server = RemotingServer(
            table,
            config.listen_host,
            config.listen_port,
            on_close=self._on_close,
            tls=server_tls(config),
            screen=early_check(self.acl),
        )
        self._scan = Background("broker-expiry-scan")

    @property
    def addr(self) -> str:
        """``host:port`` the name server listens on."""
        return f"{self.config.listen_host}:{self.server.port}"

    def _cluster_of(self, broker_name: str) -> str | None:
        broker = self.routes.brokers.get(broker_name)
        return broker.cluster if broker is not None else None

    def _on_close(self, conn: Connection) -> None:
        for addr in self.routes.connection_closed(id(conn), time.monotonic()):
            log.info("broker %s dropped: its connection closed", addr)

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_interval_seconds)
            try:
                for addr in self.routes.expire(time.monotonic(), self.config.broker_expire_seconds):
                    log.warning("broker %s expired: no registration for %.0fs", addr, self.config.broker_expire_seconds)
            except Exception:
                log.exception("broker expiry scan failed; scanning again in %.0fs", self.config.scan_interval_seconds)

    async def start(self) -> None:
        """Listen and start the expiry scan."""
        await self.server.start()
        self._scan.start(self._scan_loop())
        log.info("name server listening on %s", self.addr)

    async def stop(self) -> None:
        """Stop serving."""
        await self._scan.stop()
        await self.server.stop()
        if self.controller is not None:
            await self.controller.stop()
