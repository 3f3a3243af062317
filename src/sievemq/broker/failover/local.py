"""What a failover broker knows of its own log between terms: where it ends, its epoch history, and cutting it.

Between terms no ``BrokerController`` runs, so the store is closed: the first term's decision opens it once to
learn its end (recovering it as the broker would, the filter bitmaps included), later ones use the end the last
term's store had when it stopped. The epoch history is ``epochs.json`` in the store folder (``store/epochs.py``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from sievemq.broker.config import BrokerConfig
from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.store_settings import bloom_filter, store_config
from sievemq.store import MessageStore
from sievemq.store.epochs import EpochHistory, load_epochs, save_epochs
from sievemq.store.truncate import truncate_commitlog

__all__ = ["LocalLog"]

log = logging.getLogger(__name__)

History = tuple[tuple[int, int], ...]


class LocalLog:
    """This broker's commit-log end and epoch history, kept between terms."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.root = Path(config.store_path_root_dir)
        self.path = self.root / "epochs.json"
        self.end: int | None = None
        """The commit log's end (None until ``probe``)."""
        self.history: History = tuple((e.epoch, e.start) for e in load_epochs(self.path))

    @property
    def epoch(self) -> int:
        """The last epoch of the history (0 before any)."""
        return self.history[-1][0] if self.history else 0

    async def probe(self) -> int:
        """Open the store as the broker does (recovering it after an unclean stop), note its end, close it."""
        if self.end is not None:
            return self.end
        cfg = self.config
        writer = ConfigWriter()
        config_dir = self.root / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        store = MessageStore(store_config(cfg), (cfg.broker_ip, cfg.listen_port))
        filters = ConsumerFilterManager(config_dir, bloom_filter(cfg), writer.save)
        filters.load()
        if cfg.enable_calc_filter_bit_map:
            store.set_bitmap_calculator(filters.calc_bitmap)
        store.load()
        try:
            self.end = store.max_phy_offset
        finally:
            await store.shutdown()
            await writer.close()
        return self.end

    def stopped_at(self, end: int) -> None:
        """A term's store stopped with its commit log ending at ``end``."""
        self.end = end

    def adopt(self, history: History) -> None:
        """Take the set's history as this log's (a replica following, a master starting its epoch) and save it."""
        if history != self.history:
            save_epochs(self.path, EpochHistory(history))
            self.history = history

    def truncate(self, offset: int) -> None:
        """Cut the commit log at ``offset`` (a record boundary below its end; the store is closed)."""
        assert self.end is not None
        log.warning("cutting this broker's commit log from %d back to %d: the bytes after it were never part of the "
                    "set's log in a later epoch (an old master's unreplicated tail)", self.end, offset)  # fmt: skip
        self.end = truncate_commitlog(store_config(self.config), offset)  # epochs.json is cut with it
        self.history = tuple((e.epoch, e.start) for e in load_epochs(self.path))
