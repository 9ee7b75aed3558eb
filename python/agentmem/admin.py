"""The DBA's operations, on a client bound to no tenant: ``Admin.connect(url)``.

Retention runs and schedules, the installation's default retention policies,
the model registry, application-role grants, tenants granted to logins and the tenant binding, the
search path's health, the retention health view, the
text search configuration and tenants' own HNSW indexes. The
SQL functions behind them are ``security invoker`` and not granted to
``agentmem_app``: connect as the schema's owner, a superuser or a BYPASSRLS
role. Each method is one literal call, written as in ``calls_async.py`` (adding one
is one method whose body is ``return self.run(<statement>)``); each runs in its own transaction.

    with Admin.connect("postgresql://dba@db/mydb") as admin:
        admin.register_model("all-minilm", 384)
        admin.schedule_retention("*/15 * * * *")
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeVar

import psycopg
from pgvector.psycopg import register_vector

from .errors import translate
from .params import check_params
from .rows import JobRun, RetentionPolicy
from .statement import Sql, lines, nothing, one, rows, value

R = TypeVar("R")


class Admin:
    """The DBA's operations, bound to no tenant, each one literal call run as the connecting role."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn

    @classmethod
    def connect(cls, conninfo: str) -> "Admin":
        # no server-side prepared statements: safe behind a transaction pooler (docs/pooling.md)
        conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)
        register_vector(conn)
        return cls(conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, stmt: Sql[R]) -> R:
        """Run one literal statement in a transaction of its own, as the connecting role."""
        check_params(stmt.params)
        try:
            with self.conn.transaction(), self.conn.cursor(row_factory=stmt.row_factory()) as cur:
                cur.execute(stmt.query, stmt.params)
                found = cur.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return stmt.result(found)

    # -- retention ----------------------------------------------------------------------------

    def apply_retention(self, batch_size: int = 5000) -> JobRun:
        return self.run(one(JobRun, "select * from agentmem.apply_retention(batch_size => %s)", batch_size))

    def schedule_retention(self, schedule: str = "*/15 * * * *") -> int:
        return self.run(value(int, "select agentmem.schedule_retention(schedule => %s)", schedule))

    def unschedule_retention(self) -> bool:
        return self.run(value(bool, "select agentmem.unschedule_retention()"))

    def retention_health(self) -> dict:
        """The view agentmem.retention_health: the last run, pg_cron's view of the job, a status."""
        return self.run(one(dict, "select * from agentmem.retention_health"))

    def set_default_retention_policy(self, kind: str, max_age: dt.timedelta | None) -> RetentionPolicy:
        return self.run(one(RetentionPolicy, "select * from agentmem.set_default_retention_policy(kind => %s, "
                            "max_age => %s)", kind, max_age))

    def clear_default_retention_policy(self, kind: str) -> bool:
        return self.run(value(bool, "select agentmem.clear_default_retention_policy(kind => %s)", kind))

    # -- lifecycle: use, inactivity and budgets --------------------------------------------------

    def apply_use_log(self, batch_size: int = 100000) -> int:
        """Fold the recorded uses into use_count / last_used_at; returns the uses folded."""
        return self.run(value(int, "select agentmem.apply_use_log(batch_size => %s)", batch_size))

    def set_default_lifecycle_policy(self, kind: str, max_inactive: dt.timedelta | None = None,
                                     keep_per_user: int | None = None, combine: str = "and") -> RetentionPolicy:
        return self.run(one(RetentionPolicy, "select * from agentmem.set_default_lifecycle_policy(kind => %s, "
                            "max_inactive => %s, keep_per_user => %s, combine => %s)",
                            kind, max_inactive, keep_per_user, combine))

    def apply_consolidation(self) -> JobRun:
        """Consolidate the facts of every tenant that asked for it (agentmem.set_consolidation)."""
        return self.run(one(JobRun, "select * from agentmem.apply_consolidation()"))

    def preview_retention(self, batch_size: int = 5000) -> list[dict]:
        """What apply_retention would remove now: one dict per kind and tenant (would_remove, ids)."""
        return self.run(rows(dict, "select * from agentmem.preview_retention(batch_size => %s)", batch_size))

    # -- moving a tenant -----------------------------------------------------------------------

    def export_tenant(self, tenant_id: str) -> list[str]:
        """A tenant's export, one JSON document per line, fetched whole (``agentmem export --tenant``
        streams it through a cursor instead)."""
        return self.run(rows(dict, "select line from agentmem.export_tenant(tenant_id => %s)", tenant_id).then(lines))

    def import_tenant(self, tenant_id: str, lines: list[str]) -> dict:
        """Import a tenant export, or whole user blocks of one, into tenant_id; rows inserted per table."""
        return self.run(value(dict, "select agentmem.import_tenant(tenant_id => %s, lines => %s::text[])", tenant_id,
                              list(lines)))

    # -- models and roles ---------------------------------------------------------------------

    def register_model(self, model: str, dimension: int, document_prefix: str = "",
                       query_prefix: str = "") -> dict:
        return self.run(one(dict, "select * from agentmem.register_model(model => %s, dimension => %s, "
                            "document_prefix => %s, query_prefix => %s)", model, dimension, document_prefix, query_prefix))

    def grant_app_role(self, role_name: str) -> None:
        return self.run(nothing("select agentmem.grant_app_role(role_name => %s)", role_name))

    # -- tenants bound to identities ----------------------------------------------------------

    def grant_tenant(self, role_name: str, tenant_id: str | None = None, tenant_prefix: str | None = None,
                     all_tenants: bool = False) -> bool:
        """Let a login role act as one tenant, every tenant starting with a prefix, or every tenant
        (exactly one of the three); False when it held that grant already."""
        return self.run(value(bool, "select agentmem.grant_tenant(role_name => %s, tenant_id => %s, tenant_prefix => %s, "
                              "all_tenants => %s)", role_name, tenant_id, tenant_prefix, all_tenants))

    def revoke_tenant(self, role_name: str, tenant_id: str | None = None, tenant_prefix: str | None = None,
                      all_tenants: bool = False) -> bool:
        """Take back a grant of grant_tenant (the same arguments); whether one was removed."""
        return self.run(value(bool, "select agentmem.revoke_tenant(role_name => %s, tenant_id => %s, tenant_prefix => %s, "
                              "all_tenants => %s)", role_name, tenant_id, tenant_prefix, all_tenants))

    def require_local_tenant(self, role_name: str, required: bool = True) -> bool:
        """Require (or stop requiring) that a login set its tenant for one transaction only: its
        set_tenant(local => false) raises AM042. Whether anything changed."""
        return self.run(value(bool, "select agentmem.require_local_tenant(role_name => %s, required => %s)",
                              role_name, required))

    def tenant_grant_list(self) -> list[dict]:
        """The view agentmem.tenant_grant_list: every grant, whether its role exists and can log in, the mode."""
        return self.run(rows(dict, "select * from agentmem.tenant_grant_list"))

    def set_tenant_binding(self, mode: str, jwt_claim: str | None = None) -> dict:
        """How set_tenant is checked: 'role' (the login's grants), 'jwt' (the gateway login's grants and a
        claim of request.jwt.claims) or 'none'."""
        return self.run(one(dict, "select * from agentmem.set_tenant_binding(mode => %s, jwt_claim => %s)", mode, jwt_claim))

    def search_path_health(self) -> list[dict]:
        """The view agentmem.search_path_health: who besides the owners may write a schema of agentmem's
        search path, with the statement that fixes it; empty when safe."""
        return self.run(rows(dict, "select * from agentmem.search_path_health"))

    # -- full-text search ---------------------------------------------------------------------

    def set_text_search_config(self, config: str) -> bool:
        """Switch the text search configuration (e.g. 'english', 'simple'); re-derives every stored tsvector."""
        return self.run(value(bool, "select agentmem.set_text_search_config(config => %s::regconfig)", config))

    # -- tenants' own HNSW indexes ------------------------------------------------------------

    def tenant_index_ddl(self, tenant_id: str, model: str | None = None, table_name: str = "message_embeddings",
                         concurrently: bool = True, kind: str = "hnsw") -> str:
        """The CREATE INDEX statement that builds a tenant's own index (to run outside a transaction):
        kind 'hnsw', or 'exact' (message_embeddings only)."""
        return self.run(value(str, "select agentmem.tenant_index_ddl(tenant_id => %s, model => %s, table_name => %s, "
                              "concurrently => %s, kind => %s)", tenant_id, model, table_name, concurrently, kind))

    def create_tenant_index(self, tenant_id: str, model: str | None = None,
                            table_name: str = "message_embeddings") -> str:
        """Build a tenant's own HNSW index (and, for message_embeddings of at most
        agentmem.exact_index_max_rows rows, its exact index) in this call's transaction; returns the
        HNSW index's name."""
        return self.run(value(str, "select agentmem.create_tenant_index(tenant_id => %s, model => %s, table_name => %s)",
                              tenant_id, model, table_name))

    def measure_tenant_index(self, tenant_id: str, model: str | None = None) -> dict:
        """Sample the tenant's messages through its HNSW index and record on its exact index whether
        its searches start with that index or read the exact index first: {sampled, far, first_pass}."""
        return self.run(one(dict, "select * from agentmem.measure_tenant_index(tenant_id => %s, model => %s)",
                            tenant_id, model))

    def apply_index_upkeep(self, max_builds: int = 1) -> JobRun:
        """One run of the index upkeep job: builds the own indexes of at most max_builds tenants that
        crossed agentmem.tenant_index_min_rows, drops those searches no longer use; the run's record."""
        return self.run(one(JobRun, "select * from agentmem.apply_index_upkeep(max_builds => %s)", max_builds))

    def schedule_index_upkeep(self, schedule: str = "23 * * * *", max_builds: int = 1) -> int:
        return self.run(value(int, "select agentmem.schedule_index_upkeep(schedule => %s, max_builds => %s)",
                              schedule, max_builds))

    def unschedule_index_upkeep(self) -> bool:
        return self.run(value(bool, "select agentmem.unschedule_index_upkeep()"))

    def index_pending_vectors(self, max_rows: int = 100000) -> int:
        """Move the message vectors agentmem.index_later held back into the HNSW indexes; returns how many."""
        return self.run(value(int, "select agentmem.index_pending_vectors(max_rows => %s)", max_rows))

    def schedule_index_pending(self, schedule: str = "* * * * *", max_rows: int = 100000) -> int:
        """Register the pg_cron job that runs index_pending_vectors(max_rows) on the schedule; its job id."""
        return self.run(value(int, "select agentmem.schedule_index_pending(schedule => %s, max_rows => %s)",
                              schedule, max_rows))

    def unschedule_index_pending(self) -> bool:
        return self.run(value(bool, "select agentmem.unschedule_index_pending()"))

    def drop_tenant_index(self, tenant_id: str, model: str | None = None,
                          table_name: str = "message_embeddings") -> bool:
        return self.run(value(bool, "select agentmem.drop_tenant_index(tenant_id => %s, model => %s, table_name => %s)",
                              tenant_id, model, table_name))

    # -- scale-out on Citus -------------------------------------------------------------------

    def distribute(self, shard_count: int | None = None) -> list[dict]:
        """Distribute the installation by tenant on Citus (idempotent); one row per table it changed."""
        return self.run(rows(dict, "select * from agentmem.distribute(shard_count => %s)", shard_count))

    def is_distributed(self) -> bool:
        """Whether agentmem.distribute() has run in this database."""
        return self.run(value(bool, "select agentmem.is_distributed()"))

    def tenants_needing_index(self) -> list[dict]:
        """The view agentmem.tenants_needing_index: a row per missing index of tenants past the exact-scan size
        (and a 'measure' row for a tenant whose indexes were built but never measured)."""
        return self.run(rows(dict, "select * from agentmem.tenants_needing_index"))

    def tenant_indexes(self) -> list[dict]:
        """The view agentmem.tenant_indexes: every tenant's own index, its size, whether searches still
        need it, and the statement that drops it; those to drop first."""
        return self.run(rows(dict, "select * from agentmem.tenant_indexes"))

    # -- re-embedding and the embedding queue (sql/17_embedding_jobs.sql) ---------------------------

    def reembed(self, model: str, from_model: str | None = None, tenant_id: str | None = None) -> list[dict]:
        """Queue a tenant's (None: every tenant's) rows of from_model for model; jobs queued per tenant."""
        return self.run(rows(dict, "select * from agentmem.reembed(model => %s, from_model => %s, tenant_id => %s)",
                             model, from_model, tenant_id))

    def switch_default_model(self, model: str, tenant_id: str) -> str:
        """Make model the tenant's default once every row is embedded in it (AM031 before)."""
        return self.run(value(str, "select agentmem.switch_default_model(model => %s, tenant_id => %s)", model, tenant_id))

    def drop_model_vectors(self, model: str, tenant_id: str | None = None) -> list[dict]:
        """Remove a model's rows from a tenant (None: every tenant, its indexes and registry entry too)."""
        return self.run(rows(dict, "select * from agentmem.drop_model_vectors(model => %s, tenant_id => %s)", model, tenant_id))

    def retry_embedding_jobs(self, model: str | None = None, tenant_id: str | None = None) -> int:
        """Queue failed embedding jobs again; how many."""
        return self.run(value(int, "select agentmem.retry_embedding_jobs(model => %s, tenant_id => %s)", model, tenant_id))

    def embedding_backlog(self) -> list[dict]:
        """The view agentmem.embedding_backlog: jobs pending, running, failed, oldest and rate per tenant and model."""
        return self.run(rows(dict, "select * from agentmem.embedding_backlog"))

    def health(self) -> list[dict]:
        """The view agentmem.health: every background job's last run, errors and backlog."""
        return self.run(rows(dict, "select * from agentmem.health"))
