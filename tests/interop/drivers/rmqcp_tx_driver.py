#!/usr/bin/env python3
"""Interop driver: transactions with ``rocketmq-client-python==0.5.0rc2``'s ``TransactionMQProducer`` (C++ core).

Run with the interpreter of ``.interop/venv-rmqcp``::

    rmqcp_tx_driver.py --namesrv H:P --topic T --group G --count N --linger S [--log-dir D]

For each i < N it sends three transactional messages (keys = bodies): ``commit-i`` (tag TagA; the local transaction
commits), ``rollback-i`` (TagA; rolls back) and ``unknown-i`` (TagB; answers UNKNOWN, and the check listener
commits it when the broker checks back). Then it waits --linger seconds for the checks. One JSON object per line:
``sent`` (body, status, msg_id, local answer), ``checked`` (body, msg_id), ``done``. Exit 0, or 1 on a failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from _cpp_common import emit, error_fields, hard_exit, prepare_env


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rmqcp_tx_driver.py")
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--linger", type=float, default=10.0)
    p.add_argument("--log-dir")
    args = p.parse_args(argv)
    prepare_env(args)
    import rocketmq.client as client  # after HOME is set: the C++ core logs there

    status = client.TransactionStatus
    answers = {"commit": status.COMMIT, "rollback": status.ROLLBACK, "unknown": status.UNKNOWN}

    def check(msg: Any) -> Any:
        body = (msg.body or b"").decode()
        emit("checked", body=body, msg_id=msg.id.decode() if isinstance(msg.id, bytes) else msg.id)
        return status.COMMIT if body.startswith("unknown-") else status.ROLLBACK

    def local(msg: Any, user_args: Any) -> Any:
        return answers[(msg.body or b"").decode().split("-", 1)[0]]

    producer = client.TransactionMQProducer(args.group, check)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    failed = 0
    try:
        for i in range(args.count):
            for kind, tag in (("commit", "TagA"), ("rollback", "TagA"), ("unknown", "TagB")):
                body = f"{kind}-{i}"
                msg = client.Message(args.topic)
                msg.set_tags(tag)
                msg.set_keys(body)
                msg.set_body(body)
                try:
                    res = producer.send_message_in_transaction(msg, local)
                except Exception as exc:
                    failed += 1
                    emit("error", stage="send", body=body, **error_fields(exc))
                    continue
                emit("sent", body=body, status=int(res.status), msg_id=res.msg_id, local=kind)
        end = time.monotonic() + args.linger
        while time.monotonic() < end:
            time.sleep(0.1)
    finally:
        producer.shutdown()
    emit("done", failed=failed)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except BaseException as exc:
        emit("error", stage="main", fatal=True, **error_fields(exc))
        code = 1
    hard_exit(code)
