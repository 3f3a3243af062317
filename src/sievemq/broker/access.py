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
from sievemq.acl.loader import acl_path, load_file
from sievemq.acl.signature import RequestSigner
from sievemq.acl.strict import strict_policy
from sievemq.auth.bootstrap import initial_user, inner_credentials, prepare_store
from sievemq.auth.gate import AuthGate, GateSettings
from sievemq.auth.model import User
from sievemq.auth.replica import AuthCopy
from sievemq.auth.settings import parse_codes
from sievemq.auth.store import AuthStore, Writer, auth_path
from sievemq.broker.config import BrokerConfig

FILTERSRV_ENV_PREFIX = "SIEVEMQ_FILTERSRV_"


def broker_acl(config: BrokerConfig) -> AclAuthorizer | None:
    """The broker's authorizer (None with ``aclEnable`` off); ``AclFileError`` for a missing or bad file."""
    if not config.acl_enable:
        return None
    strict = strict_policy(config.acl_strict_signatures, config.acl_signature_window_seconds)
    return AclAuthorizer(acl_path(config.acl_file, config.store_path_root_dir), BROKER, strict=strict)


def broker_auth(config: BrokerConfig, write: Writer) -> AuthGate | None:
    """The broker's ACL 2.0 gate over its users and ACLs (None with both ``authenticationEnabled`` and
    ``authorizationEnabled`` off), once the initial users and a migration are on disk (docs/acl2.md §6);
    ``ConfigError`` for a bad setting or ``auth.json``."""
    if not (config.authentication_enabled or config.authorization_enabled):
        return None
    store = AuthStore(auth_path(config.store_path_root_dir), write)
    plain = None
    v1 = acl_path(config.acl_file, config.store_path_root_dir)
    if config.migrate_auth_from_v1_enabled and v1.exists():  # no file: nothing to migrate (as RocketMQ)
        plain = load_file(v1)
    prepare_store(store, _start_users(config), plain)
    settings = GateSettings(
        config.authentication_enabled, config.authorization_enabled, config.broker_cluster_name,
        parse_codes(config.authentication_whitelist, "authenticationWhitelist"),
        parse_codes(config.authorization_whitelist, "authorizationWhitelist"),
    )  # fmt: skip
    strict = strict_policy(config.acl_strict_signatures, config.acl_signature_window_seconds)
    return AuthGate(store, settings, strict)


def _start_users(config: BrokerConfig) -> list[User]:
    users = [initial_user(config.init_authentication_user),
             inner_credentials(config.inner_client_authentication_credentials)]  # fmt: skip
    return [u for u in users if u is not None]


def auth_copy(config: BrokerConfig, gate: AuthGate) -> AuthCopy:
    """A slave's copy of its master's users and ACLs into ``gate``'s store, its own start-up users kept."""
    return AuthCopy(gate.store, _start_users(config))


def _own_keys(config: BrokerConfig) -> tuple[str, str]:
    if config.acl_access_key:
        return config.acl_access_key, config.acl_secret_key
    inner = inner_credentials(config.inner_client_authentication_credentials)
    return (inner.username, inner.password) if inner is not None else ("", "")


def broker_signer(config: BrokerConfig) -> RequestSigner | None:
    """The signer of the broker's own requests (None without ``aclAccessKey`` or ACL 2.0's
    ``innerClientAuthenticationCredentials``)."""
    key, secret = _own_keys(config)
    return RequestSigner(key, secret) if key else None


def filtersrv_env(config: BrokerConfig, acl: AclAuthorizer | None) -> dict[str, str]:
    """Environment for the filter servers the broker starts: its account, and its ACL file when ACL is on."""
    env: dict[str, str] = {}
    key, secret = _own_keys(config)
    if key:
        env[FILTERSRV_ENV_PREFIX + "ACL_ACCESS_KEY"] = key
        env[FILTERSRV_ENV_PREFIX + "ACL_SECRET_KEY"] = secret
    if acl is not None:
        env[FILTERSRV_ENV_PREFIX + "ACL_ENABLE"] = "true"
        env[FILTERSRV_ENV_PREFIX + "ACL_FILE"] = str(acl.file.path.resolve())
        env[FILTERSRV_ENV_PREFIX + "ACL_STRICT_SIGNATURES"] = config.acl_strict_signatures
        env[FILTERSRV_ENV_PREFIX + "ACL_SIGNATURE_WINDOW_SECONDS"] = str(config.acl_signature_window_seconds)
    return env
