"""plain_acl.yml files: RocketMQ's sample parses; malformed files are refused with an error naming the problem;
a reload that fails keeps the previous rules."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from sievemq.acl.loader import AclFile, load_file, parse_text
from sievemq.acl.model import AclFileError
from sievemq.acl.permission import Perm, allows, parse_perm

SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_rocketmqs_sample_file() -> None:
    rules = parse_text(SAMPLE, "sample")
    assert [p.text for p in rules.global_white] == ["10.10.103.*", "192.168.0.*"]
    a, b = rules.accounts["RocketMQ"], rules.accounts["rocketmq2"]
    assert a.secret_key == "12345678" and not a.admin and a.default_group_perm == Perm.SUB
    assert a.perms["topicB"] == Perm.PUB | Perm.SUB and a.perms["%RETRY%groupA"] == Perm.DENY
    assert a.default_topic_perm == Perm.DENY and not a.white.text
    assert b.admin and b.white.text == "192.168.1.*" and b.default_topic_perm == Perm.DENY
    assert "12345678" not in repr(a)


def test_numbers_are_read_as_written() -> None:
    rules = parse_text("accounts:\n  - accessKey: 00012345\n    secretKey: 0123456_7\n", "f")
    assert rules.accounts["00012345"].secret_key == "0123456_7"


def test_empty_file_has_no_accounts() -> None:
    assert not parse_text("", "f").accounts and not parse_text("# nothing\n", "f").global_white


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("accounts: [", "not valid YAML"),
        ("- a\n- b\n", "top level: expected a mapping"),
        ("acounts: []\n", "unknown key 'acounts'"),
        ("accounts: {a: 1}\n", "accounts: expected a list"),
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "accessKey must be text of at least 7"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 123\n", "accounts[0] (accessKey 'RocketMQ'): secretKey"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerm: [a=PUB]\n", "'topicPerm'"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [TopicA=PUBB]\n",
         "topicPerms[0]: 'PUBB' is not a permission"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    groupPerms: [groupA]\n",
         "groupPerms[0]: expected Name=PERM"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [A=PUB, A=SUB]\n",
         "A is listed twice"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    defaultTopicPerm: ALL\n",
         "defaultTopicPerm: 'ALL'"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: maybe\n", "admin must be true"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 10.0.0.300\n",
         "whiteRemoteAddress: '10.0.0.300'"),
        ("globalWhiteRemoteAddresses: [10.1.*]\n", "globalWhiteRemoteAddresses[0]"),
        ("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678}\n  - {accessKey: RocketMQ, secretKey: abcdefgh}\n",
         "accounts[1]: accessKey 'RocketMQ' is used by an earlier account"),
    ],
)  # fmt: skip
def test_malformed_files_name_the_problem(text: str, names: str) -> None:
    with pytest.raises(AclFileError) as e:
        parse_text(text, "conf/plain_acl.yml")
    assert names in str(e.value) and "conf/plain_acl.yml" in str(e.value), str(e.value)


def test_errors_never_show_a_secret() -> None:
    text = "accounts:\n  - accessKey: RocketMQ\n    secretKey: s3cr3t-value\n    topicPerms: [x]\n"
    with pytest.raises(AclFileError) as e:
        parse_text(text, "f")
    assert "s3cr3t" not in str(e.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AclFileError, match="does not exist"):
        load_file(tmp_path / "nope.yml")


def test_permission_words_and_check() -> None:
    assert parse_perm(" SUB|PUB ") == Perm.PUB | Perm.SUB
    with pytest.raises(ValueError):
        parse_perm("pub")
    assert allows(Perm.PUB, Perm.PUB | Perm.SUB) and not allows(Perm.SUB, Perm.PUB)
    assert allows(Perm.ANY, Perm.SUB) and not allows(Perm.ANY, Perm.DENY)
    assert not allows(Perm.PUB, Perm.DENY | Perm.PUB)


def test_reload_picks_up_changes_and_keeps_the_last_good_rules(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE)
    acl = AclFile(path, check_interval=0.0)
    assert acl.current().accounts["RocketMQ"].perms.get("topicD") is None
    path.write_text(SAMPLE.replace("- topicC=SUB", "- topicC=SUB\n      - topicD=PUB"))
    os.utime(path, ns=(1, 1))  # a different stamp even within one mtime tick
    assert acl.current().accounts["RocketMQ"].perms["topicD"] == Perm.PUB and acl.reloads == 1
    good = acl.rules
    path.write_text("accounts: [\n")
    with caplog.at_level(logging.ERROR, logger="sievemq.acl.loader"):
        assert acl.current() is good
    assert acl.failed_reloads == 1 and "previous ACL rules stay in force" in caplog.text
    assert acl.current() is good and acl.failed_reloads == 1  # an unchanged broken file is not parsed again


def test_the_file_is_looked_at_only_every_interval(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE)
    acl = AclFile(path, check_interval=3600.0)
    path.write_text("")
    assert acl.current().accounts  # not looked at yet
    assert acl.refresh() and not acl.current().accounts
