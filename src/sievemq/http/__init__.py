"""Every role's HTTP port: ``/metrics`` (Prometheus) and ``/healthz``, on aiohttp in the role's own event loop.

One ``HttpServer`` per process (``sievemq dev`` has one for its three roles). It serves ``/metrics`` from the
process's own ``CollectorRegistry`` (``sievemq.metrics.process.build_registry``) and ``/healthz``. More routes
(a dashboard, a JSON API) are mounted on the same port with one line, before ``start()``::

    from aiohttp import web

    server.add_routes([web.get("/api/topics", topics_handler), web.static("/ui", ui_folder)])

Handlers run in the role's event loop, like its request processors: they may read the role's state directly and
must not block. Settings (``httpListenHost``, ``httpListenPort``) and the default port of each role:
``sievemq.http.settings``; design: docs/metrics.md §1.
"""
