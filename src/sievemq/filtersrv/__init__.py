"""The filter server: user filter functions run next to a broker, in sandboxed worker processes.

``signing`` is pure standard library and safe for clients to import; the rest is the server role.
"""
