"""TLS settings: parsed and checked at load (a bad file is a ConfigError naming its key), what they give the
broker's own connections, the client's options, and the dev certificate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sievemq.broker.config import BrokerConfig
from sievemq.cli.devcert import dev_certificate, dev_tls
from sievemq.cli.tls import client_kwargs, client_tls
from sievemq.client.instance import ClientConfig
from sievemq.errors import ConfigError
from sievemq.namesrv.config import NamesrvConfig
from sievemq.settings import load_config
from sievemq.settings.tls import outgoing_tls, server_tls
from tests.support.certs import KEY_PASSWORD, Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("pki"))


def server(certs: Certs, **more: Any) -> dict[str, Any]:
    return {"tls_server_cert_path": str(certs.server.cert), "tls_server_key_path": str(certs.server.key), **more}


def refused(cls: type[Any], env: dict[str, str] | None = None, **overrides: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(cls, None, env=env or {}, overrides=overrides)
    return info.value


def test_disabled_by_default_and_nothing_is_loaded() -> None:
    for cls in (NamesrvConfig, BrokerConfig):
        cfg = load_config(cls, None, env={})
        assert cfg.tls_mode == "disabled" and server_tls(cfg) is None
    assert outgoing_tls(load_config(BrokerConfig, None, env={})) is None


def test_mode_in_any_letter_case_from_the_environment(certs: Certs) -> None:
    env = {"SIEVEMQ_TLS_MODE": "Permissive"}
    cfg = load_config(NamesrvConfig, None, env=env, overrides=server(certs))
    tls = server_tls(cfg)
    assert cfg.tls_mode == "permissive" and tls is not None and tls.context is not None
    e = refused(NamesrvConfig, {"SIEVEMQ_TLS_MODE": "strict"})
    assert e.key == "tlsMode" and "SIEVEMQ_TLS_MODE" in str(e) and "permissive" in str(e)


@pytest.mark.parametrize("cls", [NamesrvConfig, BrokerConfig])
def test_a_mode_needs_a_certificate_and_key(cls: type[Any], certs: Certs) -> None:
    assert refused(cls, tls_mode="enforcing").key == "tlsServerCertPath"
    e = refused(cls, tls_mode="enforcing", tls_server_cert_path=str(certs.server.cert))
    assert e.key == "tlsServerKeyPath" and "when tlsMode is enforcing" in str(e)


def test_bad_files_are_named_by_their_key(certs: Certs, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not PEM at all")
    cases = [
        ({"tls_server_cert_path": str(junk)}, "tlsServerCertPath", "a PEM certificate chain"),
        ({"tls_server_key_path": str(junk)}, "tlsServerKeyPath", "a PEM private key"),
        ({"tls_server_key_path": str(certs.client.key)}, "tlsServerKeyPath", "belongs to another certificate"),
        ({"tls_server_key_path": str(tmp_path / "gone.key")}, "tlsServerKeyPath", "an existing file"),
        ({"tls_server_auth_client": True}, "tlsServerTrustCertPath", "when tlsServerAuthClient is true"),
        (
            {"tls_server_auth_client": True, "tls_server_trust_cert_path": str(certs.client.key)},
            "tlsServerTrustCertPath",
            "trusted certificates",
        ),
    ]
    for more, key, words in cases:
        e = refused(NamesrvConfig, tls_mode="permissive", **{**server(certs), **more})
        assert e.key == key and words in str(e), (more, str(e))


def test_encrypted_key_needs_its_password_which_is_never_shown(certs: Certs) -> None:
    files = {"tls_server_cert_path": str(certs.encrypted.cert), "tls_server_key_path": str(certs.encrypted.key)}
    e = refused(BrokerConfig, tls_mode="enforcing", **files)
    assert e.key == "tlsServerKeyPassword" and "no password was given" in str(e)
    e = refused(BrokerConfig, tls_mode="enforcing", tls_server_key_password="wrong-one", **files)
    assert e.key == "tlsServerKeyPassword" and "wrong password" in str(e) and "wrong-one" not in str(e)
    cfg = load_config(BrokerConfig, None, env={"SIEVEMQ_TLS_SERVER_KEY_PASSWORD": KEY_PASSWORD},
                      overrides={"tls_mode": "enforcing", **files})  # fmt: skip
    assert server_tls(cfg) is not None and KEY_PASSWORD not in repr(cfg)


def test_broker_outgoing_tls_follows_rocketmq_tls_enable(certs: Certs) -> None:
    def outgoing(**more: Any) -> Any:
        return outgoing_tls(load_config(BrokerConfig, None, env={}, overrides={**server(certs), **more}))

    assert outgoing(tls_mode="permissive") is None  # auto: only when enforcing
    auto = outgoing(tls_mode="enforcing", tls_client_trust_cert_path=str(certs.ca.cert))
    assert auto is not None and auto.ca_file == str(certs.ca.cert) and auto.verify
    assert outgoing(tls_mode="enforcing", tls_enable="false") is None
    forced = outgoing(tls_enable="TRUE", tls_client_auth_server=False)
    assert forced is not None and not forced.verify
    e = refused(BrokerConfig, tls_enable="true", tls_client_trust_cert_path=str(certs.ca.key))
    assert e.key == "tlsClientTrustCertPath"
    e = refused(BrokerConfig, tls_enable="true", tls_client_cert_path=str(certs.client.cert),
                tls_client_key_path=str(certs.server.key))  # fmt: skip
    assert e.key == "tlsClientKeyPath"
    assert refused(BrokerConfig, tls_enable="1").key == "tlsEnable"


def test_enforcing_broker_cannot_start_plain_filter_servers(certs: Certs) -> None:
    e = refused(BrokerConfig, tls_mode="enforcing", filter_server_nums=1, **server(certs))
    assert e.key == "tlsMode" and "filter servers speak plain TCP" in str(e)
    load_config(
        BrokerConfig, None, env={}, overrides={"tls_mode": "permissive", "filter_server_nums": 1, **server(certs)}
    )


def test_client_config_tls(certs: Certs, tmp_path: Path) -> None:
    plain = ClientConfig.create("127.0.0.1:9876")
    assert plain.tls_context() is None
    with pytest.raises(ValueError, match="only with tls=True"):
        ClientConfig.create("127.0.0.1:9876", tls_ca_file=str(certs.ca.cert))
    with pytest.raises(ValueError, match="only with tls=True"):
        ClientConfig.create("127.0.0.1:9876", tls_verify=False)
    tls = ClientConfig.create("127.0.0.1:9876", tls=True, tls_ca_file=str(certs.ca.cert))
    assert tls.tls_context() is not None
    with pytest.raises(ValueError, match=r"^tls_ca_file .*trusted certificates"):
        ClientConfig.create("127.0.0.1:9876", tls=True, tls_ca_file=str(certs.ca.key)).tls_context()
    with pytest.raises(ValueError, match=r"^tls_key_file "):
        ClientConfig.create(
            "h:1", tls=True, tls_cert_file=str(certs.client.cert), tls_key_file=str(certs.ca.key)
        ).tls_context()


def test_cli_options(certs: Certs) -> None:
    assert client_tls(False) is None and client_kwargs(None) == {}
    by_ca = client_tls(False, ca=str(certs.ca.cert))  # --tls-ca alone turns TLS on
    assert by_ca is not None and by_ca.verify
    insecure = client_tls(False, insecure=True)
    assert insecure is not None and not insecure.verify
    kwargs = client_kwargs(by_ca)
    assert kwargs == {"tls": True, "tls_ca_file": str(certs.ca.cert), "tls_cert_file": None, "tls_key_file": None,
                      "tls_verify": True}  # fmt: skip
    assert ClientConfig.create("h:1", **kwargs).tls_context() is not None


def test_dev_certificate_is_kept_until_it_no_longer_fits(tmp_path: Path) -> None:
    first = dev_certificate(tmp_path, ("127.0.0.1",))
    pem = first.cert.read_bytes()
    assert first.key.stat().st_mode & 0o077 == 0, "the key is private to its owner"
    assert dev_certificate(tmp_path, ("localhost",)).cert.read_bytes() == pem
    assert dev_certificate(tmp_path, ("10.9.8.7",)).cert.read_bytes() != pem  # a new host: made anew
    tls = dev_tls(tmp_path, ("10.9.8.7",), "permissive", None, None)
    cfg = load_config(BrokerConfig, None, env={}, overrides=tls.broker())
    assert server_tls(cfg) is not None and outgoing_tls(cfg) is None  # permissive: registrations stay plain
    with pytest.raises(ConfigError, match="go together"):
        dev_tls(tmp_path, (), "enforcing", str(first.cert), None)
