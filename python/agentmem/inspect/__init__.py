"""``agentmem inspect``: a local browser page over the SQL API (the ``inspect`` extra).

Start it with ``agentmem inspect --database-url URL [--tenant T] [--port P]``: it listens on 127.0.0.1,
prints a URL holding a one-time token, and shows, as the database login of URL, the tenants that login
holds grants of: each tenant's overview, its users, conversations and messages, facts and their
history, search, the answer cache and its review loop, the access log, a user's export and erasure.

Layout (see README.md beside this file for adding pages):

- ``app.py``: ``create_app(database_url, ...)`` the Starlette app; ``render``, ``memory_for``,
  ``url_for_page`` for page handlers; ``PLUGINS`` (modules adding pages, e.g. ``chat``).
- ``auth.py``: the one-time token, the session cookie, ``csrf_field`` / ``verify_csrf``.
- ``pages.py``: the pages; ``templates/``: their Jinja2 templates (``base.html`` has the nav);
  ``static/``: the stylesheet (nothing is fetched from another site).
- ``server.py``: ``serve(...)``, what the command runs (uvicorn).
"""
