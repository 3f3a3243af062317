"""The proxy process: a grpc.aio server with the MessagingService, and the 4.x producer behind it."""

from __future__ import annotations

from pathlib import Path

import grpc

from sievemq.acl.loader import AclFile
from sievemq.acl.signature import RequestSigner
from sievemq.client.producer import Producer
from sievemq.proxy.access2 import Switches
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.interceptor import AclInterceptor, Checker, PlainChecker, UserChecker
from sievemq.proxy.metrics import GrpcMetricsInterceptor, GrpcStats
from sievemq.proxy.service import MessagingService
from sievemq.proxy.transactions import ProxyTransactions
from sievemq.proxy.users import UserBook
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from sievemq.remoting.connection import ConnectionPool
from sievemq.remoting.tls import ClientTls
from sievemq.util.ports import listen_problem

__all__ = ["PROXY_PRODUCER_GROUP", "ProxyServer"]

PROXY_PRODUCER_GROUP = "SIEVEMQ_PROXY_PRODUCER"


class ProxyServer:
    """Serves apache.rocketmq.v2 on ``listenHost:listenPort`` for the cluster of ``namesrvAddr``."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        timeout = config.request_timeout_seconds
        ak, sk = config.acl_access_key, config.acl_secret_key
        tls = config.client_tls()
        self.producer = Producer(config.namesrv_list(), PROXY_PRODUCER_GROUP, send_timeout=timeout,
                                 request_timeout=timeout, access_key=ak, secret_key=sk, **tls)  # fmt: skip
        self.tx_producer = ProxyTransactions.make_producer(config.namesrv_list(), timeout, ak, sk, tls)
        self.transactions = ProxyTransactions(self.tx_producer, timeout)
        self.users = self._user_book(config)
        """ACL 2.0: the brokers' users and policies (None when off; docs/acl2.md §9)."""
        checker: Checker | None = None
        if config.acl_enable:
            checker = PlainChecker(AclFile(config.acl_file), config.acl_max_clock_skew_seconds)
        elif self.users is not None:
            switches = Switches(config.authentication_enabled, config.authorization_enabled)
            checker = UserChecker(self.users, switches, config.acl_max_clock_skew_seconds)
        self.acl = AclInterceptor(checker) if checker is not None else None
        self.grpc_stats = GrpcStats()
        """Calls by method and code, for ``/metrics`` (sievemq/proxy/metrics.py); ACL refusals counted too."""
        interceptors: list[grpc.aio.ServerInterceptor] = [GrpcMetricsInterceptor(self.grpc_stats)]
        if self.acl is not None:
            interceptors.append(self.acl)
        # No SO_REUSEPORT (gRPC's default): a second proxy on a taken port must fail, not share it.
        self.server = grpc.aio.server(
            interceptors=interceptors,
            options=[("grpc.so_reuseport", 0), ("grpc.max_concurrent_streams", config.max_streams_per_connection)],
            maximum_concurrent_rpcs=config.max_concurrent_calls,
        )
        self.port = 0
        self.service: MessagingService | None = None

    @staticmethod
    def _user_book(config: ProxyConfig) -> UserBook | None:
        if not (config.authentication_enabled or config.authorization_enabled):
            return None
        c, tls = config, None
        if c.tls_client_enable:
            tls = ClientTls(c.tls_client_trust_cert_path, c.tls_client_cert_path, c.tls_client_key_path,
                            verify=c.tls_client_auth_server).context()  # fmt: skip
        pool = ConnectionPool(rpc_hook=RequestSigner(c.acl_access_key, c.acl_secret_key), tls=tls)
        return UserBook(pool, c.namesrv_list(), c.rocket_mq_cluster_name, c.auth_metadata_refresh_seconds,
                        c.request_timeout_seconds)  # fmt: skip

    @property
    def addr(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self.config.advertised_ip}:{self.port}"

    async def start(self) -> None:
        """Start the producer and listen."""
        await self.producer.start()
        if self.users is not None:
            await self.users.start()
        self.transactions.bind()
        await self.tx_producer.start()
        where = f"{self.config.listen_host}:{self.config.listen_port}"
        problem = listen_problem(self.config.listen_host, self.config.listen_port)
        if problem is not None:  # said in our words: gRPC would log its own line first and give no reason
            raise RuntimeError(f"cannot listen on {where}: {problem}")
        try:
            credentials = self.credentials()
            if credentials is None:
                self.port = self.server.add_insecure_port(where)
            else:
                self.port = self.server.add_secure_port(where, credentials)
        except RuntimeError as e:
            raise RuntimeError(f"cannot listen on {where}: {e}") from None
        if not self.port:
            raise RuntimeError(f"cannot listen on {where}: the address is in use or not local")
        endpoint = (self.config.advertised_ip, self.port)
        service = MessagingService(self.config, self.producer, endpoint, self.transactions)
        rpc.add_MessagingServiceServicer_to_server(service, self.server)  # type: ignore[no-untyped-call]
        self.service = service
        self.producer.instance.directly_relay = service.verify.relay  # 309s for the 5.x clients it registered
        service.consume.renewals.start()
        await self.server.start()

    def credentials(self) -> grpc.ServerCredentials | None:
        """The TLS credentials of ``tlsMode`` enforcing (None: plain TCP)."""
        c = self.config
        if c.tls_mode != "enforcing":
            return None
        trust = Path(c.tls_server_trust_cert_path).read_bytes() if c.tls_server_trust_cert_path else None
        pair = (Path(c.tls_server_key_path).read_bytes(), Path(c.tls_server_cert_path).read_bytes())
        return grpc.ssl_server_credentials(
            [pair], root_certificates=trust, require_client_auth=c.tls_server_auth_client
        )

    async def stop(self) -> None:
        """Stop listening (in-flight calls get a second), then the producer."""
        await self.server.stop(1.0)
        if self.service is not None:
            await self.service.consume.renewals.stop()
        if self.users is not None:
            await self.users.stop()
            await self.users.pool.close()
        await self.tx_producer.close()
        await self.producer.close()
