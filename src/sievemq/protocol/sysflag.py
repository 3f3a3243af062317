"""Message sysFlag bits (RocketMQ ``MessageSysFlag``), docs/protocol/message-format.md §4.

``MessageSysFlag`` is an ``IntFlag`` for readable code; the plain ``int`` constants below are the
same values for hot paths (``IntFlag`` arithmetic is slow).
"""

from __future__ import annotations

from enum import IntFlag

__all__ = [
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "COMPRESSION_LZ4_TYPE",
    "COMPRESSION_TYPE_MASK",
    "COMPRESSION_ZLIB_TYPE",
    "COMPRESSION_ZSTD_TYPE",
    "INNER_BATCH_FLAG",
    "MULTI_TAGS_FLAG",
    "NEED_UNWRAP_FLAG",
    "STOREHOSTADDRESS_V6_FLAG",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_MASK",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "MessageSysFlag",
    "reset_transaction_value",
    "transaction_value",
]

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_LZ4_TYPE = 0x100
COMPRESSION_ZSTD_TYPE = 0x200
COMPRESSION_ZLIB_TYPE = 0x300
COMPRESSION_TYPE_MASK = 0x700


class MessageSysFlag(IntFlag):
    """sysFlag bits; the transaction type is the 2-bit field ``TRANSACTION_MASK`` (0x0/0x4/0x8/0xC)."""

    COMPRESSED = COMPRESSED_FLAG
    MULTI_TAGS = MULTI_TAGS_FLAG
    TRANSACTION_PREPARED = TRANSACTION_PREPARED_TYPE
    TRANSACTION_COMMIT = TRANSACTION_COMMIT_TYPE
    TRANSACTION_ROLLBACK = TRANSACTION_ROLLBACK_TYPE
    BORNHOST_V6 = BORNHOST_V6_FLAG
    STOREHOSTADDRESS_V6 = STOREHOSTADDRESS_V6_FLAG
    NEED_UNWRAP = NEED_UNWRAP_FLAG
    INNER_BATCH = INNER_BATCH_FLAG
    COMPRESSION_LZ4 = COMPRESSION_LZ4_TYPE
    COMPRESSION_ZSTD = COMPRESSION_ZSTD_TYPE
    COMPRESSION_ZLIB = COMPRESSION_ZLIB_TYPE


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits of ``sys_flag`` (0x0 not, 0x4 prepared, 0x8 commit, 0xC rollback)."""
    return sys_flag & TRANSACTION_MASK


def reset_transaction_value(sys_flag: int, tran_type: int) -> int:
    """``sys_flag`` with its transaction bits replaced by ``tran_type``."""
    return (sys_flag & ~TRANSACTION_MASK) | (tran_type & TRANSACTION_MASK)
