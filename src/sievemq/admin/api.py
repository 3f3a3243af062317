"""The admin API under the CLI: topics and cluster info, spoken to name servers and brokers over remoting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from sievemq.acl.signature import RequestSigner
from sievemq.admin.errors import ClusterNotFound, TopicNotFound
from sievemq.client.errors import NotANameServerError, namesrv_refused
from sievemq.errors import RemotingError, RequestTimeoutError, SieveError
from sievemq.protocol import mq_json
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY, is_system_topic
from sievemq.protocol.route import TopicRouteData
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool, ForeignProtocolError
from sievemq.remoting.tls import ClientTls

if TYPE_CHECKING:
    from sievemq.admin.auth_ops import AuthAdmin


class NamesrvUnreachable(SieveError):
    """No name server of the list answered (each one's failure is in the text)."""


def describe_failure(e: BaseException) -> str:
    """A connection failure in a few words (``connection refused``, ``no answer in time``...), else its text."""
    seen: BaseException | None = e
    while seen is not None:  # the cause a wrapper hid (``raise ... from None`` keeps it as the context)
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, TimeoutError | RequestTimeoutError):
            return "no answer in time"
        seen = seen.__cause__ or seen.__context__
    return str(e) or type(e).__name__


@dataclass(frozen=True)
class BrokerInfo:
    """A broker known to the name server."""

    cluster: str
    name: str
    addrs: dict[int, str]

    @property
    def read_addr(self) -> str | None:
        """Where to read from: the master, else the lowest-numbered slave (None when the set has no address)."""
        return self.addrs.get(0) or (self.addrs[min(self.addrs)] if self.addrs else None)


def _epochs(text: str) -> list[list[int]]:
    """``haEpochHistory`` ("1@0,2@4096": epoch@startOffset, the newest last) as ``[[epoch, start], ...]``."""
    out: list[list[int]] = []
    for item in text.split(","):
        epoch, _, start = item.partition("@")
        if epoch.isdigit() and start.isdigit():
            out.append([int(epoch), int(start)])
    return out


def _disk(info: dict[str, str]) -> dict[str, Any]:
    """The store's disk as a broker's runtime info gives it (empty for a broker that does not say)."""
    out: dict[str, Any] = {}
    if "storeDiskState" in info:
        out["state"] = info["storeDiskState"]
    for key, name in (("storeDiskTotalBytes", "totalBytes"), ("storeDiskFreeBytes", "freeBytes")):
        if info.get(key, "").isdigit():
            out[name] = int(info[key])
    try:
        out["usedRatio"] = float(info["commitLogDiskRatio"])
    except (KeyError, ValueError):
        pass
    return out


