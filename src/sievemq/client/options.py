"""What the clients are configured with: how they connect (``ClientOptions``, the same for every client) and how a
push consumer consumes (``ConsumeOptions``).

Build them once and give them to every client::

    conn = ClientOptions(namesrv="10.0.0.1:9876;10.0.0.2:9876", access_key="ak", secret_key="sk", tls=True)
    tuning = ConsumeOptions(concurrency=4, consume_batch_size=8)

    producer = Producer(group="orders-p", options=conn)
    consumer = PushConsumer(group="orders-c", options=conn, consume=tuning)

Each field is also a keyword argument of the clients, under the same name (``Producer(namesrv, group,
request_timeout=5.0)``, ``PushConsumer(namesrv, group, concurrency=4)``); a keyword argument given together with an
options object replaces that field (``PushConsumer(group="g", options=conn, instance_name="c1")``). The command line
flags have the same names too (``--namesrv``, ``--access-key``, ``--tls-ca-file``, ...: ``sievemq.cli.client``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypedDict

__all__ = [
    "DEFAULT_NAMESRV",
    "ClientKwargs",
    "ClientOptions",
    "ConsumeKwargs",
    "ConsumeOptions",
    "check_security",
    "client_options",
    "consume_options",
    "parse_namesrv",
    "refuse_unknown",
]

DEFAULT_NAMESRV = "127.0.0.1:9876"


def parse_namesrv(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Name server addresses from ``"h:p;h:p"``, a list, or ``$SIEVEMQ_NAMESRV`` / ``$NAMESRV_ADDR``."""
    if value is None:
        value = os.environ.get("SIEVEMQ_NAMESRV") or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    items = value.replace(",", ";").split(";") if isinstance(value, str) else list(value)
    addrs = tuple(a.strip() for a in items if a and a.strip())
    if not addrs:
        raise ValueError("no name server address given")
    for a in addrs:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"name server address {a!r} is not host:port")
    return addrs


def check_security(
    access_key: str,
    secret_key: str,
    tls: bool,
    tls_ca_file: str | None,
    tls_cert_file: str | None,
    tls_key_file: str | None,
    tls_verify: bool,
) -> None:
    """ValueError for half a key pair, or TLS settings without ``tls``."""
    if bool(access_key) != bool(secret_key):
        raise ValueError("access_key and secret_key go together: give both or neither")
    if not tls and (tls_ca_file or tls_cert_file or tls_key_file or not tls_verify):
        raise ValueError("tls_ca_file, tls_cert_file, tls_key_file and tls_verify apply only with tls=True")


@dataclass(frozen=True)
class ClientOptions:
    """How a client connects: the settings ``Producer``, ``TransactionProducer``, ``PushConsumer`` and
    ``PullConsumer`` share. Clients of one ``instance_name`` share one connection set: the first one's options win."""

    namesrv: str | Sequence[str] | None = None
    """Name server addresses (``"h:p;h:p"`` or a list; kept as a tuple); None: ``$SIEVEMQ_NAMESRV``, else
    ``$NAMESRV_ADDR``, else 127.0.0.1:9876, read when a client is created."""
    instance_name: str | None = None
    """Clients of one instance name (in one event loop) share connections, routes and heartbeats; None gives each
    client a name of its own (``pid#nanotime``)."""
    request_timeout: float = 3.0
    """Seconds to wait for a connection or an answer (name servers and brokers)."""
    heartbeat_interval: float = 30.0
    """Seconds between two heartbeats to every broker."""
    poll_namesrv_interval: float = 30.0
    """Seconds between two refreshes of the routes of the topics in use."""
    rebalance_interval: float = 20.0
    """Seconds between two rebalances of the consumers' queues (one happens at once when a group changes)."""
    persist_interval: float = 5.0
    """Seconds between two writes of the consumers' offsets."""
    access_key: str = ""
    """Sign every request with this ACL account (RocketMQ's ACL) when set, with ``secret_key``."""
    secret_key: str = field(default="", repr=False)
    """The secret of ``access_key``."""
    tls: bool = False
    """Every connection (name servers and brokers) over TLS (docs/protocol/tls.md §5)."""
    tls_ca_file: str | None = None
    """PEM certificates trusted to sign the servers' certificates (None: the system's)."""
    tls_cert_file: str | None = None
    """PEM certificate to present to servers that require one (``tlsServerAuthClient``)."""
    tls_key_file: str | None = None
    """PEM private key of ``tls_cert_file`` (None: in the same file)."""
    tls_verify: bool = True
    """False accepts any server certificate and host name: for self-signed development certificates only."""
    trace: bool = False
    """Write message traces as RocketMQ's clients do with ``enableMsgTrace`` (a producer's sends, a push consumer's
    deliveries and listener results) to ``trace_topic`` (docs/traces.md §5)."""
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    """The topic traces go to (RocketMQ's ``customizedTraceTopic``)."""

    def __post_init__(self) -> None:
        if self.namesrv is not None:
            object.__setattr__(self, "namesrv", parse_namesrv(self.namesrv))
        for name in ("request_timeout", "heartbeat_interval", "poll_namesrv_interval", "rebalance_interval",
                     "persist_interval"):  # fmt: skip
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be more than 0 seconds, not {getattr(self, name)!r}")
        check_security(self.access_key, self.secret_key, self.tls, self.tls_ca_file, self.tls_cert_file,
                       self.tls_key_file, self.tls_verify)  # fmt: skip


