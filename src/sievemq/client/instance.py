"""The client instance: what producers and consumers of one process (and instance name) share.

One ``ClientInstance`` per event loop and instance name (Java ``MQClientInstance``). It owns the connections
(one per broker / name server address), the route cache (refreshed every 30 s), the heartbeats to every broker
(every 30 s and at once on start/subscribe), the rebalance rounds (every 20 s, and at once when a broker sends
NOTIFY_CONSUMER_IDS_CHANGED), periodic offset persistence (every 5 s) and UNREGISTER_CLIENT on close.
Client id: ``ip@instanceName``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
import os
import socket
import ssl
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from sievemq.acl.signature import RequestSigner
from sievemq.client import api
from sievemq.client.broker_requests import BrokerRequests, Relay
from sievemq.client.errors import NameServerUnreachableError, NoRouteError
from sievemq.client.heartbeats import Heartbeats
from sievemq.client.members import ConsumerLike, ProducerLike
from sievemq.client.options import DEFAULT_NAMESRV, ClientOptions, parse_namesrv
from sievemq.client.request_reply import ReplyWaiters
from sievemq.client.route_cache import RouteCache
from sievemq.errors import RemotingError
from sievemq.protocol import mq_json
from sievemq.protocol.reasons import RefusedSubscription
from sievemq.protocol.route import TopicRouteData
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, ConnectionPool
from sievemq.remoting.tls import ClientTls, TlsFileError
from sievemq.util.tasks import cancel_and_wait

log = logging.getLogger(__name__)


def default_instance_name() -> str:
    """``pid#nanotime``, like Java 4.9's default for a client without an instance name."""
    return f"{os.getpid()}#{time.monotonic_ns()}"


