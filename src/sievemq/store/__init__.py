"""The durable store: commit log, consume queues, key index, checkpoint, recovery, retention.

Public API is ``MessageStore`` and its value types (see ``message_store.py``), the delay-level
table (``delay_levels.py``) and crash-safe JSON files (``jsonfile.py``).
"""

from sievemq.store.consume_queue import CqExtUnit
from sievemq.store.delay_levels import SCHEDULE_TOPIC, parse_levels
from sievemq.store.jsonfile import atomic_write_json, read_json
from sievemq.store.message_store import (
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
    "parse_levels",
    "read_json",
]