class ClientKwargs(TypedDict, total=False):
    """The fields of ``ClientOptions`` as keyword arguments of a client (``namesrv`` is a parameter of its own)."""

    instance_name: str | None
    request_timeout: float
    heartbeat_interval: float
    poll_namesrv_interval: float
    rebalance_interval: float
    persist_interval: float
    access_key: str
    secret_key: str
    tls: bool
    tls_ca_file: str | None
    tls_cert_file: str | None
    tls_key_file: str | None
    tls_verify: bool
    trace: bool
    trace_topic: str


@dataclass(frozen=True)
class ConsumeOptions:
    """How a ``PushConsumer`` consumes: listener concurrency, batch sizes, flow control, long polling, retries.
    Counts below 1 (``concurrency``, ``consume_batch_size``, ``pull_batch_size``) count as 1."""

    concurrency: int = 20
    """Listener calls at a time (and threads of the pool running a plain-function listener)."""
    consume_batch_size: int = 1
    """Messages per listener call, at most."""
    pull_batch_size: int = 32
    """Messages per pull, at most."""
    max_cached_messages: int = 1000
    """A queue is not pulled while this many of its messages wait for the listener..."""
    max_cached_mib: int = 100
    """... or while they hold this many MiB of bodies..."""
    max_span: int = 2000
    """... or while its first and last waiting message are this many offsets apart (concurrent consumption)."""
    pull_suspend: float = 15.0
    """Seconds a pull waits at the broker for messages to arrive (long polling)."""
    pull_timeout: float = 30.0
    """Seconds to wait for a pull's answer."""
    max_reconsume_times: int = 16
    """Deliveries of a failed message before it goes to ``%DLQ%<group>``."""
    retry_delay_level: int = 0
    """Delay level of a failed message's next delivery (0: the broker's choice, later with each attempt)."""
    suspend: float = 1.0
    """Orderly consumption: seconds before a failed batch is consumed again in place."""

    def __post_init__(self) -> None:
        for name in ("concurrency", "consume_batch_size", "pull_batch_size"):
            object.__setattr__(self, name, max(1, getattr(self, name)))

    @property
    def max_cached_bytes(self) -> int:
        """``max_cached_mib`` in bytes."""
        return self.max_cached_mib * 1024 * 1024


class ConsumeKwargs(TypedDict, total=False):
    """The fields of ``ConsumeOptions`` as keyword arguments of a ``PushConsumer``."""

    concurrency: int
    consume_batch_size: int
    pull_batch_size: int
    max_cached_messages: int
    max_cached_mib: int
    max_span: int
    pull_suspend: float
    pull_timeout: float
    max_reconsume_times: int
    retry_delay_level: int
    suspend: float


_CLIENT_FIELDS = frozenset(f.name for f in fields(ClientOptions))
_CONSUME_FIELDS = frozenset(f.name for f in fields(ConsumeOptions))


def refuse_unknown(owner: str, settings: Mapping[str, Any], *, consume: bool = False) -> None:
    """TypeError, as Python gives, for a keyword argument of ``owner`` that names no field of ``ClientOptions``
    (nor of ``ConsumeOptions`` when the client ``consume``s)."""
    for name in settings:
        if name == "namesrv" or not (name in _CLIENT_FIELDS or (consume and name in _CONSUME_FIELDS)):
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}")


def client_options(
    options: ClientOptions | None, namesrv: str | Sequence[str] | None, settings: Mapping[str, Any]
) -> ClientOptions:
    """``options`` (the defaults when None) with ``namesrv`` (unless None) and the ``ClientOptions`` fields among
    ``settings`` put over it."""
    changes = {k: v for k, v in settings.items() if k in _CLIENT_FIELDS}
    if namesrv is not None:
        changes["namesrv"] = namesrv
    base = options if options is not None else ClientOptions()
    return replace(base, **changes) if changes else base


def consume_options(consume: ConsumeOptions | None, settings: Mapping[str, Any]) -> ConsumeOptions:
    """``consume`` (the defaults when None) with the ``ConsumeOptions`` fields among ``settings`` put over it."""
    changes = {k: v for k, v in settings.items() if k in _CONSUME_FIELDS}
    base = consume if consume is not None else ConsumeOptions()
    return replace(base, **changes) if changes else base
