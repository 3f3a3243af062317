"""A push consumer in its own process, for tests that kill it: ``python -m tests.client.consumer_proc NAMESRV GROUP
TOPIC INSTANCE``. Prints ``MSG <msgId>`` for each message its listener finished, flushed at once."""

from __future__ import annotations

import asyncio
import sys

from sievemq import ConsumeResult, MessageExt, PushConsumer


async def main(namesrv: str, group: str, topic: str, instance: str) -> None:
    consumer = PushConsumer(namesrv, group, instance_name=instance, consume_from="first")
    consumer.subscribe(topic)

    @consumer.listener
    async def handle(msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            sys.stdout.write(f"MSG {m.msg_id}\n")
        sys.stdout.flush()
        return ConsumeResult.SUCCESS

    await consumer.start()
    sys.stdout.write("STARTED\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