def local_ip() -> str:
    """This host's non-loopback IPv4 address if it has one (route lookup, nothing sent), else 127.0.0.1."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        ip = str(s.getsockname()[0])
        if ip and ip != "0.0.0.0":
            return ip
    return "127.0.0.1"


_tls_settings = operator.attrgetter("tls", "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_verify")


@dataclass(frozen=True)
class ClientConfig(ClientOptions):
    """Settings shared by the clients of one instance (the first client's values win): a client's
    ``ClientOptions`` with the name servers and the instance name resolved (``ClientConfig.of``), and this host's
    address."""

    namesrv: tuple[str, ...] = (DEFAULT_NAMESRV,)
    instance_name: str = field(default_factory=default_instance_name)
    client_ip: str = field(default_factory=local_ip)

    def tls_context(self) -> ssl.SSLContext | None:
        """The SSL context of every connection (None without ``tls``); ValueError naming a file that does not load."""
        if not self.tls:
            return None
        ca, cert, key = self.tls_ca_file or "", self.tls_cert_file or "", self.tls_key_file or ""
        try:
            return ClientTls(ca_file=ca, cert_file=cert, key_file=key, verify=self.tls_verify).context()
        except TlsFileError as e:
            name = {"trust": "tls_ca_file", "cert": "tls_cert_file"}.get(e.which, "tls_key_file")
            raise ValueError(f"{name} {e}") from None

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return f"{self.client_ip}@{self.instance_name}"

    @classmethod
    def create(
        cls, namesrv: str | Sequence[str] | None, instance_name: str | None = None, **settings: Any
    ) -> ClientConfig:
        """The config of a client built from its constructor arguments (default instance name when None)."""
        cfg = cls(namesrv=parse_namesrv(namesrv), **settings)
        return replace(cfg, instance_name=instance_name) if instance_name else cfg

    @classmethod
    def of(cls, options: ClientOptions) -> ClientConfig:
        """The config of a client with ``options``: the name servers resolved, an instance name of its own unless
        ``options`` names one."""
        settings = {f.name: getattr(options, f.name) for f in fields(options)}
        return cls.create(settings.pop("namesrv"), settings.pop("instance_name"), **settings)


class ClientInstance(RouteCache):
    """Routes, connections, heartbeats and the periodic work of the clients of one instance name (the route
    cache and its broker address table are a ``RouteCache``)."""

    _registry: ClassVar[dict[tuple[asyncio.AbstractEventLoop, str], ClientInstance]] = {}

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.client_id = config.client_id
        signer = RequestSigner(config.access_key, config.secret_key) if config.access_key else None
        self.pool = ConnectionPool(
            handler=self, connect_timeout=config.request_timeout, rpc_hook=signer, tls=config.tls_context()
        )
        self.producers: dict[str, ProducerLike] = {}
        self.replies = ReplyWaiters()
        """Requests (``Producer.request``) waiting for their replies."""
        self.consumers: dict[str, ConsumerLike] = {}
        self.directly_relay: Relay | None = None
        """Where a CONSUME_MESSAGE_DIRECTLY for another client id goes (a proxy's 5.x clients); None: refused."""
        self._refs = 0
        self._ns_index = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._rebalance_event: asyncio.Event | None = None
        self._route_locks: dict[str, asyncio.Lock] = {}
        self._started = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.heartbeats = Heartbeats(self.client_id, self.producers, self.consumers, self.all_broker_addrs,
                                     self.pool.get, timeout=config.request_timeout,
                                     background=self._background)  # fmt: skip
        """HEART_BEAT to the brokers (``client/heartbeats.py``)."""
        self.requests = BrokerRequests(self.client_id, self.producers, self.consumers, self.replies,
                                       rebalance_now=self.rebalance_now, relay=lambda: self.directly_relay,
                                       background=self._background)  # fmt: skip
        """The answers to the brokers' requests (``client/broker_requests.py``)."""

    # ------------------------------------------------------------------------------------------ lifecycle
    @classmethod
    def acquire(cls, config: ClientConfig) -> ClientInstance:
        """The instance for ``config.instance_name`` in the running loop (created on first use), one more user."""
        loop = asyncio.get_running_loop()
        key = (loop, config.instance_name)
        inst = cls._registry.get(key)
        if inst is None or inst._closed:
            inst = cls(config)
            inst._loop = loop
            cls._registry[key] = inst
        elif inst.config.namesrv != config.namesrv:
            log.warning(
                "client instance %s already uses name servers %s; ignoring %s",
                config.instance_name,
                ";".join(inst.config.namesrv),
                ";".join(config.namesrv),
            )
        if inst.config.access_key != config.access_key:
            log.warning(
                "client instance %s already signs as %r; this client's credentials are not used (give it its own "
                "instance_name)",
                config.instance_name,
                inst.config.access_key or "(unsigned)",
            )
        if _tls_settings(inst.config) != _tls_settings(config):
            log.warning(
                "client instance %s already connects with %s; this client's TLS settings are not used (give it its "
                "own instance_name)",
                config.instance_name,
                "TLS" if inst.config.tls else "plain TCP",
            )
        inst._refs += 1
        return inst

    async def start(self) -> None:
        """Start the periodic tasks (idempotent)."""
        if self._started:
            return
        self._started = True
        self._rebalance_event = asyncio.Event()
        self._tasks = [
            asyncio.create_task(self._every(self.config.poll_namesrv_interval, self.refresh_routes), name="routes"),
            asyncio.create_task(self._every(self.config.heartbeat_interval, self.heartbeats.tick), name="heartbeat"),
            asyncio.create_task(self._every(self.config.persist_interval, self._persist_all), name="offsets"),
            asyncio.create_task(self._rebalance_loop(), name="rebalance"),
        ]

    async def release(self) -> None:
        """One user fewer; the last one closes the instance."""
        self._refs -= 1
        if self._refs <= 0:
            await self.close()

    async def close(self) -> None:
        """Stop the periodic tasks and close every connection."""
        if self._closed:
            return
        self._closed = True
        await cancel_and_wait(*self._tasks, *self._background)
        await self.pool.close()
        if self._loop is not None and self._registry.get((self._loop, self.config.instance_name)) is self:
            del self._registry[(self._loop, self.config.instance_name)]

    async def _every(self, interval: float, fn: Any) -> None:
        while not self._closed:
            await asyncio.sleep(interval)
            try:
                await fn()
            except Exception:
                log.exception("periodic client task failed")

    # ------------------------------------------------------------------------------------------ members
    def register_producer(self, group: str, producer: ProducerLike) -> None:
        """Add a producer group (one producer per group and instance)."""
        if group in self.producers and self.producers[group] is not producer:
            raise ValueError(f"producer group {group!r} is already used by another producer of this client instance")
        self.producers[group] = producer

    def register_consumer(self, group: str, consumer: ConsumerLike) -> None:
        """Add a consumer group (one consumer per group and instance)."""
        if group in self.consumers and self.consumers[group] is not consumer:
            raise ValueError(
                f"consumer group {group!r} is already used by another consumer of this client instance; "
                "give each consumer of a group its own instance_name"
            )
        self.consumers[group] = consumer

    async def unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Forget a group and send UNREGISTER_CLIENT to every broker."""
        if producer_group is not None:
            self.producers.pop(producer_group, None)
        if consumer_group is not None:
            self.consumers.pop(consumer_group, None)
            self.heartbeats.announced.discard(consumer_group)

        async def one(addr: str) -> None:
            try:
                conn = await self.pool.get(addr)
                await api.unregister_client(
                    conn,
                    self.client_id,
                    producer_group=producer_group,
                    consumer_group=consumer_group,
                    timeout=self.config.request_timeout,
                )
            except Exception as e:
                log.debug("unregister from %s failed: %s", addr, e)

        await asyncio.gather(*(one(a) for a in self.all_broker_addrs(include_slaves=True)))

    # ------------------------------------------------------------------------------------------ broker requests
    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """Requests brokers send us (``client/broker_requests.py``): NOTIFY_CONSUMER_IDS_CHANGED wakes the rebalance."""
        return await self.requests.handle(conn, cmd)

    async def conn(self, addr: str) -> Connection:
        """The connection to ``addr``; a broker we reconnected to gets a heartbeat at once."""
        conn = await self.pool.get(addr)
        self.heartbeats.connected(addr, conn)
        return conn

    # ------------------------------------------------------------------------------------------ routes
    async def _namesrv_request(self, cmd_factory: Any) -> RemotingCommand:
        """One request to the first name server that answers; NameServerUnreachableError when none does."""
        failures: list[str] = []
        n = len(self.config.namesrv)
        for i in range(n):
            addr = self.config.namesrv[(self._ns_index + i) % n]
            try:
                conn = await self.conn(addr)
                resp: RemotingCommand = await conn.request(cmd_factory(), self.config.request_timeout)
            except Exception as e:  # the next name server; all of them failing is the error
                failures.append(str(e) if addr in str(e) else f"{addr}: {e}")
                continue
            self._ns_index = (self._ns_index + i) % n
            return resp
        raise NameServerUnreachableError(
            f"no name server answers ({'; '.join(failures) or 'none configured'}): is one running at "
            f"{';'.join(self.config.namesrv) or '(none)'}? Check the name server address"
        )

    async def fetch_route(self, topic: str, *, missing_ok: bool = True) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC from a name server: None when it answers TOPIC_NOT_EXIST, or (``missing_ok``
        False) NoRouteError with the name server's remark and reason (``BROKER_GONE`` names the brokers that left)."""
        resp = await self._namesrv_request(
            lambda: RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        )
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            if missing_ok:
                return None
            raise NoRouteError(topic, resp.remark or "no name server knows it", resp.ext_fields.get("reason"))
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
        return TopicRouteData.from_json(mq_json.loads(resp.body))  # number keys from a RocketMQ 4 name server

    async def update_route(self, topic: str) -> TopicRouteData | None:
        """Fetch and cache ``topic``'s route, telling producers; the cached route when the name servers fail."""
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            try:
                route = await self.fetch_route(topic)
            except Exception as e:
                log.debug("route of %s: %s", topic, e)
                return self.routes.get(topic)
            if route is None or not route.queue_datas:
                return self.routes.get(topic)
            before = set(self.all_broker_addrs(include_slaves=True))
            self._cache_route(topic, route)
            self._greet(before)
            for p in list(self.producers.values()):
                p.on_route(topic, route)
            return route

    def _greet(self, before: set[str]) -> None:
        """Heartbeat at once to brokers that just appeared in the routes (they must know us to rebalance)."""
        if self._started and not self._closed:
            self.heartbeats.greet(before)

    def remember_brokers(self, route: TopicRouteData) -> None:
        """Make the brokers of a route addressable (the TBW102 route used for auto-creation)."""
        before = set(self.all_broker_addrs(include_slaves=True))
        self._cache_default_route(route)
        self._greet(before)

    async def refresh_routes(self) -> None:
        """Refresh the route of every topic in use."""
        topics: set[str] = set()
        for p in list(self.producers.values()):
            topics.update(p.topics())
        for c in list(self.consumers.values()):
            topics.update(c.topics())
        for topic in sorted(topics):
            await self.update_route(topic)

    # ------------------------------------------------------------------------------------------ heartbeats
    async def heartbeat_all(self) -> list[RefusedSubscription]:
        """HEART_BEAT to every broker (slaves too when there are consumers); the subscriptions they refused."""
        return await self.heartbeats.all()

    def told_refusals(self, refused: Iterable[RefusedSubscription]) -> None:
        """Refusals a consumer's ``start()`` raised or logged already: the heartbeat tick does not repeat them."""
        self.heartbeats.told_refusals(refused)

    # ------------------------------------------------------------------------------------------ consumers
    def rebalance_now(self) -> None:
        """Run a rebalance round at once."""
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_event is not None
        timeout = self.config.rebalance_interval
        while not self._closed:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that races the event.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._rebalance_event.wait()
            self._rebalance_event.clear()
            complete = True
            for c in list(self.consumers.values()):
                try:
                    complete = await c.rebalance() and complete
                except Exception:
                    log.exception("rebalance of group %s failed", c.group)
                    complete = False
            timeout = self.config.rebalance_interval if complete else min(1.0, self.config.rebalance_interval)

    async def _persist_all(self) -> None:
        for c in list(self.consumers.values()):
            try:
                await c.persist_offsets()
            except Exception:
                log.exception("persisting offsets of group %s failed", c.group)
