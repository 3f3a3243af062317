"""The broker's ACL settings put to use: its authorizer, its own signer, and what its filter servers get.

``aclEnable`` turns the check on (``aclFile``, or ``plain_acl.yml`` in ``storePathRootDir``); ``aclAccessKey`` and
``aclSecretKey`` are the account the broker signs its own requests with (REGISTER_BROKER / UNREGISTER_BROKER to
name servers that check ACL) and hands to the filter servers it starts, through their environment (not their
command line), so they sign their requests to it and check consumers' pulls against the same file
(docs/protocol/acl.md §6).
"""

from __future__ import annotations

from sievemq.acl.authorizer import AclAuthorizer
from sievemq.acl.classification import BROKER
from sievemq.acl.loader import acl_path
from sievemq.acl.signature import RequestSigner
from sievemq.acl.strict import strict_policy
from sievemq.broker.config import BrokerConfig

FILTERSRV_ENV_PREFIX = "SIEVEMQ_FILTERSRV_"


def broker_acl(config: BrokerConfig) -> AclAuthorizer | None:
    """The broker's authorizer (None with ``aclEnable`` off); ``AclFileError`` for a missing or bad file."""
    if not config.acl_enable:
        return None
    strict = strict_policy(config.acl_strict_signatures, config.acl_signature_window_seconds)
    return AclAuthorizer(acl_path(config.acl_file, config.store_path_root_dir), BROKER, strict=strict)


def broker_signer(config: BrokerConfig) -> RequestSigner | None:
    """The signer of the broker's own requests (None without ``aclAccessKey``)."""
    return RequestSigner(config.acl_access_key, config.acl_secret_key) if config.acl_access_key else None


def filtersrv_env(config: BrokerConfig, acl: AclAuthorizer | None) -> dict[str, str]:
    """Environment for the filter servers the broker starts: its account, and its ACL file when ACL is on."""
    env: dict[str, str] = {}
    if config.acl_access_key:
        env[FILTERSRV_ENV_PREFIX + "ACL_ACCESS_KEY"] = config.acl_access_key
        env[FILTERSRV_ENV_PREFIX + "ACL_SECRET_KEY"] = config.acl_secret_key
    if acl is not None:
        env[FILTERSRV_ENV_PREFIX + "ACL_ENABLE"] = "true"
        env[FILTERSRV_ENV_PREFIX + "ACL_FILE"] = str(acl.file.path.resolve())
        env[FILTERSRV_ENV_PREFIX + "ACL_STRICT_SIGNATURES"] = config.acl_strict_signatures
        env[FILTERSRV_ENV_PREFIX + "ACL_SIGNATURE_WINDOW_SECONDS"] = str(config.acl_signature_window_seconds)
    return env
