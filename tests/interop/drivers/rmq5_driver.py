#!/usr/bin/env python3
"""Interop driver for the RocketMQ 5.x Python client (``rocketmq-python-client==5.1.2``, gRPC) through sievemq's proxy.

Run with the interpreter of ``.interop/venv-rmq5``::

    rmq5_driver.py produce --endpoints H:P --topic T --count N [--tag TagA] [--key-prefix k] [--prop k=v ...]
                           [--group G (FIFO: the message group)]

One JSON object per line: ``started``, ``sent`` (i, message_id, offset), ``error`` (i, error), ``done``.
Exit 0 when every message was sent, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def produce(args: argparse.Namespace) -> int:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    config = ClientConfiguration(args.endpoints, Credentials())
    producer = Producer(config, (args.topic,))
    producer.startup()
    emit("started", role="producer", topic=args.topic)
    failed = 0
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"body-{i}".encode()
            if args.tag:
                msg.tag = args.tag
            if args.key_prefix:
                msg.keys = f"{args.key_prefix}{i}"
            for item in args.prop:
                k, _, v = item.partition("=")
                msg.add_property(k, v.replace("{i}", str(i)))
            if args.group:
                msg.message_group = args.group
            try:
                r = producer.send(msg)
            except Exception as e:
                failed += 1
                emit("error", i=i, error=f"{type(e).__name__}: {e}")
                continue
            emit("sent", i=i, message_id=r.message_id, offset=r.offset)
    finally:
        producer.shutdown()
    emit("done", failed=failed)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rmq5_driver.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("produce")
    pp.add_argument("--endpoints", required=True)
    pp.add_argument("--topic", required=True)
    pp.add_argument("--count", type=int, default=1)
    pp.add_argument("--tag", default="")
    pp.add_argument("--key-prefix", default="")
    pp.add_argument("--prop", action="append", default=[])
    pp.add_argument("--group", default="")
    args = p.parse_args(argv)
    return produce(args)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as exc:
        emit("error", fatal=True, error=f"{type(exc).__name__}: {exc}")
        code = 1
    sys.exit(code)
