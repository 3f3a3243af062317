"""The dashboard: a read-only JSON API under ``/api/`` and a static page over it at ``/`` (docs/dashboard.md).

``app.dashboard_routes(data, listen_host)`` gives the routes to mount on a process's HTTP port; ``serve.Dashboard``
builds them over an ``AdminClient`` (``sievemq dev`` and the standalone ``sievemq dashboard`` of ``cli.py``). Every
request the API makes goes through the operator's admin API (``sievemq.admin``); the page is static HTML,
JavaScript and CSS shipped in ``static/``. Nothing is imported here, so the CLI loads the settings alone.
"""
