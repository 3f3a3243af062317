"""ACL 2.0 as RocketMQ 5.3+ has it: users (Super or Normal, enabled or disabled) who sign requests with their
password, and per-user policies of resources, actions, source addresses and Allow/Deny (docs/acl2.md).

Modules, one idea each: ``model`` (users, resources, policy entries and their validation), ``matching`` (which
entry decides a request, RocketMQ's order), ``wire`` (``UserInfo``/``AclInfo`` JSON of the admin codes), ``store``
(the users and policies on disk), ``classification`` (what each request code needs), ``gate`` (authentication and
authorization of a request), ``migrate`` (``plain_acl.yml`` accounts into users and policies), ``bootstrap`` (the
initial and the broker's own users).
"""
