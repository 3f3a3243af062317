"""The broker: wires the store, the managers and the processors, serves them, and registers with name servers."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path
from typing import Any, Protocol

from sievemq.acl.early import early_check
from sievemq.broker.access import auth_copy, broker_acl, broker_auth, broker_signer, filtersrv_env
from sievemq.broker.clients import ConsumerManager, ProducerManager
from sievemq.broker.config import BrokerConfig
from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.filter_servers import FilterServerManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.locks import QueueLocks
from sievemq.broker.long_polling import PullHoldService
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.service import PopService, PopSettings
from sievemq.broker.processors.admin import AdminProcessor, AdminSettings
from sievemq.broker.processors.auth import AuthProcessor
from sievemq.broker.processors.broker_admin import BrokerAdminProcessor
from sievemq.broker.processors.client import ClientProcessor
from sievemq.broker.processors.client_admin import ClientAdminProcessor
from sievemq.broker.processors.consume_directly import ConsumeDirectlyProcessor
from sievemq.broker.processors.consume_stats import ConsumeStatsProcessor
from sievemq.broker.processors.epoch import EpochProcessor
from sievemq.broker.processors.filters import FilterAdminProcessor
from sievemq.broker.processors.group_admin import GroupAdminProcessor
from sievemq.broker.processors.groups import GroupStatusProcessor
from sievemq.broker.processors.ha import HaProcessor
from sievemq.broker.processors.offsets import OffsetProcessor
from sievemq.broker.processors.pop import PopProcessor
from sievemq.broker.processors.pull import PullProcessor, PullSettings, memory_share, slave_read_limit
from sievemq.broker.processors.query import QueryProcessor
from sievemq.broker.processors.reply import ReplyProcessor
from sievemq.broker.processors.send import SendProcessor, SendSettings
from sievemq.broker.processors.send_back import SendBackProcessor
from sievemq.broker.processors.transaction import TransactionProcessor
from sievemq.broker.processors.verdicts import MessageVerdictProcessor
from sievemq.broker.registration import NamesrvRegistrar, RegisterSettings, TableSnapshot
from sievemq.broker.replication import build_replication
from sievemq.broker.schedule import ScheduleService
from sievemq.broker.stats import BrokerStats
from sievemq.broker.store_settings import bloom_filter, store_config
from sievemq.broker.timer import TimerService, TimerSettings  # timer
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.book import CheckSettings
from sievemq.broker.transactions.service import TransactionService
from sievemq.ha.term import Term
from sievemq.metrics.loop_lag import LoopLagMonitor
from sievemq.protocol import accel
from sievemq.protocol.delay_levels import parse_levels
from sievemq.protocol.header_rules import check_request
from sievemq.protocol.message import MessageExt
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.guard import HeaderScreen
from sievemq.remoting.server import ProcessorTable, RemotingServer, allow_all
from sievemq.settings.tls import outgoing_tls, server_tls
from sievemq.store import MessageStore, PutStatus

log = logging.getLogger(__name__)


class _Processor(Protocol):
    def register(self, table: ProcessorTable) -> None: ...


class BrokerController:
    """Runs one broker in the current event loop: builds the services and hands each processor the ones it uses."""

    def __init__(self, config: BrokerConfig, recover_from: str = "", term: Term | None = None) -> None:
        """``recover_from``: a slave's HA address to copy the commit log from first (``--recover-from-slave``);
        ``term``: this broker's role and epoch under automatic failover (``broker/failover``)."""
        self.config = config
        root = Path(config.store_path_root_dir)
        config_dir = root / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        self.store_host = (config.broker_ip, config.listen_port)
        self.store = MessageStore(store_config(config), self.store_host)
        self.writer = ConfigWriter()
        save = self.writer.save
        self.topics = TopicConfigManager(
            config_dir,
            config.broker_name,
            config.broker_cluster_name,
            config.default_topic_queue_nums,
            config.auto_create_topic_enable,
            save,
            self.writer.settled,
            config.max_topics,
            writer=self.writer,  # changes go to config/topics.json's journal (docs/topic-table.md)
        )
        if config.trace_topic_enable:  # RocketMQ's trace topic, 1 queue (docs/traces.md §1); a stored config wins
            trace_topic = config.msg_trace_topic_name
            self.topics.table.setdefault(trace_topic, TopicConfig(trace_topic, 1, 1))
        self.offsets = ConsumerOffsetManager(config_dir, save)
        self.groups = SubscriptionGroupManager(
            config_dir, config.auto_create_subscription_group, config.max_reconsume_times, save,
            config.max_subscription_groups, writer=self.writer,
        )  # fmt: skip
        self.consumers = ConsumerManager(self._notify_consumer_ids_changed, config.subscription_consistency)
        self.producers = ProducerManager()
        self.bloom = bloom_filter(config)
        self.filters = ConsumerFilterManager(config_dir, self.bloom, save)
        self.hold = PullHoldService()
        self.stats = BrokerStats()
        self.loop_lag = LoopLagMonitor()
        levels = parse_levels(config.message_delay_level)
        self.schedule = ScheduleService(self.store, levels, config_dir, self._put_scheduled, save=save)
        timer_settings = TimerSettings(config.timer_max_delay_sec, config.timer_max_pending)  # timer
        self.timers = TimerService(self.store, config_dir, self.store_host, timer_settings, save)  # timer
        checks = CheckSettings(config.transaction_timeout, config.transaction_check_max,
                               config.transaction_check_interval, config.transaction_open_max)  # fmt: skip
        self.transactions = TransactionService(self.store, self.topics, self.producers, self.offsets, checks,
                                               self.store_host, len(levels))  # fmt: skip
        self.replication = build_replication(config, self.store, config_dir, save, topics=self.topics,
                                             groups=self.groups, offsets=self.offsets, schedule=self.schedule,
                                             filters=self.filters, recover_from=recover_from, term=term)  # fmt: skip
        self.replication.wake = self.hold.wake
        self.pop = PopService(self.store, self.topics, self.groups, self.offsets, self.hold, config_dir, save,
                              config.broker_name, self.store_host, PopSettings(
                                  config.pop_inflight_max,
                                  check_in_memory=config.init_pop_offset_by_check_msg_in_mem,
                                  new_group_starts_at_end=config.new_group_starts_at_end,
                                  memory_limit=memory_share(config.access_message_in_memory_max_ratio)))  # fmt: skip
        self.acl = broker_acl(config)
        self.auth = broker_auth(config, self.writer.write)  # ACL 2.0 (docs/acl2.md); excludes aclEnable
        table = ProcessorTable("broker", check_request, self.acl or self.auth)
        self.filter_servers = FilterServerManager(
            config.advertised_addr,
            config.broker_name,
            config.broker_id,
            nums=config.filter_server_nums,
            listen_host=config.listen_host,
            advertised_ip=config.broker_ip,
            config_path=config.filter_server_config or None,
            env=filtersrv_env(config, self.acl),
        )
        for proc in self._processors(len(levels)):
            proc.register(table)
        if self.auth is not None:
            sync = self.replication.sync  # a slave's writes: answered from its master's copy (docs/acl2.md §8)
            AuthProcessor(self.auth.store, self.replication, sync.refresh_auth if sync else None).register(table)
            if self.replication.sync is not None:  # a slave copies its master's users and ACLs (docs/acl2.md §8)
                self.replication.sync.auth = auth_copy(config, self.auth)
        self.filter_servers.register(table)
        self.table = table
        limits = config.server_limits()
        tls = server_tls(config)  # the VIP channel has the same TLS as the main port
        screen: HeaderScreen | None = early_check(self.acl)  # with ACL on, a large frame's header names an account
        if self.auth is not None:  # ACL 2.0: an enabled user
            screen = self.auth.screen
        self.server = RemotingServer(table, config.listen_host, config.listen_port, self._on_close, limits, tls, screen)
        self.vip_server: RemotingServer | None = None
        if config.listen_vip_channel:
            vip_port = config.listen_port - 2
            self.vip_server = RemotingServer(table, config.listen_host, vip_port, self._on_close, limits, tls, screen)
        self.registrar = NamesrvRegistrar(
            config.namesrv_list(),
            self._register_header(),
            self._register_body,
            config.register_broker_interval_seconds,
            broker_signer(config),
            outgoing_tls(config),
            self.replication.on_registration,
            self.replication.wants_master,
            settings=RegisterSettings(config.compressed_register, config.force_register,
                                      config.enable_split_registration, config.split_registration_size),
            force=self._registration_answers,  # a slave learns its master from what a registration answers
        )  # fmt: skip
        self._tasks: list[asyncio.Task[None]] = []
        self.final_phy_offset: int | None = None
        """The commit log's end once ``stop()`` stopped every writer (a failover broker's next term starts there)."""

    def _processors(self, max_delay_level: int) -> list[_Processor]:
        c = self.config
        send = SendSettings(
            broker_name=c.broker_name,
            cluster_name=c.broker_cluster_name,
            store_host=self.store_host,
            max_message_size=c.max_message_size,
            auto_create_topic=c.auto_create_topic_enable,
            max_reconsume_times=c.max_reconsume_times,
            max_delay_level=max_delay_level,
        )
        pull = PullSettings(c.long_polling_enable, c.short_polling_time_mills, c.enable_property_filter,
                            slave_read_limit(c.slave_read_enable, c.access_message_in_memory_max_ratio))  # fmt: skip
        admin = AdminSettings(c.broker_name, c.broker_cluster_name, c.advertised_addr, c.default_topic_queue_nums)
        gate = self.replication
        check_more = self.acl.check_more if self.acl is not None else allow_all
        if self.auth is not None:
            check_more = self.auth.check_more
        self.transactions.gate = gate
        self.pop.gate = gate
        return [
            TransactionProcessor(self.transactions, gate, check_more),
            ReplyProcessor(
                self.store, self.producers, self.stats, c.broker_cluster_name, self.store_host, c.max_message_size, gate
            ),
            SendProcessor(self.store, self.topics, self.groups, self.stats, send, gate, self.transactions, self.timers),
            SendBackProcessor(self.store, self.topics, self.groups, self.store_host, max_delay_level, gate,
                              check_more),
            PullProcessor(
                self.store,
                self.topics,
                self.groups,
                self.consumers,
                self.filters,
                self.offsets,
                self.hold,
                self.stats,
                pull,
            ),
            PopProcessor(
                self.pop,
                self.topics,
                self.groups,
                self.consumers,
                self.filters,
                self.stats,
                c.enable_property_filter,
                gate,
            ),
            ClientProcessor(
                self.consumers,
                self.producers,
                self.groups,
                self.topics,
                self.filters,
                QueueLocks(),
                c.enable_property_filter,
                self.pop.prepare,
            ),
            OffsetProcessor(
                self.offsets,
                self.store,
                self.writer,
                self.groups,
                self.topics,
                self.sync_flush,
                c.new_group_starts_at_end,
                memory_share(c.access_message_in_memory_max_ratio),
            ),
            QueryProcessor(self.store, self.consumers),
            ConsumeDirectlyProcessor(self.store, self.consumers, c.broker_name),
            AdminProcessor(
                self.topics,
                self.groups,
                self.offsets,
                self.store,
                self.consumers,
                self.hold,
                self.stats,
                self.writer,
                self.register_now,
                admin,
                gate,
                self._extra_runtime_info,
            ),
            GroupStatusProcessor(self.consumers, self.offsets, self.topics, self.store, c.broker_name),
            ConsumeStatsProcessor(self.offsets, self.store, self.topics, self.consumers, c.broker_name,
                                  self._pop_cursor, lambda: self.groups.table, c.advertised_addr),
            ClientAdminProcessor(self.consumers, self.producers),
            BrokerAdminProcessor(c, self.topics, self.store, self.stats),
            GroupAdminProcessor(self.offsets, self.groups, self.topics, self.store, self.consumers, self.filters,
                                self.pop, self.hold, self.writer, c.broker_name, gate),
            FilterAdminProcessor(self.consumers, self.filters, self.topics, self.store, c.broker_name,
                                 self.filter_servers.function_counts.totals),
            MessageVerdictProcessor(self.consumers, self.filters, self.offsets, self.topics, self.store,
                                    c.broker_name, c.enable_property_filter,
                                    self.filter_servers.function_counts.totals),  # docs/traces.md §4
            HaProcessor(self.store, self.offsets, self.schedule, self.filters, self.replication.claimed_ahead,
                        self.replication.link_fields),
            EpochProcessor(self.replication.term, self.store, c.broker_id),
        ]

    # ------------------------------------------------------------------ registration
    def _register_header(self) -> dict[str, Any]:
        c = self.config
        return {
            "brokerAddr": c.advertised_addr,
            "brokerId": c.broker_id,
            "brokerName": c.broker_name,
            "clusterName": c.broker_cluster_name,
            "haServerAddr": c.ha_address,
        }

    def _register_body(self) -> TableSnapshot:
        # references only: the registrar encodes them once per data version, beside the event loop when large
        topics = self.topics
        return TableSnapshot(dict(topics.data_version), list(topics.table.values()), self.filter_servers.addresses())

    def _registration_answers(self) -> bool:
        return self.replication.is_slave and self.replication.term is None

    async def register_now(self) -> None:
        """Register with every name server at once (after a topic change)."""
        await self.registrar.register_all()

    # ------------------------------------------------------------------ callbacks
    def _pop_cursor(self, group: str, topic: str, queue_id: int) -> int | None:
        qs = self.pop.book.queue(group, topic, queue_id)
        return qs.cursor if qs is not None else None

    def _notify_consumer_ids_changed(self, group: str, conns: list[Connection]) -> None:
        gc = self.groups.get(group)
        if gc is not None and not gc.notifyConsumerIdsChangedEnable:
            return
        for conn in conns:
            cmd = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
            conn.send_oneway(cmd)

    def _on_close(self, conn: Connection) -> None:
        self.consumers.connection_closed(conn)
        self.producers.connection_closed(conn)
        self.filter_servers.connection_closed(conn)

    def _on_dispatch(self, topic: str, queue_id: int, queue_offset: int, tags_code: int, props: dict[str, str]) -> None:
        # under automatic failover a master's message is visible once the replicas in sync hold it: then the
        # replication wakes the queue's held pulls (``Replication.wake``)
        if self.replication.visible(topic, queue_id):
            self.hold.on_dispatch(topic, queue_id, queue_offset, tags_code, props)

    async def _put_scheduled(self, msg: MessageExt) -> bool:
        result = await self.store.put_message(msg)
        return result.status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)

    # ------------------------------------------------------------------ lifecycle
    @property
    def sync_flush(self) -> bool:
        """True under SYNC_FLUSH."""
        return self.config.flush_disk_type == "SYNC_FLUSH"

    async def _persist_offsets_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:  # the writes happen in the config writer's thread
                self.offsets.persist()
                self.filters.persist()
            except Exception:
                log.exception("persisting consumer offsets or filters failed")

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(5.0)
            try:
                now = time.monotonic()
                self.consumers.expire(now, self.config.channel_expired_seconds)
                self.producers.expire(now, self.config.channel_expired_seconds)
            except Exception:
                log.exception("housekeeping failed")

    def _extra_runtime_info(self) -> dict[str, str]:
        """What GET_BROKER_RUNTIME_INFO adds to the admin processor's counters: replication, event-loop lag, and
        which codecs run (``codecImplementation``: compiled or pure-python), the store's disk."""
        return {
            **self.store.disk.runtime_info(),
            **self.replication.runtime_info(),
            **self.loop_lag.stats.table(),
            "codecImplementation": accel.implementation(),
            **self.timers.info(),  # timer
        }

    async def start(self) -> None:
        """Load state, recover the store, listen, and register with the name servers."""
        gc.disable()  # a broker of 100,000 topics loads millions of long-lived objects: no collection walks them
        try:
            self.topics.load()
            self.offsets.load()
            self.groups.load()
            self.schedule.load()
            self.filters.load()
            if self.config.enable_calc_filter_bit_map:
                self.store.set_bitmap_calculator(self.filters.calc_bitmap)
            self.store.load()
        finally:
            gc.enable()  # (the CLI freezes what start-up made once the broker serves: util/heap.py)
        self.store.add_dispatch_listener(self._on_dispatch)
        await self.store.start()
        self.topics.on_change = self.registrar.kick
        await self.replication.start()  # a recovery (--recover-from-slave) completes before clients are served
        await self.server.start()
        if self.vip_server is not None:
            await self.vip_server.start()
        if not self.replication.is_slave:  # a slave's delayed messages are delivered by its master, and copied
            self.schedule.start()
            self.timers.start()  # timer
        await self.transactions.start(checks=not self.replication.is_slave)
        await self.pop.start(rounds=not self.replication.is_slave)
        self.loop_lag.start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._tasks.append(asyncio.create_task(self._persist_offsets_loop()))
        self.filter_servers.on_change = self.registrar.kick
        await self.filter_servers.start()
        await self.registrar.register_all()
        self.registrar.start()
        log.info("broker %s listening on %s", self.config.broker_name, self.config.advertised_addr)

    async def stop(self) -> None:
        """Unregister, stop serving, flush and mark a clean shutdown."""
        await self.loop_lag.stop()
        for t in self._tasks:
            t.cancel()
        await self.filter_servers.stop()
        await self.registrar.stop()
        self.hold.wake_all()
        await self.server.stop()
        if self.vip_server is not None:
            await self.vip_server.stop()
        await self.replication.stop()
        await self.schedule.stop()
        await self.timers.stop()  # timer
        await self.transactions.stop()
        await self.pop.stop()
        self.offsets.persist(force=True)
        self.filters.persist()
        self.topics.persist()
        self.groups.persist()
        await self.writer.close()
        await self.topics.close()
        self.final_phy_offset = self.store.max_phy_offset  # nothing writes any more: what the store holds
        await self.store.shutdown()
        log.info("broker %s stopped cleanly", self.config.broker_name)
