#!/usr/bin/env python3
"""Interop driver for the RocketMQ 5.x Python client (``rocketmq-python-client==5.1.2``, gRPC) through sievemq's proxy.

Run with the interpreter of ``.interop/venv-rmq5``::

    rmq5_driver.py produce --endpoints H:P --topic T --count N [--tag TagA | --tags A,B,C (message i: tag
                           i % n)] [--key-prefix k] [--prop k=v ...]
                           [--group G (FIFO: the message group)] [--groups G1,G2,... (FIFO: message i in group
                           G[i % n], body "<group>-<i // n>")] [--delay-s S (DELAY: delivered S s later)]
                           [--tls (trust: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)] [--interval-ms MS (between sends;
                           a failed send is reported and the next one follows)]

    rmq5_driver.py simple-consume --endpoints H:P --topic T --group G [--tag-expr "A || B" | --sql "a > 5"]
                           --count N [--batch N] [--invisible S] [--await S] [--timeout S] [--hold-first K]
                           [--change S] [--defer-ack PATH [--ack-retry S]]
    rmq5_driver.py tx-produce --endpoints H:P --topic T --count N [--end commit|rollback|none]
                           [--check-answer commit|rollback] [--linger S]
    rmq5_driver.py push-consume --endpoints H:P --topic T --group G [--tag-expr E | --sql E] --count N
                           [--fail-first K] [--fail-body B [--fail-times N]] [--sleep S] [--timeout S]

With ``RMQ5_ACCESS_KEY`` and ``RMQ5_SECRET_KEY`` in the environment the client signs its calls with that account.

One JSON object per line: ``started``, ``sent`` (i, message_id, offset; ``delivery_s`` with ``--delay-s``: the
epoch second it asked for), ``received`` (message_id, body, tag, keys, properties, attempt, group, topic,
delivery_ms, handle: the receipt handle), ``acked``, ``error`` (i, error), ``done``. Every event carries ``ts``, the
epoch time in seconds (ms precision) at which the driver printed it. A consumer prints ``ready`` after its first
(empty) receive, stops after ``count`` acked messages or ``timeout`` seconds; with ``--hold-first K`` it does not
ack the first K deliveries (they come back after the invisible time), with ``--change S`` it first sets each held
message's invisible time to S seconds (``changed`` carries ``asked_at``: ``ts`` just before the call). With
``--defer-ack PATH`` it acks nothing until it has received ``count`` messages; it then stops receiving, prints
``waiting``, waits (until ``timeout``) for the file PATH to exist and acks them all then (``acked``, or
``ack_error`` (message_id, body, error) for each failed ack; ``--ack-retry S``: a failed ack is tried again every
0.5 s for S seconds). A push consumer fails the first K
deliveries (and the first ``--fail-times`` deliveries, all by default, of the message whose body is
``--fail-body``; each failure prints ``failed``) and
sleeps ``--sleep`` seconds in each; it prints ``overlap`` (group, body) when its listener is handed a message while
another of the same message group is still being consumed. Exit 0 when a producer sent everything / a consumer
acked ``count``, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

_EMIT = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields, "ts": round(time.time(), 3)})
    with _EMIT:  # a PushConsumer's listeners run on several threads: one whole line each
        print(line, flush=True)


def _credentials() -> Any:
    """The account of ``RMQ5_ACCESS_KEY`` / ``RMQ5_SECRET_KEY`` (none when unset)."""
    import os

    from rocketmq import Credentials

    return Credentials(os.environ.get("RMQ5_ACCESS_KEY", ""), os.environ.get("RMQ5_SECRET_KEY", ""))


def produce(args: argparse.Namespace) -> int:
    from rocketmq import ClientConfiguration, Message, Producer

    config = ClientConfiguration(args.endpoints, _credentials())
    producer = Producer(config, (args.topic,), tls_enable=args.tls)
    producer.startup()
    emit("started", role="producer", topic=args.topic)
    failed = 0
    groups = [g for g in args.groups.split(",") if g]
    tags = [t for t in args.tags.split(",") if t]
    try:
        for i in range(args.count):
            if i and args.interval_ms:
                time.sleep(args.interval_ms / 1000)
            msg = Message()
            msg.topic = args.topic
            msg.body = f"body-{i}".encode()
            if groups:  # FIFO messages of several message groups, interleaved
                msg.message_group = groups[i % len(groups)]
                msg.body = f"{msg.message_group}-{i // len(groups)}".encode()
            if args.tag:
                msg.tag = args.tag
            if tags:
                msg.tag = tags[i % len(tags)]
            if args.key_prefix:
                msg.keys = f"{args.key_prefix}{i}"
            for item in args.prop:
                k, _, v = item.partition("=")
                msg.add_property(k, v.replace("{i}", str(i)))
            if args.group:
                msg.message_group = args.group
            delivery: dict[str, int] = {}
            if args.delay_s:  # epoch *seconds*: the 5.1.2 client puts the value into Timestamp.seconds as it is
                msg.delivery_timestamp = int(time.time() + args.delay_s)
                delivery["delivery_s"] = msg.delivery_timestamp
            try:
                r = producer.send(msg)
            except Exception as e:
                failed += 1
                emit("error", i=i, error=f"{type(e).__name__}: {e}")
                continue
            emit("sent", i=i, message_id=r.message_id, offset=r.offset, **delivery)
    finally:
        producer.shutdown()
    emit("done", failed=failed)
    return 1 if failed else 0


def _expression(args: argparse.Namespace) -> Any:
    from rocketmq import FilterExpression
    from rocketmq.grpc_protocol import FilterType

    if args.sql:
        return FilterExpression(args.sql, FilterType.SQL)
    return FilterExpression(args.tag_expr or "*")


def _received(m: Any) -> dict[str, Any]:
    return {"message_id": m.message_id, "body": m.body.decode(errors="replace"), "tag": m.tag,
            "keys": sorted(m.keys), "properties": dict(m.properties), "attempt": m.delivery_attempt,
            "group": m.message_group, "topic": m.topic, "delivery_ms": m.delivery_timestamp,
            "handle": m.receipt_handle}  # fmt: skip


def _ack_deferred(consumer: Any, msgs: list[Any], path: str, deadline: float, retry_s: float) -> int:
    """``--defer-ack``: wait for ``path`` to exist (until ``deadline``), then ack ``msgs``, each tried again for
    ``retry_s`` seconds after a failure; the number acked."""
    import os

    emit("waiting", path=path, held=len(msgs))
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    acked = 0
    for m in msgs:
        body = m.body.decode(errors="replace")
        give_up = time.monotonic() + retry_s
        while True:
            try:
                consumer.ack(m)
            except Exception as e:
                emit("ack_error", message_id=m.message_id, body=body, error=f"{type(e).__name__}: {e}")
                if time.monotonic() < give_up:
                    time.sleep(0.5)
                    continue
                break
            acked += 1
            emit("acked", message_id=m.message_id, body=body, group=m.message_group)
            break
    return acked


def simple_consume(args: argparse.Namespace) -> int:
    from rocketmq import ClientConfiguration, SimpleConsumer

    config = ClientConfiguration(args.endpoints, _credentials())
    consumer = SimpleConsumer(config, args.group, {args.topic: _expression(args)}, await_duration=args.await_s,
                              tls_enable=args.tls)  # fmt: skip
    consumer.startup()
    emit("started", role="simple-consumer", topic=args.topic)
    acked = 0
    held = 0
    deferred: list[Any] = []
    ready = False
    deadline = time.monotonic() + args.timeout
    try:
        while acked < args.count and time.monotonic() < deadline:
            if args.defer_ack and len(deferred) >= args.count:
                acked = _ack_deferred(consumer, deferred, args.defer_ack, deadline, args.ack_retry_s)
                break
            try:
                msgs = consumer.receive(args.batch, args.invisible)
            except Exception as e:
                emit("error", error=f"{type(e).__name__}: {e}")
                time.sleep(0.5)
                continue
            if not ready:
                ready = True
                emit("ready")
            for m in msgs:
                emit("received", **_received(m))
                if args.defer_ack:
                    deferred.append(m)
                    continue
                if held < args.hold_first:
                    held += 1
                    if args.change:
                        asked_at = round(time.time(), 3)
                        consumer.change_invisible_duration(m, args.change)
                        emit("changed", message_id=m.message_id, asked_at=asked_at)
                    continue
                consumer.ack(m)
                acked += 1
                emit("acked", message_id=m.message_id, body=m.body.decode(errors="replace"), group=m.message_group)
    finally:
        consumer.shutdown()
    emit("done", acked=acked)
    return 0 if acked >= args.count else 1


def push_consume(args: argparse.Namespace) -> int:
    from rocketmq import ClientConfiguration, ConsumeResult, MessageListener, PushConsumer

    lock = threading.Lock()
    state = {"acked": 0, "failed": 0, "body_failed": 0}
    busy: dict[str, int] = {}  # message group -> messages of it in the listener now

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            body = message.body.decode(errors="replace")
            group = message.message_group or ""
            with lock:
                if group and busy.get(group, 0):
                    emit("overlap", group=group, body=body)
                busy[group] = busy.get(group, 0) + 1
            try:
                return self._consume(message, body)
            finally:
                with lock:
                    busy[group] -= 1

        def _consume(self, message: Any, body: str) -> Any:
            emit("received", **_received(message))
            if args.sleep:
                time.sleep(args.sleep)  # a slow listener: the proxy renews the message's invisible time meanwhile
            with lock:
                by_body = body == args.fail_body and state["body_failed"] < args.fail_times
                if state["failed"] < args.fail_first or by_body:
                    state["failed"] += 1
                    state["body_failed"] += by_body
                    emit("failed", message_id=message.message_id, body=body)
                    return ConsumeResult.FAILURE
                state["acked"] += 1
                emit("acked", message_id=message.message_id, body=body, group=message.message_group)
                return ConsumeResult.SUCCESS

    config = ClientConfiguration(args.endpoints, _credentials())
    consumer = PushConsumer(config, args.group, Listener(), {args.topic: _expression(args)})
    consumer.startup()
    emit("started", role="push-consumer", topic=args.topic)
    emit("ready")
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline:
            with lock:
                if state["acked"] >= args.count:
                    break
            time.sleep(0.2)
    finally:
        consumer.shutdown()
    emit("done", acked=state["acked"])
    return 0 if state["acked"] >= args.count else 1


def tx_produce(args: argparse.Namespace) -> int:
    """Transactions: each message's end is ``--end`` (commit, rollback, or none: the server's check decides,
    answered with ``--check-answer``); stays up ``--linger`` seconds for check-backs."""
    from rocketmq import ClientConfiguration, Message, Producer, TransactionChecker, TransactionResolution

    class Checker(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> Any:
            emit("checked", message_id=message.message_id, body=message.body.decode(errors="replace"))
            if args.check_answer == "commit":
                return TransactionResolution.COMMIT
            return TransactionResolution.ROLLBACK

    config = ClientConfiguration(args.endpoints, _credentials())
    producer = Producer(config, (args.topic,), Checker())
    producer.startup()
    emit("started", role="tx-producer", topic=args.topic)
    failed = 0
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"tx-{i}".encode()
            msg.tag = "TagT"
            msg.keys = f"t{i}"
            tx = producer.begin_transaction()
            try:
                r = producer.send(msg, tx)
                emit("sent", i=i, message_id=r.message_id, transaction_id=r.transaction_id)
                if args.end == "commit":
                    tx.commit()
                elif args.end == "rollback":
                    tx.rollback()
                emit("ended", i=i, end=args.end)
            except Exception as e:
                failed += 1
                emit("error", i=i, error=f"{type(e).__name__}: {e}")
        time.sleep(args.linger)
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
    pp.add_argument("--tags", default="")
    pp.add_argument("--key-prefix", default="")
    pp.add_argument("--prop", action="append", default=[])
    pp.add_argument("--group", default="")
    pp.add_argument("--groups", default="")
    pp.add_argument("--tls", action="store_true")
    pp.add_argument("--delay-s", type=float, default=0.0)
    pp.add_argument("--interval-ms", type=int, default=0)
    tp = sub.add_parser("tx-produce")
    tp.add_argument("--endpoints", required=True)
    tp.add_argument("--topic", required=True)
    tp.add_argument("--count", type=int, default=1)
    tp.add_argument("--end", choices=("commit", "rollback", "none"), default="commit")
    tp.add_argument("--check-answer", choices=("commit", "rollback"), default="commit")
    tp.add_argument("--linger", type=float, default=0.0)
    for name in ("simple-consume", "push-consume"):
        cp = sub.add_parser(name)
        cp.add_argument("--endpoints", required=True)
        cp.add_argument("--topic", required=True)
        cp.add_argument("--group", required=True)
        cp.add_argument("--tag-expr", default="")
        cp.add_argument("--sql", default="")
        cp.add_argument("--count", type=int, default=1)
        cp.add_argument("--timeout", type=float, default=60.0)
        cp.add_argument("--invisible", type=int, default=10)
        cp.add_argument("--await", dest="await_s", type=int, default=2)
        cp.add_argument("--hold-first", type=int, default=0)
        cp.add_argument("--change", type=int, default=0)
        cp.add_argument("--defer-ack", default="")
        cp.add_argument("--ack-retry", dest="ack_retry_s", type=float, default=0.0)
        cp.add_argument("--fail-first", type=int, default=0)
        cp.add_argument("--fail-body", default=None)
        cp.add_argument("--fail-times", type=int, default=1 << 30)
        cp.add_argument("--batch", type=int, default=32)
        cp.add_argument("--sleep", type=float, default=0.0)
        cp.add_argument("--tls", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "simple-consume":
        return simple_consume(args)
    if args.cmd == "push-consume":
        return push_consume(args)
    if args.cmd == "tx-produce":
        return tx_produce(args)
    return produce(args)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as exc:
        emit("error", fatal=True, error=f"{type(exc).__name__}: {exc}")
        code = 1
    sys.exit(code)
