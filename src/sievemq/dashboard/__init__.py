"""The dashboard: a read-only JSON API under ``/api/`` and a static page over it at ``/`` (docs/dashboard.md).

``dashboard_routes(admin, settings)`` gives the routes to mount on a process's HTTP port (``sievemq dev``) or on
the standalone ``sievemq dashboard`` process. Every request the API makes goes through the operator's admin API
(``sievemq.admin``); the page is static HTML, JavaScript and CSS shipped in ``static/``.
"""

from sievemq.dashboard.app import dashboard_routes

__all__ = ["dashboard_routes"]
