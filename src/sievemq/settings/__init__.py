"""Settings as data: each role's config is a frozen dataclass whose fields are declared with ``setting(...)`` (a doc,
a default, a rule); the same declarations check values (``check_fields``), load them from TOML, the environment
and flags (``load_config``), and describe them for the CLI's ``--help`` and the docs' reference (``describe``).

``loading`` holds the loading and checking, ``rules`` the declarations' rules and formats, ``tls`` the TLS settings
the roles share. The roles' configs live beside their roles (``sievemq.broker.config``, ``sievemq.namesrv.config``,
``sievemq.filtersrv.config``, ``sievemq.proxy.config``, ``sievemq.dashboard.config``).
"""

from sievemq.errors import ConfigError
from sievemq.settings.loading import Spec, camel, check_fields, describe, load_config, specs
from sievemq.settings.rules import (
    ADVERTISED_IP,
    DELAY_LEVELS,
    DELETE_WHEN,
    ETCD_ROOT,
    EXISTING_FILE,
    HOST_PORT,
    HOST_PORT_LIST,
    LISTEN_HOST,
    NAME,
    OPTIONAL_HOST_PORT,
    STORE_DIR,
    Format,
    Rule,
    delete_hours,
    setting,
    split_addrs,
)

__all__ = [
    "ADVERTISED_IP",
    "DELAY_LEVELS",
    "DELETE_WHEN",
    "ETCD_ROOT",
    "EXISTING_FILE",
    "HOST_PORT",
    "HOST_PORT_LIST",
    "LISTEN_HOST",
    "NAME",
    "OPTIONAL_HOST_PORT",
    "STORE_DIR",
    "ConfigError",
    "Format",
    "Rule",
    "Spec",
    "camel",
    "check_fields",
    "delete_hours",
    "describe",
    "load_config",
    "setting",
    "specs",
    "split_addrs",
]
