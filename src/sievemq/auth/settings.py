"""The broker's ACL 2.0 settings, RocketMQ's names (docs/acl2.md §6): their help and defaults, declared once, and
the checks that span them."""

from __future__ import annotations

from sievemq.errors import ConfigError

__all__ = ["HELP", "check_auth_settings", "parse_codes"]

HELP: dict[str, tuple[str, object]] = {
    "authentication_enabled": (
        "ACL 2.0: every request must be signed by an enabled user of the broker's users (auth.json in "
        "storePathRootDir/config; mqadmin createUser); refusals are code 16",
        False,
    ),
    "authorization_enabled": (
        "ACL 2.0: every request must be allowed by its user's policies (mqadmin createAcl); super users may do "
        "everything",
        False,
    ),
    "init_authentication_user": (
        'ACL 2.0: a super user created at start when missing, JSON {"username": ..., "password": ...} (prefer the '
        "environment: SIEVEMQ_INIT_AUTHENTICATION_USER)",
        "",
    ),
    "inner_client_authentication_credentials": (
        'ACL 2.0: the broker\'s own super user, JSON {"accessKey": ..., "secretKey": ...}, created at start when '
        "missing; the broker signs its own requests with it when aclAccessKey is empty",
        "",
    ),
    "migrate_auth_from_v1_enabled": (
        "ACL 2.0: at start, make each account of the plain ACL file (aclFile, or plain_acl.yml in "
        "storePathRootDir) a user with policies, unless a user of its name exists",
        False,
    ),
    "authentication_whitelist": (
        "ACL 2.0: request codes served without authentication, separated by commas (RocketMQ's meaning)",
        "",
    ),
    "authorization_whitelist": (
        "ACL 2.0: request codes served without authorization, separated by commas",
        "",
    ),
}
"""Help and default of each setting, by field name."""


def parse_codes(text: str, key: str) -> frozenset[int]:
    """The request codes of a whitelist setting (``"10,11, 34"``); ``ConfigError`` naming ``key`` otherwise."""
    out: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isascii() or not item.lstrip("-").isdigit():
            raise ConfigError(key=key, value=text, allowed="request codes separated by commas (10,11,34)")
        out.add(int(item))
    return frozenset(out)


def check_auth_settings(
    acl_enable: bool, authentication: bool, authorization: bool, whitelists: dict[str, str], filter_servers: int = 0
) -> None:
    """``ConfigError`` when the plain ACL and ACL 2.0 are both on, when filter servers would serve pulls that ACL 2.0
    does not check (they check the plain ACL only), or when a whitelist is not a list of codes."""
    if acl_enable and (authentication or authorization):
        raise ConfigError(
            key="aclEnable", value=True,
            allowed="false while authenticationEnabled or authorizationEnabled is true: the plain ACL and ACL 2.0 "
            "exclude each other (migrate plain_acl.yml with migrateAuthFromV1Enabled)",
        )  # fmt: skip
    if authorization and filter_servers:
        raise ConfigError(
            key="filterServerNums", value=filter_servers,
            allowed="0 while authorizationEnabled is true: filter servers do not check ACL 2.0 policies yet, so a "
            "consumer could read through them what the broker refuses it",
        )  # fmt: skip
    for key, text in whitelists.items():
        parse_codes(text, key)
