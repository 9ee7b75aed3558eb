"""The tenant-bound clients: ``Memory`` (sync) and ``AsyncMemory`` (asyncio).

A client is three things:

* its calls: one method per public SQL function the application role may call, each one
  literal ``select ... from agentmem.fn(name => %s)`` (``calls_async.py``);
* the methods that embed text with the client's embedder, then make calls (``remember``,
  ``recall``, ``recall_facts_about``, ``cached_answer``, ``store_answer``, ``extract_facts``,
  ``embed_documents``, ``embed_queries``: ``client_async.py``);
* the runner: every call is sent behind ``agentmem.set_tenant(tenant_id => %s, local => true)``
  in one pipeline, one round trip (``client_async.py``).

The asyncio code is written once, by hand, in ``calls_async.py`` and ``client_async.py``;
``calls_sync.py`` and ``client_sync.py`` (``Memory``) are generated from it by
``scripts/async_to_sync.py``, and a test fails when they differ. The DBA's operations belong to
no tenant: see ``admin.Admin``.
"""

from .client_async import AsyncMemory, acheck_idle
from .client_sync import Memory, check_idle

__all__ = ["AsyncMemory", "Memory", "acheck_idle", "check_idle"]