class AdminClient:
    """Administration over name servers (``host:port;host:port``)."""

    def __init__(
        self,
        namesrv: str,
        timeout: float = 5.0,
        access_key: str = "",
        secret_key: str = "",
        tls: ClientTls | None = None,
    ) -> None:
        self.namesrv = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
        self.timeout = timeout
        signer = RequestSigner(access_key, secret_key) if access_key else None
        self.pool = ConnectionPool(rpc_hook=signer, tls=tls.context() if tls is not None else None)
        """Every request is signed with ``access_key`` when given (brokers and name servers with ACL on)."""

    async def close(self) -> None:
        """Close connections."""
        await self.pool.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(
        self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        resp = await self.pool.request(addr, RemotingCommand.request(code, fields, body), self.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
        return resp

    async def _namesrv_call(self, code: int, fields: dict[str, Any] | None = None) -> RemotingCommand:
        """``code`` to the first name server that answers it. An address that is not a name server (a broker
        refusing the request as not supported, an HTTP port) is skipped like an unreachable one; when it was the
        only address, NotANameServerError says what it is."""
        failures: list[tuple[str, BaseException]] = []
        for addr in self.namesrv:
            try:
                return await self._call(addr, code, fields)
            except RemotingError as e:
                wrong = namesrv_refused(addr, code, e.code)
                if wrong is None:
                    raise
                failures.append((addr, wrong))
            except ForeignProtocolError as e:
                failures.append((addr, NotANameServerError(addr, e.protocol, f"it answered {e.first_line!r}")))
            except Exception as e:  # try the next name server
                failures.append((addr, e))
        if not failures:
            raise RuntimeError("no name server configured")
        if len(failures) == 1 and isinstance(failures[0][1], NotANameServerError):
            raise failures[0][1]
        texts = [str(e) if isinstance(e, NotANameServerError) else f"{addr}: {describe_failure(e)}"
                 for addr, e in failures]  # fmt: skip
        raise NamesrvUnreachable(f"no name server answered ({'; '.join(texts)}); check --namesrv or SIEVEMQ_NAMESRV")

    async def request(
        self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """One request to a broker (``host:port``) and its answer, whatever its code (connection failures and
        timeouts raise)."""
        return await self.pool.request(addr, RemotingCommand.request(code, fields, body), self.timeout)

    async def call(
        self, addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """One request to a broker; RemotingError unless it answers SUCCESS."""
        return await self._call(addr, code, fields, body)

    async def brokers(self) -> list[BrokerInfo]:
        """Every broker the name server knows."""
        resp = await self._namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO)
        info = mq_json.loads(resp.body)  # RocketMQ's name server writes brokerAddrs with number keys
        out = []
        for name, bd in sorted((info.get("brokerAddrTable") or {}).items()):
            addrs = {int(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}
            out.append(BrokerInfo(bd.get("cluster", ""), name, addrs))
        return out

    async def route(self, topic: str) -> TopicRouteData:
        """The route of a topic (RemotingError TOPIC_NOT_EXIST when none)."""
        resp = await self._namesrv_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return TopicRouteData.from_json(mq_json.loads(resp.body))

    async def topic_list(self) -> list[str]:
        """Every topic known to the name server."""
        resp = await self._namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return list(mq_json.loads(resp.body).get("topicList") or [])

    async def check_cluster(self, cluster: str) -> None:
        """ClusterNotFound unless some registered broker belongs to ``cluster``."""
        clusters = sorted({b.cluster for b in await self.brokers()})
        if cluster not in clusters:
            raise ClusterNotFound(cluster, clusters)

    async def _target_masters(self, broker: str | None, cluster: str | None) -> list[str]:
        if broker:
            return [broker]
        if cluster:
            await self.check_cluster(cluster)
        masters = [b.addrs[0] for b in await self.brokers() if 0 in b.addrs and (not cluster or b.cluster == cluster)]
        if not masters:
            raise RuntimeError("no master broker found" + (f" in cluster {cluster}" if cluster else ""))
        return masters

    async def target_masters(self, broker: str | None, cluster: str | None) -> list[str]:
        """``[broker]`` (``host:port``), else every master of ``cluster`` (ClusterNotFound when no broker belongs
        to it), else every master the name server knows."""
        return await self._target_masters(broker, cluster)

    def auth(self) -> AuthAdmin:
        """ACL 2.0's users and policies (codes 3001-3010) through this client (``admin/auth_ops.py``)."""
        from sievemq.admin.auth_ops import AuthAdmin

        return AuthAdmin(self)

    async def create_topic(
        self,
        topic: str,
        queues: int = 8,
        perm: int = 6,
        order: bool = False,
        filter_type: str = "SINGLE_TAG",
        broker: str | None = None,
        cluster: str | None = None,
        attributes: str = "",
    ) -> list[str]:
        """Create or update a topic on one broker (``host:port``) or every master of a cluster (or all);
        ``attributes`` changes RocketMQ 5's topic attributes (``+message.type=FIFO``, ``-key``)."""
        fields = {
            "topic": topic,
            "defaultTopic": AUTO_CREATE_TOPIC_KEY,
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": perm,
            "topicFilterType": filter_type,
            "topicSysFlag": 0,
            "order": order,
        }
        if attributes:
            fields["attributes"] = attributes
        targets = await self._target_masters(broker, cluster)
        for addr in targets:
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        return targets

    async def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete a topic on every master broker (of a cluster) and on the name servers."""
        targets = await self._target_masters(None, cluster)
        for addr in targets:
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        for ns in self.namesrv:
            await self._call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
        return targets

    async def max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        """Next offset to be written in one queue."""
        resp = await self._call(broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
        return int(resp.ext_fields.get("offset", "0"))

    async def min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        """First offset still stored in one queue."""
        resp = await self._call(broker_addr, RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id})
        return int(resp.ext_fields.get("offset", "0"))

    async def group_status(self, group: str) -> list[dict[str, Any]]:
        """GET_GROUP_STATUS from every master broker."""
        out = []
        for addr in await self._target_masters(None, None):
            resp = await self._call(addr, RequestCode.GET_GROUP_STATUS, {"consumerGroup": group})
            out.append(mq_json.loads(resp.body))
        return out

    async def group_filters(self, group: str) -> list[dict[str, Any]]:
        """GET_GROUP_FILTERS from every master broker."""
        out = []
        for addr in await self._target_masters(None, None):
            resp = await self._call(addr, RequestCode.GET_GROUP_FILTERS, {"consumerGroup": group})
            out.append(mq_json.loads(resp.body))
        return out

    # ------------------------------------------------------------------------------------------ group configs
    async def group_config(self, broker_addr: str, group: str) -> dict[str, Any] | None:
        """A group's SubscriptionGroupConfig on one broker (GET_SUBSCRIPTIONGROUP_CONFIG), None when it has none."""
        try:
            resp = await self._call(broker_addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
        except RemotingError as e:
            if e.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                return None
            raise
        doc = mq_json.loads(resp.body)
        return doc if isinstance(doc, dict) else None

    async def update_group(
        self,
        group: str,
        changes: dict[str, Any],
        broker: str | None = None,
        cluster: str | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """Create or change a consumer group on one broker (``host:port``) or every master of a cluster (or all):
        each broker's current config (the defaults for a new group) with ``changes`` (RocketMQ's field names, e.g.
        ``{"consumeMessageOrderly": True}``) applied, by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP. Each broker with the
        config it now holds."""
        out = []
        for addr in await self._target_masters(broker, cluster):
            cfg = await self.group_config(addr, group) or {"groupName": group}
            cfg.update(changes, groupName=group)
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(cfg))
            out.append((addr, await self.group_config(addr, group) or cfg))
        return out

    async def explain(self, topic: str, expression: str, kind: str = "SQL92", last: int = 1000) -> list[dict[str, Any]]:
        """EXPLAIN_SELECTOR on every broker holding ``topic`` (TopicNotFound when no name server knows it)."""
        try:
            route = await self.route(topic)
        except RemotingError as e:
            if e.code == ResponseCode.TOPIC_NOT_EXIST and not e.reason:  # BROKER_GONE says more: kept
                raise TopicNotFound(topic) from None
            raise
        out = []
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(0)
            if addr is None:
                continue
            fields = {"topic": topic, "expression": expression, "expressionType": kind, "last": last}
            resp = await self._call(addr, RequestCode.EXPLAIN_SELECTOR, fields)
            out.append(mq_json.loads(resp.body))
        return out

    async def message_trace(
        self, msg_id: str, topic: str | None = None, trace_topic: str = "RMQ_SYS_TRACE_TOPIC", group: str | None = None
    ) -> dict[str, Any]:
        """A message's trace timeline and every group's filter verdict on it, as ``sievemq message trace --json``
        prints it (docs/traces.md §3; ``sievemq.admin.trace.message_trace`` gives the objects)."""
        from sievemq.admin.trace import message_trace

        return (await message_trace(self, msg_id, topic, trace_topic, group)).to_json()

    async def runtime_info(self, broker_addr: str) -> dict[str, str]:
        """A broker's counters."""
        resp = await self._call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(mq_json.loads(resp.body).get("table") or {})

    async def cluster_status(self) -> list[dict[str, Any]]:
        """Every broker of every set: role, address, commit-log end, codec, version, messages put and got (its
        counters since start), its store's disk (``state``, ``totalBytes``, ``freeBytes``, ``usedRatio``; what it
        reports), and for a slave its lag behind the master (bytes: the master's end minus its own when both answer;
        seconds: as the slave reports) and link state.

        A broker that does not answer has ``"state": "unreachable"`` and ``"error"``; one that answers but refuses
        (access control, say) has ``"state": "refused"``, ``"error"`` and the refusal's ``code`` and ``reason``."""
        rows: list[dict[str, Any]] = []
        for b in await self.brokers():
            infos: dict[int, dict[str, str] | dict[str, Any]] = {}
            for bid, addr in sorted(b.addrs.items()):
                try:
                    infos[bid] = await self.runtime_info(addr)
                except RemotingError as e:
                    infos[bid] = {"state": "refused", "error": str(e), "code": e.code, "reason": e.reason}
                except Exception as e:
                    infos[bid] = {"state": "unreachable", "error": f"{type(e).__name__}: {e}"}
            master = infos.get(0)
            master_end = int(master["commitLogMaxOffset"]) if master and "commitLogMaxOffset" in master else None
            for bid, info in infos.items():
                row: dict[str, Any] = {"cluster": b.cluster, "brokerName": b.name, "brokerId": bid,
                                       "addr": b.addrs[bid]}  # fmt: skip
                if "error" in info:
                    rows.append({**row, "role": "SLAVE" if bid else "MASTER", **info})
                    continue
                end = int(info.get("commitLogMaxOffset", 0))
                row.update(role=info.get("brokerRole", "ASYNC_MASTER"), commitLogMaxOffset=end,
                           codec=info.get("codecImplementation", ""), version=info.get("brokerVersionDesc", ""),
                           putTotal=int(info.get("msgPutTotalTodayNow", 0)),
                           getTotal=int(info.get("msgGetTotalTodayNow", 0)), disk=_disk(info))  # fmt: skip
                if info.get("haControllerMode") == "etcd":  # automatic failover: the set's epoch and in-sync set
                    row.update(epoch=int(info.get("haEpoch", 0)), replicaId=int(info.get("haReplicaId", 0)),
                               syncStateSet=[int(x) for x in str(info.get("haSyncStateSet", "")).split(",") if x],
                               epochHistory=_epochs(str(info.get("haEpochHistory", ""))))
                if row["role"] == "SLAVE":
                    lag = master_end - end if master_end is not None else int(info.get("haLagBytes", 0))
                    row.update(lagBytes=max(0, lag), lagSeconds=float(info.get("haLagSeconds", 0.0)),
                               state=info.get("haState", ""), master=info.get("haMasterAddress", ""))  # fmt: skip
                else:
                    behind = info.get("haBehind", "")
                    row.update(state=f"refusing writes: {behind}" if behind else "serving",
                               slaves=int(info.get("haConnectedSlaves", 0)),
                               slaveAckOffset=int(info.get("haSlaveAckOffset", 0)))  # fmt: skip
                rows.append(row)
        return rows

    async def topic_summaries(self, include_system: bool = False) -> list[dict[str, Any]]:
        """Every topic with its broker sets: queues, messages stored (on the master, else a slave) and the set's
        replicas as ``cluster_status`` gives them."""
        names = await self.topic_list()
        brokers = {b.name: b for b in await self.brokers()}
        system = set(brokers) | {b.cluster for b in brokers.values()}
        replicas: dict[str, list[dict[str, Any]]] = {}
        for row in await self.cluster_status():
            replicas.setdefault(row["brokerName"], []).append(row)
        out = []
        for t in names:
            if not include_system and (is_system_topic(t) or t in system):
                continue
            try:
                route = await self.route(t)
            except RemotingError:
                continue
            sets, total = [], 0
            for qd in route.queue_datas:
                addrs = brokers[qd.broker_name].addrs if qd.broker_name in brokers else {}
                addr = addrs.get(0) or (addrs[min(addrs)] if addrs else None)
                n = 0
                if addr:
                    for q in range(qd.read_queue_nums):
                        n += await self.max_offset(addr, t, q) - await self.min_offset(addr, t, q)
                total += n
                sets.append({"brokerName": qd.broker_name, "readQueueNums": qd.read_queue_nums,
                             "writeQueueNums": qd.write_queue_nums, "messages": n,
                             "replicas": replicas.get(qd.broker_name, [])})  # fmt: skip
            out.append({"topic": t, "messages": total, "brokers": sets})
        return out
