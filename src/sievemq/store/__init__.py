"""The durable store: commit log, consume queues, key index, checkpoint, recovery, retention.

Public API is ``MessageStore`` and its value types (see ``message_store.py``), the consume-queue
extension's unit and probe types (``consume_queue_ext.py``), the delay-level table
(``delay_levels.py``) and crash-safe JSON files (``jsonfile.py``).
"""

from sievemq.store.consume_queue_ext import BitmapProbe, CqExtUnit, is_ext_address
from sievemq.store.delay_levels import SCHEDULE_TOPIC, parse_levels
from sievemq.store.jsonfile import atomic_write_json, read_json
from sievemq.store.message_store import (
    BitmapCalculator,
    BitmapProbeFilter,
    DispatchListener,
    GetResult,
    GetStatus,
    MessageFilter,
    MessageStore,
    PutResult,
    PutStatus,
    StoreConfig,
    StoreError,
)

__all__ = [
    "SCHEDULE_TOPIC",
    "BitmapCalculator",
    "BitmapProbe",
    "BitmapProbeFilter",
    "CqExtUnit",
    "DispatchListener",
    "GetResult",
    "GetStatus",
    "MessageFilter",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "StoreConfig",
    "StoreError",
    "atomic_write_json",
    "is_ext_address",
    "parse_levels",
    "read_json",
]
