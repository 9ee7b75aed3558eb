"""The DBA's operations, on a client bound to no tenant: ``Admin.connect(url)``.

Retention runs and schedules, the installation's default retention policies,
the model registry, application-role grants and the retention health view. The
SQL functions behind them are ``security invoker`` and not granted to
``agentmem_app``: connect as the schema's owner, a superuser or a BYPASSRLS
role. Each method is one literal call, written as in ``calls.py`` (adding one
is one ``@literal`` method); each runs in its own transaction.

    with Admin.connect("postgresql://dba@db/mydb") as admin:
        admin.register_model("all-minilm", 384)
        admin.schedule_retention("*/15 * * * *")
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

import psycopg
from pgvector.psycopg import register_vector

from .calls import Sql, SyncClient, literal, nothing, one, value
from .client import row_factory, shape
from .errors import translate
from .rows import JobRun, RetentionPolicy


class Admin(SyncClient):
    """The DBA's operations, bound to no tenant, each one literal call run as the connecting role."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn

    @classmethod
    def connect(cls, conninfo: str) -> "Admin":
        conn = psycopg.connect(conninfo, autocommit=True)
        register_vector(conn)
        return cls(conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, stmt: Sql[Any]) -> Any:
        try:
            with self.conn.transaction(), self.conn.cursor(row_factory=row_factory(stmt.row)) as cur:
                cur.execute(stmt.query, stmt.params)
                rows = cur.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return shape(stmt, rows)

    def _bind(self, fn: Callable[..., Sql[Any]]) -> Callable[..., Any]:
        def method(*args: Any, **kwargs: Any) -> Any:
            return self.run(fn(self, *args, **kwargs))
        return method

    # -- retention ----------------------------------------------------------------------------

    @literal
    def apply_retention(self, batch_size: int = 5000) -> Sql[JobRun]:
        return one(JobRun, "select * from agentmem.apply_retention(batch_size => %s)", batch_size)

    @literal
    def schedule_retention(self, schedule: str = "*/15 * * * *") -> Sql[int]:
        return value(int, "select agentmem.schedule_retention(schedule => %s)", schedule)

    @literal
    def unschedule_retention(self) -> Sql[bool]:
        return value(bool, "select agentmem.unschedule_retention()")

    @literal
    def retention_health(self) -> Sql[dict]:
        """The view agentmem.retention_health: the last run, pg_cron's view of the job, a status."""
        return one(dict, "select * from agentmem.retention_health")

    @literal
    def set_default_retention_policy(self, kind: str, max_age: dt.timedelta | None) -> Sql[RetentionPolicy]:
        return one(RetentionPolicy, "select * from agentmem.set_default_retention_policy(kind => %s, "
                   "max_age => %s)", kind, max_age)

    @literal
    def clear_default_retention_policy(self, kind: str) -> Sql[bool]:
        return value(bool, "select agentmem.clear_default_retention_policy(kind => %s)", kind)

    # -- models and roles ---------------------------------------------------------------------

    @literal
    def register_model(self, model: str, dimension: int, document_prefix: str = "",
                       query_prefix: str = "") -> Sql[dict]:
        return one(dict, "select * from agentmem.register_model(model => %s, dimension => %s, "
                   "document_prefix => %s, query_prefix => %s)", model, dimension, document_prefix, query_prefix)

    @literal
    def grant_app_role(self, role_name: str) -> Sql[None]:
        return nothing("select agentmem.grant_app_role(role_name => %s)", role_name)
