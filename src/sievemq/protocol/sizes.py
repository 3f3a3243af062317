"""Message sizes every role agrees on: RocketMQ's default largest body, and the largest one a remoting frame holds."""

from __future__ import annotations

from sievemq.remoting.command import MAX_FRAME_LENGTH

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "MAX_MESSAGE_SIZE_LIMIT"]

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
"""RocketMQ's ``maxMessageSize`` default: 4 MiB (the broker's setting, the clients' check, the proxy's)."""
MAX_MESSAGE_SIZE_LIMIT = MAX_FRAME_LENGTH - 1024 * 1024
"""Largest ``maxMessageSize``: 15 MiB, so a body of that size and its header fit one 16 MiB remoting frame."""
