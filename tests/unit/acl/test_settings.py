"""The ACL settings of the roles: pairs that go together, a file the name server needs, secrets kept out of
reprs, and what the broker hands to the filter servers it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from sievemq.broker.access import broker_acl, broker_signer, filtersrv_env
from sievemq.broker.config import BrokerConfig
from sievemq.client.instance import ClientConfig
from sievemq.errors import ConfigError
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.namesrv.config import NamesrvConfig


def test_pairs_and_required_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="aclSecretKey"):
        BrokerConfig(acl_access_key="brokerAK")
    with pytest.raises(ConfigError, match="aclAccessKey"):
        BrokerConfig(acl_secret_key="brokerSK")
    with pytest.raises(ConfigError, match="aclFile"):
        NamesrvConfig(acl_enable=True)
    with pytest.raises(ConfigError, match="aclFile"):
        BrokerConfig(acl_file=str(tmp_path / "missing.yml"))
    with pytest.raises(ValueError, match="go together"):
        ClientConfig(access_key="ak")


def test_secrets_stay_out_of_reprs() -> None:
    assert "s3cret" not in repr(BrokerConfig(acl_access_key="brokerAK", acl_secret_key="s3cret"))
    assert "s3cret" not in repr(FiltersrvConfig(acl_access_key="brokerAK", acl_secret_key="s3cret"))
    assert "s3cret" not in repr(ClientConfig(access_key="ak", secret_key="s3cret"))


def test_acl_off_builds_nothing(tmp_path: Path) -> None:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    assert broker_acl(cfg) is None and broker_signer(cfg) is None and filtersrv_env(cfg, None) == {}


def test_the_broker_acl_file_defaults_to_its_store(tmp_path: Path) -> None:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path), acl_enable=True)
    with pytest.raises(ConfigError, match=r"plain_acl\.yml does not exist"):
        broker_acl(cfg)
    (tmp_path / "plain_acl.yml").write_text("accounts:\n  - {accessKey: brokerAK, secretKey: brokerSK}\n")
    acl = broker_acl(cfg)
    assert acl is not None and "brokerAK" in acl.file.rules.accounts
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path), acl_enable=True, acl_access_key="brokerAK",
                       acl_secret_key="brokerSK")  # fmt: skip
    env = filtersrv_env(cfg, acl)
    assert env["SIEVEMQ_FILTERSRV_ACL_ENABLE"] == "true" and env["SIEVEMQ_FILTERSRV_ACL_SECRET_KEY"] == "brokerSK"
    assert env["SIEVEMQ_FILTERSRV_ACL_FILE"] == str((tmp_path / "plain_acl.yml").resolve())
