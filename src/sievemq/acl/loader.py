"""Reading ``plain_acl.yml`` and reloading it when it changes (docs/protocol/acl.md §2, §6).

Scalars are read as written: ``secretKey: 0123`` is the text ``0123`` (YAML 1.1 would make it the octal number 83),
so only ``true``/``false`` style words and ``null`` keep their YAML meaning. ``AclFile`` holds the rules in force:
``current()`` looks at the file's size and modification time at most once per ``check_interval`` seconds and
parses it again when they changed; a file that no longer parses is logged and the previous rules stay in force.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from sievemq.acl.model import AclFileError, AclRules, parse_rules
from sievemq.util.watched_file import CHECK_INTERVAL, WatchedFile

log = logging.getLogger(__name__)


class _LiteralLoader(yaml.SafeLoader):
    """A safe loader that keeps numbers as the text written (keys and secrets are text)."""


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_LiteralLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NUMBER_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_text(text: str, source: str) -> AclRules:
    """The rules of a file's text; ``AclFileError`` when it is not YAML or not a valid ACL file."""
    try:
        data: Any = yaml.load(text, Loader=_LiteralLoader)  # a SafeLoader subclass
    except yaml.YAMLError as e:
        raise AclFileError(f"ACL file {source} is not valid YAML: {e}") from None
    return parse_rules(data, source)


def load_file(path: str | Path) -> AclRules:
    """The rules of the file at ``path``; ``AclFileError`` when it is missing, unreadable or malformed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AclFileError(f"ACL file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise AclFileError(f"ACL file {path} cannot be read: {e}") from None
    return parse_text(text, str(path))


class AclFile(WatchedFile[AclRules]):
    """The rules of one file, reloaded when the file changes; a failed reload keeps the last good rules."""

    def __init__(self, path: str | Path, check_interval: float = CHECK_INTERVAL) -> None:
        super().__init__(path, load_file, AclFileError, "ACL rules", check_interval)
        if not self.rules.accounts and not self.rules.global_white:
            log.warning("ACL file %s has no accounts and no global white addresses: every request is refused", path)

    @property
    def rules(self) -> AclRules:
        """The rules in force."""
        return self.value

    def summary(self, value: AclRules) -> str:
        """What a reload brought."""
        return f"ACL file: {len(value.accounts)} accounts, {len(value.global_white)} global white addresses"


def acl_path(configured: str, home: str | Path) -> Path:
    """The ACL file of a role: ``configured`` if set (relative to the working directory), else
    ``<home>/plain_acl.yml``."""
    return Path(configured) if configured else Path(home) / "plain_acl.yml"


__all__ = ["CHECK_INTERVAL", "AclFile", "acl_path", "load_file", "parse_text"]
