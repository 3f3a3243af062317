"""The clients' options (``ClientOptions``, ``ConsumeOptions``): the object, the keyword arguments that stand for its
fields, sharing one object between clients, and the command line flags named like the fields. No sockets."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import fields
from pathlib import Path
from typing import Any

import click
import pytest

import sievemq
import sievemq.sync
from sievemq.acl.credentials import Credentials
from sievemq.cli.client import client_options
from sievemq.cli.client import consume as consume_command
from sievemq.client.consume_service import ConsumeService
from sievemq.client.instance import ClientConfig
from sievemq.client.message import ConsumeResult, MessageQueue
from sievemq.client.options import ClientKwargs, ClientOptions, ConsumeKwargs, ConsumeOptions
from sievemq.client.orderly import OrderlyConsumeService
from sievemq.client.process_queue import ProcessQueue
from sievemq.client.producer import Producer, ProducerKwargs
from sievemq.client.pull_consumer import PullConsumer
from sievemq.client.push_consumer import PushConsumer, PushConsumerKwargs
from sievemq.client.transaction_producer import TransactionProducer, TransactionState
from sievemq.protocol.message import MessageExt
from sievemq.remoting.tls import ClientTls


def keys(td: Any) -> set[str]:
    return set(td.__required_keys__ | td.__optional_keys__)


def names(cls: Any) -> set[str]:
    return {f.name for f in fields(cls)}


async def check(msg: MessageExt) -> TransactionState:
    return TransactionState.COMMIT


def test_the_keyword_arguments_are_the_fields_of_the_options() -> None:
    assert keys(ClientKwargs) == names(ClientOptions) - {"namesrv"}, keys(ClientKwargs) ^ names(ClientOptions)
    assert keys(ConsumeKwargs) == names(ConsumeOptions), keys(ConsumeKwargs) ^ names(ConsumeOptions)
    assert keys(PushConsumerKwargs) == keys(ClientKwargs) | keys(ConsumeKwargs)
    own = {p.name for p in inspect.signature(Producer).parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert keys(ProducerKwargs) == keys(ClientKwargs) | own - {"options", "_instance"}, keys(ProducerKwargs) ^ own
    config = names(ClientConfig) - {"client_ip"}
    assert config == names(ClientOptions), config ^ names(ClientOptions)  # ClientConfig.of maps them by name


def test_the_options_are_checked_when_made() -> None:
    assert ClientOptions(namesrv="a:1; b:2").namesrv == ("a:1", "b:2")
    assert ClientOptions(namesrv=["a:1"]) == ClientOptions(namesrv="a:1")
    with pytest.raises(ValueError, match="host:port"):
        ClientOptions(namesrv="nohost")
    with pytest.raises(ValueError, match="go together"):
        ClientOptions(access_key="ak")
    with pytest.raises(ValueError, match="only with tls=True"):
        ClientOptions(tls_ca_file="ca.pem")
    with pytest.raises(ValueError, match="request_timeout must be more than 0"):
        ClientOptions(request_timeout=0)
    with pytest.raises(ValueError, match="heartbeat_interval"):
        ClientOptions(heartbeat_interval=-1.0)
    assert "s3cret" not in repr(ClientOptions(access_key="ak", secret_key="s3cret"))
    tuning = ConsumeOptions(concurrency=0, consume_batch_size=-3, pull_batch_size=0, max_cached_mib=2)
    assert (tuning.concurrency, tuning.consume_batch_size, tuning.pull_batch_size) == (1, 1, 1), tuning
    assert tuning.max_cached_bytes == 2 * 1024 * 1024


def test_the_keyword_arguments_still_configure_each_client() -> None:
    p = Producer("a:1", "g", request_timeout=5.0, instance_name="x", send_timeout=4.0)
    assert p.options == ClientOptions(namesrv="a:1", instance_name="x", request_timeout=5.0), p.options
    assert (p.config.namesrv, p.config.instance_name, p.config.request_timeout) == (("a:1",), "x", 5.0), p.config
    assert p.send_timeout == 4.0
    c = PushConsumer("a:1", "g", concurrency=3, max_reconsume_times=2, persist_interval=0.5, orderly=True)
    assert (c.consume_options.concurrency, c.consume_options.max_reconsume_times) == (3, 2), c.consume_options
    assert c.config.persist_interval == 0.5 and c.orderly
    q = PullConsumer("a:1", "g", tls=True, tls_verify=False, pull_batch_size=8)
    assert q.config.tls and not q.config.tls_verify and q.pull_batch_size == 8, q.config


def test_one_options_object_configures_every_client_and_keywords_replace_its_fields() -> None:
    shared = ClientOptions(namesrv="a:1;b:2", request_timeout=7.0, access_key="ak", secret_key="sk")
    tuning = ConsumeOptions(concurrency=4, pull_batch_size=8)
    p = Producer(group="p", options=shared)
    t = TransactionProducer(group="t", options=shared, check_listener=check, send_timeout=2.0)
    c = PushConsumer(group="c", options=shared, consume=tuning, instance_name="c1", concurrency=2)
    q = PullConsumer(group="q", options=shared)
    for client in (p, t, q):
        assert client.options is shared
    assert c.options == ClientOptions(namesrv="a:1;b:2", request_timeout=7.0, access_key="ak", secret_key="sk",
                                      instance_name="c1")  # fmt: skip
    assert (c.consume_options.concurrency, c.consume_options.pull_batch_size) == (2, 8), c.consume_options
    assert tuning.concurrency == 4 and shared.instance_name is None  # frozen: nothing changed them
    configs = [x.config for x in (p, t, c, q)]
    assert {(cfg.namesrv, cfg.request_timeout, cfg.access_key) for cfg in configs} == {(("a:1", "b:2"), 7.0, "ak")}
    assert len({cfg.instance_name for cfg in configs}) == 4, "no instance_name: a name (and connections) each"
    assert t.send_timeout == 2.0 and c.config.instance_name == "c1"
    assert Producer("z:9", options=shared).config.namesrv == ("z:9",), "namesrv given apart replaces the field"


def test_unknown_keyword_arguments_are_refused_as_before() -> None:
    with pytest.raises(TypeError, match=r"Producer\(\) got an unexpected keyword argument 'concurrency'"):
        Producer(group="g", concurrency=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"PullConsumer\(\) got an unexpected keyword argument 'max_span'"):
        PullConsumer(group="g", max_span=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'no_such'"):
        PushConsumer(group="g", no_such=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"TransactionProducer\(\) got an unexpected keyword argument 'orderly'"):
        TransactionProducer(group="g", check_listener=check, orderly=True)  # type: ignore[call-arg]


def test_the_package_and_the_blocking_facade_export_the_options() -> None:
    assert sievemq.ClientOptions is ClientOptions and sievemq.ConsumeOptions is ConsumeOptions
    assert {"ClientOptions", "ConsumeOptions"} <= set(sievemq.__all__) & set(sievemq.sync.__all__)
    shared = sievemq.sync.ClientOptions(namesrv="a:1")
    p = sievemq.sync.Producer(group="g", options=shared)
    c = sievemq.sync.PushConsumer(group="c", options=p.options, consume=ConsumeOptions(concurrency=2))
    assert p.options is shared and c.options is shared and c.consume_options.concurrency == 2


def test_the_command_line_builds_the_options_from_flags_of_the_same_names(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read here")
    params = {p.name: p.opts for p in consume_command.params}
    for name in ("namesrv", "access_key", "secret_key", "tls", "tls_ca_file", "tls_cert_file", "tls_key_file"):
        flag = "--" + name.replace("_", "-")
        assert any(flag in opts for opts in params.values()), (flag, params)
    assert any("--no-tls-verify" in opts for opts in params.values()), params
    for flag in ("--tls-ca-file", "--tls-ca"):  # the short names stay
        ctx = consume_command.make_context("consume", ["T", flag, str(ca)])
        assert ctx.params["tls_ca"] == str(ca), ctx.params
    options = client_options("a:1", Credentials("ak", "sk"), ClientTls(ca_file=str(ca), verify=False))
    assert options == ClientOptions(namesrv="a:1", access_key="ak", secret_key="sk", tls=True, tls_ca_file=str(ca),
                                    tls_verify=False), options  # fmt: skip
    assert client_options("a:1", None, None) == ClientOptions(namesrv="a:1")
    with pytest.raises(click.BadParameter):
        client_options("nohost", None, None)


class Offsets:
    """The offset store calls a consume service makes."""

    def __init__(self) -> None:
        self.updates: list[tuple[MessageQueue, int]] = []

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        self.updates.append((mq, offset))


MQ = MessageQueue("T", "b", 0)


async def test_a_consume_service_works_from_what_it_is_given_without_the_consumer() -> None:
    seen: list[list[int]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        seen.append([m.queue_offset for m in msgs])
        return ConsumeResult.SUCCESS

    offsets = Offsets()
    service = ConsumeService("g", listener, ConsumeOptions(consume_batch_size=2), inst=None, offsets=offsets,  # type: ignore[arg-type]
                             inner=None)  # type: ignore[arg-type]  # fmt: skip
    pq = ProcessQueue(0)
    msgs = [MessageExt("T", b"x", queue_offset=o) for o in range(3)]
    service.dispatch(MQ, pq, pq.add(msgs, 3))
    await asyncio.wait(list(service.consume_tasks))
    assert sorted(seen) == [[0, 1], [2]], seen
    assert max(o for _, o in offsets.updates) == 3, offsets.updates
    await service.stop()
    service.shutdown()
    service.dispatch(MQ, pq, pq.add([MessageExt("T", b"x", queue_offset=3)], 4))
    await asyncio.wait(list(service.consume_tasks))
    assert len(seen) == 2 and service.state == "closed", "a closed service runs no listener"


async def test_the_orderly_service_renews_its_locks_in_one_background_task_that_stop_ends() -> None:
    async def listener(msgs: list[MessageExt]) -> None:
        return None

    service = OrderlyConsumeService("og", listener, ConsumeOptions(), inst=None, offsets=Offsets(), inner=None,  # type: ignore[arg-type]
                                    owned_queues=lambda: [MQ])  # fmt: skip

    def renewals() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if t.get_name() == "keep-locks og" and not t.done()]

    service.start()
    assert len(renewals()) == 1, renewals()
    with pytest.raises(RuntimeError, match="already running"):
        service.start()
    await service.stop()
    assert renewals() == [] and service.state == "closing"
    service.shutdown()
