"""Access control as RocketMQ 4.x's plain ACL does it: ``plain_acl.yml`` accounts, signed requests, PUB/SUB/DENY
per topic and group, admin-only codes, trusted addresses (docs/protocol/acl.md).

Modules, one idea each: ``permission`` (the bits), ``addresses`` (remote-address patterns), ``model`` (the file's
rules), ``loader`` (reading and reloading the file), ``signature`` (the signed content and HMAC-SHA1), ``resources``
(what each request code needs), ``decision`` (the check), ``authorizer`` (a server's hook), ``credentials`` (where
a client's keys come from).
"""
