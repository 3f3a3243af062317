"""Name-server request processors, one method per request code (docs/protocol/requests.md §14)."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib

import orjson

from sievemq.namesrv.departures import describe
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol import register_body
from sievemq.protocol.names import IllegalName
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.protocol.register_body import PART_FIELD, BodyError, looks_compressed, table_part, version_key
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_str, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.settings.properties import config_properties

log = logging.getLogger(__name__)

OFF_LOOP_BYTES = 64 * 1024
"""A registration body larger than this is read in a worker thread (the event loop keeps answering routes)."""


class NamesrvProcessors:
    """Answers the name server's request codes over a RouteTable and a KV store."""

    def __init__(self, routes: RouteTable, order_message_enable: bool = False, config: object | None = None) -> None:
        """``config``: the name server's settings, answered to GET_NAMESRV_CONFIG."""
        self.routes = routes
        self.config = config
        self.kv: dict[str, dict[str, str]] = {}
        self.order_message_enable = order_message_enable
        self.routes_found = 0
        """GET_ROUTEINFO_BY_TOPIC answered with a route (``/metrics``)."""
        self.routes_missing = 0
        """GET_ROUTEINFO_BY_TOPIC answered TOPIC_NOT_EXIST."""
        self.registrations = 0
        """REGISTER_BROKER requests accepted."""

    def register(self, table: ProcessorTable) -> None:
        """Put every processor into ``table``."""
        table.register(RequestCode.REGISTER_BROKER, self.register_broker)
        table.register(RequestCode.UNREGISTER_BROKER, self.unregister_broker)
        table.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route)
        table.register(RequestCode.GET_BROKER_CLUSTER_INFO, self.get_cluster_info)
        table.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.get_topic_list)
        table.register(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, self.get_system_topic_list)
        table.register(RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic)
        table.register(RequestCode.PUT_KV_CONFIG, self.put_kv)
        table.register(RequestCode.GET_KV_CONFIG, self.get_kv)
        table.register(RequestCode.DELETE_KV_CONFIG, self.delete_kv)
        table.register(RequestCode.GET_KVLIST_BY_NAMESPACE, self.get_kv_list)
        table.register(RequestCode.QUERY_DATA_VERSION, self.query_data_version)
        table.register(RequestCode.GET_NAMESRV_CONFIG, self.get_config)
        table.register(RequestCode.WIPE_WRITE_PERM_OF_BROKER, self.wipe_write_perm)
        table.register(RequestCode.ADD_WRITE_PERM_OF_BROKER, self.add_write_perm)

    async def register_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """103 REGISTER_BROKER: record the broker, its topics and its filter servers. The body may be compressed
        (RocketMQ's binary form: header ``compressed``, or recognised by its zlib header); the same body again
        under the same data version is only a sign of life (docs/registration.md §3)."""
        f = cmd.ext_fields
        body = cmd.body or b""
        crc = zlib.crc32(body) & 0x7FFFFFFF
        given = int_or(f, "bodyCrc32", 0)
        if given and crc != given:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        cluster, addr = require_str(f, "clusterName"), require_str(f, "brokerAddr")
        name, broker_id = require_str(f, "brokerName"), require_int(f, "brokerId")
        ha = get_str(f, "haServerAddr", "") or ""
        key = (crc, len(body))
        result = self.routes.repeat(cluster, addr, name, broker_id, ha, key, id(conn), time.monotonic())
        if result is None:
            try:
                part = table_part(f.get(PART_FIELD))
                compressed = get_bool(f, "compressed") or looks_compressed(body)
                if len(body) > OFF_LOOP_BYTES:  # a large table: read it beside the event loop
                    decoded = await asyncio.to_thread(register_body.decode, body, compressed)
                else:
                    decoded = register_body.decode(body, compressed)
            except IllegalName as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(e), {REASON_FIELD: Reason.INVALID_NAME})
            except ValueError as e:  # BodyError, a bad topicTablePart, a value out of range
                why = str(e) if isinstance(e, BodyError) else f"malformed RegisterBrokerBody: {e}"
                return cmd.response(ResponseCode.SYSTEM_ERROR, why, {REASON_FIELD: Reason.INVALID_HEADER})
            result = self.routes.register_broker(
                cluster=cluster,
                broker_addr=addr,
                broker_name=name,
                broker_id=broker_id,
                ha_server_addr=ha,
                topic_configs=decoded.topics,
                data_version=decoded.data_version,
                filter_server_list=decoded.filter_servers,
                conn_id=id(conn),
                now=time.monotonic(),
                part=part,
                body_key=key,
            )
        self.registrations += 1
        kv = self.kv.get("ORDER_TOPIC_CONFIG", {})
        body_out = orjson.dumps({"table": kv}) if kv else b""
        return cmd.response(
            ResponseCode.SUCCESS,
            ext_fields={"haServerAddr": result.ha_server_addr or None, "masterAddr": result.master_addr or None},
            body=body_out,
        )

    async def unregister_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """104 UNREGISTER_BROKER."""
        f = cmd.ext_fields
        self.routes.unregister_broker(
            get_str(f, "clusterName", "") or "",
            require_str(f, "brokerAddr"),
            require_str(f, "brokerName"),
            int_or(f, "brokerId", 0),
            now=time.monotonic(),
        )
        return cmd.response(ResponseCode.SUCCESS)

    async def get_route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """105 GET_ROUTEINFO_BY_TOPIC: TopicRouteData JSON, or TOPIC_NOT_EXIST (reason ``BROKER_GONE`` and the
        departed brokers named when the topic's brokers all left)."""
        topic = require_str(cmd.ext_fields, "topic")
        route = self.routes.route(topic)
        if route is None:
            self.routes_missing += 1
            gone = self.routes.departures.of_topic(topic)
            if gone:
                remark = describe(topic, gone, time.monotonic())
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, remark, {REASON_FIELD: Reason.BROKER_GONE})
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        self.routes_found += 1
        if self.order_message_enable:
            route.order_topic_conf = self.kv.get("ORDER_TOPIC_CONFIG", {}).get(topic)
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(route.to_json()))

    async def get_cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """106 GET_BROKER_CLUSTER_INFO."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.routes.cluster_info()))

    async def get_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": self.routes.topic_list()}))

    async def get_system_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """304 GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names, and a broker to ask for its own (305)."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.routes.system_topic_list()))

    async def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """216 DELETE_TOPIC_IN_NAMESRV."""
        self.routes.delete_topic(require_str(cmd.ext_fields, "topic"))
        return cmd.response(ResponseCode.SUCCESS)

    async def put_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """100 PUT_KV_CONFIG."""
        f = cmd.ext_fields
        self.kv.setdefault(require_str(f, "namespace"), {})[require_str(f, "key")] = require_str(f, "value")
        return cmd.response(ResponseCode.SUCCESS)

    async def get_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """101 GET_KV_CONFIG."""
        f = cmd.ext_fields
        ns, key = require_str(f, "namespace"), require_str(f, "key")
        value = self.kv.get(ns, {}).get(key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    async def delete_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """102 DELETE_KV_CONFIG."""
        f = cmd.ext_fields
        self.kv.get(require_str(f, "namespace"), {}).pop(require_str(f, "key"), None)
        return cmd.response(ResponseCode.SUCCESS)

    async def get_kv_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """219 GET_KVLIST_BY_NAMESPACE."""
        ns = require_str(cmd.ext_fields, "namespace")
        table = self.kv.get(ns)
        if not table:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"table": table}))

    async def query_data_version(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """322 QUERY_DATA_VERSION: has the broker's data version changed since its last registration?"""
        addr = require_str(cmd.ext_fields, "brokerAddr")
        live = self.routes.live.get(addr)
        try:
            incoming = orjson.loads(cmd.body) if cmd.body else {}
        except orjson.JSONDecodeError:
            incoming = {}
        changed = live is None or version_key(live.data_version) != version_key(incoming)
        if live is not None:
            live.last_update = time.monotonic()
        body = orjson.dumps(live.data_version) if live else b""
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"changed": changed}, body=body)

    async def get_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """319 GET_NAMESRV_CONFIG: the name server's settings as properties text (camelCase keys, secrets left
        out). UPDATE_NAMESRV_CONFIG (318) is not served: settings are read at start."""
        body = config_properties(self.config).encode() if self.config is not None else b""
        return cmd.response(ResponseCode.SUCCESS, body=body)

    async def wipe_write_perm(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """205 WIPE_WRITE_PERM_OF_BROKER, header ``brokerName``: its topics' routes lose PERM_WRITE (producers stop
        sending to it; ``RouteTable.set_write_perm``); ``wipeTopicCount`` answers how many."""
        count = self.routes.set_write_perm(require_str(cmd.ext_fields, "brokerName"), writable=False)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    async def add_write_perm(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """327 ADD_WRITE_PERM_OF_BROKER, header ``brokerName``: its topics' routes become read-write again;
        ``addTopicCount`` answers how many."""
        count = self.routes.set_write_perm(require_str(cmd.ext_fields, "brokerName"), writable=True)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})
