"""What filter workers print (``print`` in a filter, a crash's traceback) reaches the filter server's log through a
pipe, line by line, made printable, cut to a length and rate-limited: a worker never writes into the filter
server's own files or terminal."""

from __future__ import annotations

import asyncio
import logging
import time

MAX_LINE_CHARS = 300
BURST_LINES = 50
"""Lines a worker may log at once; then ``LINES_PER_SECOND``."""
LINES_PER_SECOND = 5.0


def printable(raw: bytes) -> str:
    """``raw`` decoded, with control characters escaped (no terminal escapes, no fake log lines), cut."""
    text = raw.decode("utf-8", "replace")[:MAX_LINE_CHARS]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class _Bucket:
    def __init__(self) -> None:
        self.tokens = float(BURST_LINES)
        self.at = time.monotonic()
        self.dropped = 0

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(float(BURST_LINES), self.tokens + (now - self.at) * LINES_PER_SECOND)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.dropped += 1
        return False


async def forward(reader: asyncio.StreamReader, log: logging.Logger, label: str) -> None:
    """Log what ``reader`` yields as INFO lines prefixed with ``label`` until EOF."""
    bucket = _Bucket()
    pending = b""
    while True:
        chunk = await reader.read(4096)
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop() if chunk else b""
        if len(pending) > MAX_LINE_CHARS * 4:  # a line without end: log what we have
            lines.append(pending)
            pending = b""
        for line in lines:
            if not line:
                continue
            if bucket.take():
                if bucket.dropped:
                    log.info("%s: (%d lines dropped: too much output)", label, bucket.dropped)
                    bucket.dropped = 0
                log.info("%s: %s", label, printable(line))
        if not chunk:
            return
