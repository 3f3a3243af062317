"""Shared core of the drivers for the two PyPI wrappers of the RocketMQ C++ client.

Both ``rocketmq-client-python==0.5.0rc2`` and ``rocketmq==0.4.4`` ship a ``rocketmq`` package whose
``rocketmq.client`` module wraps a bundled ``librocketmq.so`` through ctypes, with nearly the same API. This module
is imported by ``rmqcp_driver.py`` and ``rmq044_driver.py``, each run with the interpreter of its own venv, and uses
only the standard library plus ``rocketmq.client``.

Output protocol: one JSON object per line on the real stdout, flushed after each line, each with ``ts`` (epoch
seconds, to the millisecond, when it was printed). The native library's own stdout is redirected to stderr so it can
never corrupt that stream.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

# --------------------------------------------------------------------------------------------- output

_out_lock = threading.Lock()
_out_fd: int | None = None


def _init_stdout() -> None:
    """Keep the real stdout for JSON lines only; send fd 1 (native printf, stray prints) to stderr."""
    global _out_fd
    if _out_fd is not None:
        return
    sys.stdout.flush()
    _out_fd = os.dup(1)
    os.dup2(2, 1)


def emit(event: str, **fields: Any) -> None:
    obj = {"event": event, **fields, "ts": round(time.time(), 3)}  # ts: epoch seconds when printed
    line = (json.dumps(obj, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    with _out_lock:
        fd = _out_fd if _out_fd is not None else 1
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def hard_exit(code: int) -> None:
    """Exit without running the C++ destructors (they are known to crash or hang at interpreter exit)."""
    try:
        sys.stderr.flush()
    finally:
        os._exit(code)


def error_fields(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}", "error_type": type(exc).__name__}


# -------------------------------------------------------------------------------------------- watchdog


class Watchdog:
    """Kills the process after ``seconds`` if the driver hangs inside the native library."""

    def __init__(self, seconds: float, what: str, on_fire: Any = None) -> None:
        self.seconds = seconds
        self.what = what
        self.on_fire = on_fire
        self._timer: threading.Timer | None = None

    def start(self) -> Watchdog:
        if self.seconds and self.seconds > 0:
            self._timer = threading.Timer(self.seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _fire(self) -> None:
        if self.on_fire is not None:
            try:
                self.on_fire()
            except Exception:
                pass
        emit(
            "error",
            error=f"watchdog: {self.what} did not finish within {self.seconds}s",
            fatal=True,
            error_type="WatchdogTimeout",
        )
        hard_exit(4)


# ---------------------------------------------------------------------------------------------- args

SEND_STATUS_NAMES = {0: "SEND_OK", 1: "FLUSH_DISK_TIMEOUT", 2: "FLUSH_SLAVE_TIMEOUT", 3: "SLAVE_NOT_AVAILABLE"}

# C++ rocketmq::ConsumeFromWhere (same order as Java's enum).
CONSUME_FROM = {"last": 0, "last-and-min": 1, "min": 2, "max": 3, "first": 4, "timestamp": 5}
SET_CONSUME_FROM_WHERE = "_ZN8rocketmq21DefaultMQPushConsumer19setConsumeFromWhereENS_16ConsumeFromWhereE"
GET_CONSUME_FROM_WHERE = "_ZN8rocketmq21DefaultMQPushConsumer19getConsumeFromWhereEv"

# Properties the C API cannot enumerate: we ask for these names (plus --show-prop ones) and report the non-empty.
STANDARD_PROPS = [
    "TAGS",
    "KEYS",
    "UNIQ_KEY",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "ORIGIN_MESSAGE_ID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "CLUSTER",
    "MSG_REGION",
    "TRACE_ON",
]

LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--namesrv", required=True, help="name server address host:port (several: ';'-separated)")
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True, help="producer or consumer group")
    p.add_argument("--log-dir", help="directory for the C++ client's logs (it writes $HOME/logs/rocketmq-cpp/)")
    p.add_argument("--log-level", choices=sorted(LOG_LEVELS), help="C++ client log level")
    p.add_argument("--instance", help="client instance name (the client id is ip@instance)")
    p.add_argument("--access-key", help="ACL access key (session credentials); none by default")
    p.add_argument("--secret-key", default="")
    p.add_argument("--channel", default="LOCAL", help="ONS channel for session credentials")


def add_produce_args(p: argparse.ArgumentParser) -> None:
    add_common_args(p)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--tags", default="", help="comma-separated tags, cycled over the messages (none: no tag)")
    p.add_argument("--key-prefix", default="", help="message i gets keys '<prefix><i>' (none: no keys)")
    p.add_argument(
        "--prop",
        action="append",
        default=[],
        metavar="K=V",
        help="user property, repeatable; '{i}' in V is replaced by the message index",
    )
    p.add_argument("--body", default="body-{i}", help="body template; '{i}' is replaced by the message index")
    p.add_argument("--body-size", type=int, default=0, help="pad the body with 'x' up to this many bytes")
    p.add_argument("--delay-level", type=int, default=0, help="delay level (1..18) for every message")
    p.add_argument("--interval-ms", type=int, default=0, help="pause between sends")
    p.add_argument("--send-timeout-ms", type=int, default=3000, help="client send timeout")
    p.add_argument("--keep-going", action="store_true", help="continue after a failed send (default: stop)")
    p.add_argument("--timeout", type=float, default=60.0, help="hard limit for the whole run, seconds")
    p.add_argument("--start-index", type=int, default=0, help="index of the first message")


def add_consume_args(p: argparse.ArgumentParser) -> None:
    add_common_args(p)
    p.add_argument("--expr", default="*", help="tag expression, e.g. 'TagA || TagB'")
    p.add_argument("--expect", type=int, default=0, help="number of distinct messages to wait for")
    p.add_argument("--timeout", type=float, default=60.0, help="give up (exit 3) after this many seconds")
    p.add_argument("--linger", type=float, default=2.0, help="keep consuming this long after --expect is reached")
    p.add_argument(
        "--from",
        dest="from_where",
        choices=sorted(CONSUME_FROM),
        default="last",
        help="where a new group starts (consumeFromWhere)",
    )
    p.add_argument("--model", choices=["clustering", "broadcasting"], default="clustering")
    p.add_argument("--orderly", action="store_true", help="use the orderly listener")
    p.add_argument(
        "--reconsume", type=int, default=0, help="answer RECONSUME_LATER to the first N deliveries of each message"
    )
    p.add_argument(
        "--show-prop",
        action="append",
        default=[],
        metavar="K",
        help="user property name to report in 'props' (the C API cannot list properties)",
    )
    p.add_argument("--max-body-print", type=int, default=4096)
    p.add_argument("--thread-count", type=int, default=0)


def parse_props(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--prop wants K=V, got {item!r}")
        k, v = item.split("=", 1)
        out.append((k, v))
    return out


def build_body(template: str, i: int, size: int) -> bytes:
    body = template.replace("{i}", str(i)).encode("utf-8")
    if size and len(body) < size:
        body = body + b"x" * (size - len(body))
    return body


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def prepare_env(args: argparse.Namespace) -> None:
    """Must run before ``import rocketmq``: the C++ core logs to $HOME/logs/rocketmq-cpp/."""
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        os.environ["HOME"] = os.path.abspath(args.log_dir)


# ------------------------------------------------------------------------------------------ messages


def make_message(
    client: Any, args: argparse.Namespace, i: int, tags: list[str], props: list[tuple[str, str]]
) -> tuple[Any, dict[str, Any]]:
    msg = client.Message(args.topic)
    info: dict[str, Any] = {"i": i}
    if tags:
        tag = tags[i % len(tags)]
        msg.set_tags(tag)
        info["tags"] = tag
    if args.key_prefix:
        key = f"{args.key_prefix}{i}"
        msg.set_keys(key)
        info["keys"] = key
    if props:
        p = {k: v.replace("{i}", str(i)) for k, v in props}
        for k, v in p.items():
            msg.set_property(k, v)
        info["props"] = p
    if args.delay_level:
        msg.set_delay_time_level(args.delay_level)
    body = build_body(args.body, i, args.body_size)
    # set_body goes through a c_char_p: the body must not contain NUL bytes.
    msg.set_body(body)
    info["body_len"] = len(body)
    info["body_md5"] = md5(body)
    return msg, info


def destroy_message(msg: Any) -> None:
    # 0.5.0rc2 has Message.destroy(); 0.4.4 destroys in __del__.
    d = getattr(msg, "destroy", None)
    if d is not None:
        try:
            d()
            msg._handle = None
        except Exception:
            pass


def _b2s(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return v


def describe_received(msg: Any, args: argparse.Namespace) -> dict[str, Any]:
    body = msg.body or b""
    props: dict[str, str] = {}
    for k in [*STANDARD_PROPS, *args.show_prop]:
        try:
            v = _b2s(msg.get_property(k))
        except Exception:
            v = None
        if v:
            props[k] = v
    d: dict[str, Any] = {
        "msg_id": _b2s(msg.id),
        "topic": _b2s(msg.topic),
        "tags": _b2s(msg.tags) or None,
        "keys": _b2s(msg.keys) or None,
        "body": body[: args.max_body_print].decode("utf-8", errors="replace"),
        "body_len": len(body),
        "body_md5": md5(body),
        "props": props,
    }
    for name in (
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "commit_log_offset",
        "born_timestamp",
        "store_timestamp",
        "store_size",
    ):
        try:
            d[name] = getattr(msg, name)
        except Exception:
            pass
    return d


# -------------------------------------------------------------------------------------------- produce


def _set_log(client: Any, handle: Any, kind: str, args: argparse.Namespace) -> None:
    dll = client.dll
    if args.log_level:
        fn = getattr(dll, f"Set{kind}LogLevel", None)
        if fn is not None:
            fn(handle, LOG_LEVELS[args.log_level])


def new_producer(client: Any, args: argparse.Namespace) -> Any:
    producer = client.Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    if args.instance:
        client.dll.SetProducerInstanceName(producer._handle, args.instance.encode())
    if args.access_key:
        producer.set_session_credentials(args.access_key, args.secret_key, args.channel)
    _set_log(client, producer._handle, "Producer", args)
    return producer


def sent_fields(res: Any) -> dict[str, Any]:
    status = int(res.status)
    return {"msg_id": res.msg_id, "status": SEND_STATUS_NAMES.get(status, str(status)), "offset": res.offset}


def run_produce(client: Any, args: argparse.Namespace) -> int:
    tags = [t for t in args.tags.split(",") if t] if args.tags else []
    props = parse_props(args.prop)
    Watchdog(args.timeout, "produce").start()
    try:
        producer = new_producer(client, args)
        producer.start()
    except Exception as exc:
        emit("error", stage="start", fatal=True, **error_fields(exc))
        return 1
    emit("started", role="producer", group=args.group, topic=args.topic)
    failed = 0
    sent = 0
    for i in range(args.start_index, args.start_index + args.count):
        msg, info = make_message(client, args, i, tags, props)
        t0 = time.monotonic()
        try:
            res = producer.send_sync(msg)
        except Exception as exc:
            failed += 1
            emit("error", stage="send", i=i, elapsed_ms=round((time.monotonic() - t0) * 1000), **error_fields(exc))
            if not args.keep_going:
                break
        else:
            sent += 1
            emit("sent", **{**info, **sent_fields(res)})
        finally:
            destroy_message(msg)
        if args.interval_ms:
            time.sleep(args.interval_ms / 1000)
    shutdown_quietly(producer, "producer")
    emit("done", role="producer", sent=sent, failed=failed)
    return 1 if failed else 0


def run_produce_batch(client: Any, args: argparse.Namespace) -> int:
    if not hasattr(client.Producer, "send_batch"):
        emit("error", stage="start", fatal=True, error="this client has no Producer.send_batch")
        return 2
    tags = [t for t in args.tags.split(",") if t] if args.tags else []
    props = parse_props(args.prop)
    bs = max(1, args.batch_size)
    Watchdog(args.timeout, "produce-batch").start()
    try:
        producer = new_producer(client, args)
        producer.start()
    except Exception as exc:
        emit("error", stage="start", fatal=True, **error_fields(exc))
        return 1
    emit("started", role="producer", group=args.group, topic=args.topic, batch_size=bs)
    failed = 0
    sent = 0
    indices = list(range(args.start_index, args.start_index + args.count))
    for b, start in enumerate(range(0, len(indices), bs)):
        chunk = indices[start : start + bs]
        built = [make_message(client, args, i, tags, props) for i in chunk]
        msgs = [m for m, _ in built]
        t0 = time.monotonic()
        try:
            res = producer.send_batch(msgs)
        except Exception as exc:
            failed += len(chunk)
            emit(
                "error",
                stage="send_batch",
                batch=b,
                i=chunk,
                elapsed_ms=round((time.monotonic() - t0) * 1000),
                **error_fields(exc),
            )
            if not args.keep_going:
                break
        else:
            sent += len(chunk)
            base = sent_fields(res)
            ids = [x for x in (res.msg_id or "").split(",") if x]
            for j, (_, info) in enumerate(built):
                ev = {**info, **base, "batch": b, "batch_msg_id": res.msg_id, "batch_offset": res.offset}
                # One send result per batch: its msgId lists the ids (comma-separated) when the client knows
                # them all, and its offset is the queue offset of the first message; batch members are stored
                # contiguously in one queue.
                # The C++ 1.x core returns an empty msgId for batches (observed): report null then.
                ev["msg_id"] = ids[j] if len(ids) == len(built) else (res.msg_id or None)
                ev["offset"] = res.offset + j if res.offset is not None and res.offset >= 0 else res.offset
                emit("sent", **ev)
        finally:
            for m in msgs:
                destroy_message(m)
        if args.interval_ms:
            time.sleep(args.interval_ms / 1000)
    shutdown_quietly(producer, "producer")
    emit("done", role="producer", sent=sent, failed=failed)
    return 1 if failed else 0


def shutdown_quietly(obj: Any, what: str, limit: float = 5.0) -> None:
    done = threading.Event()

    def _run() -> None:
        try:
            obj.shutdown()
        except Exception as exc:
            log(f"{what} shutdown failed: {exc}")
        finally:
            done.set()

    t = threading.Thread(target=_run, daemon=True)
    t.start()
    if not done.wait(limit):
        log(f"{what} shutdown did not finish within {limit}s; exiting anyway")


# -------------------------------------------------------------------------------------------- consume


def set_consume_from_where(client: Any, consumer: Any, where: str) -> str | None:
    """The Python API has no setter; the C handle *is* a rocketmq::DefaultMQPushConsumer*, so call the exported
    C++ member function directly (Itanium ABI: ``this`` is the first argument). Returns an error text or None."""
    dll = client.dll
    value = CONSUME_FROM[where]
    try:
        setter = getattr(dll, SET_CONSUME_FROM_WHERE)
        getter = getattr(dll, GET_CONSUME_FROM_WHERE)
    except AttributeError:
        return "librocketmq.so does not export DefaultMQPushConsumer::setConsumeFromWhere"
    setter.argtypes = [ctypes.c_void_p, ctypes.c_int]
    setter.restype = None
    getter.argtypes = [ctypes.c_void_p]
    getter.restype = ctypes.c_int
    setter(consumer._handle, value)
    got = getter(consumer._handle)
    if got != value:
        return f"setConsumeFromWhere({value}) did not stick (reads back {got})"
    return None


def subscribe(client: Any, consumer: Any, args: argparse.Namespace, on_message: Any) -> None:
    """Subscribe with the wrapper's public ``PushConsumer.subscribe`` when it can carry our answer.

    0.5.0rc2's wrapper passes the callback's ConsumeStatus through. 0.4.4's wrapper ignores the return value and
    can only signal RECONSUME_LATER by an exception, which it re-raises inside the ctypes callback (so the C++ core
    sees 0 = success). For --reconsume with that wrapper we register our own ctypes callback with the same C calls
    the wrapper uses (``Subscribe`` + ``RegisterMessageCallback[Orderly]``).
    """
    has_status = hasattr(client, "ConsumeStatus")
    if has_status:
        status = client.ConsumeStatus

        def _cb(msg: Any) -> Any:
            return status.CONSUME_SUCCESS if on_message(msg) else status.RECONSUME_LATER

        consumer.subscribe(args.topic, _cb, args.expr)
        return
    if args.reconsume <= 0:
        consumer.subscribe(args.topic, on_message, args.expr)
        return
    from rocketmq.exceptions import ffi_check
    from rocketmq.ffi import MSG_CALLBACK_FUNC

    def _raw(consumer_ptr: Any, msg_ptr: Any) -> int:
        try:
            return 0 if on_message(client.RecvMessage(msg_ptr)) else 1
        except BaseException:
            return 1

    ffi_check(client.dll.Subscribe(consumer._handle, args.topic.encode(), args.expr.encode()))
    func = MSG_CALLBACK_FUNC(_raw)
    consumer._callback_refs.append(func)
    register = client.dll.RegisterMessageCallbackOrderly if args.orderly else client.dll.RegisterMessageCallback
    ffi_check(register(consumer._handle, func))


class ConsumeState:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.deliveries = 0
        self.accepted: dict[str, int] = {}  # dedup key -> times accepted
        self.seen: dict[str, int] = {}  # dedup key -> deliveries so far
        self.reached = threading.Event()
        self.reached_at: float | None = None

    def dedup_key(self, d: dict[str, Any]) -> str:
        props = d.get("props") or {}
        return str(props.get("UNIQ_KEY") or props.get("ORIGIN_MESSAGE_ID") or d.get("msg_id"))


def run_consume(client: Any, args: argparse.Namespace) -> int:
    state = ConsumeState(args)
    started = time.monotonic()
    # Installed before anything is printed, so a SIGTERM right after 'started' still ends with 'done'.
    stop = threading.Event()

    def _term(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    # Give the watchdog room for the linger and a slow shutdown.
    Watchdog(args.timeout + args.linger + 30, "consume").start()

    def on_message(msg: Any) -> bool:
        """Returns True to accept (CONSUME_SUCCESS), False to ask for redelivery (RECONSUME_LATER)."""
        try:
            d = describe_received(msg, args)
            key = state.dedup_key(d)
            with state.lock:
                state.deliveries += 1
                n = state.seen.get(key, 0) + 1
                state.seen[key] = n
                reject = n <= args.reconsume
                dup = False
                unique = len(state.accepted)
                if not reject:
                    state.accepted[key] = state.accepted.get(key, 0) + 1
                    dup = state.accepted[key] > 1
                    unique = len(state.accepted)
                d["delivery"] = n
            if reject:
                emit("rejected", **d)
                return False
            emit("received", **d, duplicate=dup, elapsed_s=round(time.monotonic() - started, 3))
            if args.expect and unique >= args.expect and not state.reached.is_set():
                state.reached_at = time.monotonic()
                state.reached.set()
        except BaseException as exc:  # never let an exception cross the ctypes boundary
            emit("error", stage="callback", **error_fields(exc), trace=traceback.format_exc(limit=3))
        return True

    try:
        model = client.MessageModel.BROADCASTING if args.model == "broadcasting" else client.MessageModel.CLUSTERING
        consumer = client.PushConsumer(args.group, orderly=args.orderly, message_model=model)
        consumer.set_namesrv_addr(args.namesrv)
        if args.instance:
            consumer.set_instance_name(args.instance)
        if args.access_key:
            consumer.set_session_credentials(args.access_key, args.secret_key, args.channel)
        if args.thread_count:
            consumer.set_thread_count(args.thread_count)
        _set_log(client, consumer._handle, "PushConsumer", args)
        if args.from_where != "last":
            err = set_consume_from_where(client, consumer, args.from_where)
            if err:
                emit("error", stage="config", fatal=True, error=err)
                return 2
        subscribe(client, consumer, args, on_message)
        consumer.start()
    except Exception as exc:
        emit("error", stage="start", fatal=True, **error_fields(exc))
        return 1
    emit(
        "started",
        role="consumer",
        group=args.group,
        topic=args.topic,
        expr=args.expr,
        from_where=args.from_where,
        model=args.model,
    )

    deadline = started + args.timeout
    code = 0
    # --expect 0: just consume for --linger seconds (e.g. to check that nothing arrives).
    if args.expect > 0:
        while not stop.is_set() and not state.reached.is_set() and time.monotonic() < deadline:
            state.reached.wait(0.1)
        if not state.reached.is_set() and not stop.is_set():
            code = 3
    if code == 0 and not stop.is_set():
        end = time.monotonic() + args.linger
        while not stop.is_set() and time.monotonic() < end:
            stop.wait(0.1)
    with state.lock:
        summary = {
            "deliveries": state.deliveries,
            "unique": len(state.accepted),
            "duplicates": sum(c - 1 for c in state.accepted.values()),
        }
    if code == 3:
        emit("timeout", expect=args.expect, timeout=args.timeout, **summary)
    # "done" comes before the shutdown: the C++ core can abort in its shutdown (boost::thread_interrupted escaping
    # one of its threads), after everything was consumed; the harness then reads the outcome from "done".
    emit("done", role="consumer", exit_code=code, **summary)
    shutdown_quietly(consumer, "consumer")
    return code


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None, *, prog: str, client_name: str, with_batch: bool) -> None:
    _init_stdout()
    parser = argparse.ArgumentParser(prog=prog, description=f"drive {client_name} for sievemq interop tests")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_produce_args(sub.add_parser("produce", help="send --count messages with send_sync"))
    if with_batch:
        pb = sub.add_parser("produce-batch", help="send --count messages with send_batch, --batch-size per call")
        add_produce_args(pb)
        pb.add_argument("--batch-size", type=int, default=4)
    add_consume_args(sub.add_parser("consume", help="push-consume until --expect messages arrive"))
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        hard_exit(int(e.code or 0) if isinstance(e.code, int) else 2)
    prepare_env(args)
    try:
        import rocketmq.client as client  # imported after HOME is set
        from rocketmq.ffi import MessageModel

        client.MessageModel = MessageModel  # type: ignore[attr-defined]
    except Exception as exc:
        emit("error", stage="import", fatal=True, **error_fields(exc))
        hard_exit(2)
    try:
        if args.cmd == "produce":
            code = run_produce(client, args)
        elif args.cmd == "produce-batch":
            code = run_produce_batch(client, args)
        else:
            code = run_consume(client, args)
    except SystemExit as e:
        code = int(e.code) if isinstance(e.code, int) else 2
    except BaseException as exc:
        emit("error", stage=args.cmd, fatal=True, **error_fields(exc), trace=traceback.format_exc(limit=5))
        code = 1
    hard_exit(code)
