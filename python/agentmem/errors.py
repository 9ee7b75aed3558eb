"""Exceptions, mapped from SQLSTATE codes (never from message text).

agentmem's SQL raises its own SQLSTATEs in class ``AM``; the table below is
the contract between the SQL and every driver, in any language.
"""

from __future__ import annotations

import psycopg


class AgentmemError(Exception):
    """Base class of every error agentmem raises."""

    sqlstate: str | None = None

    def __init__(self, message: str, *, sqlstate: str | None = None,
                 detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate or type(self).sqlstate
        self.detail = detail
        self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        if self.detail:
            text += f"\nDETAIL: {self.detail}"
        if self.hint:
            text += f"\nHINT: {self.hint}"
        return text


class TenantNotSet(AgentmemError):
    """A call needed a tenant and the session or transaction had none."""


class InvalidTenant(AgentmemError):
    """The tenant id given to set_tenant is not acceptable."""


class InvalidEmbedding(AgentmemError):
    """Wrong dimension, NaN or infinite components, or a norm that is zero, subnormal or not finite."""


class UnknownModel(AgentmemError):
    """The embedding model is not in agentmem's model registry."""


class InvalidArgument(AgentmemError):
    """An argument is missing, empty, of the wrong type or shape, or out of its documented range.

    The one class for caller errors of argument type too (SQLSTATE AM020): a str or dict where an
    embedding goes, a 2-D embedding, metadata that is not JSON (a set) or nested over 32 levels, an
    integer outside PostgreSQL's int range.
    """


class ContentTooLarge(AgentmemError):
    """A text is over its documented size limit."""


class NotFound(AgentmemError):
    """The object does not exist in the current tenant (or at all)."""


class Conflict(AgentmemError):
    """The call conflicts with the current state of the data."""


class PrerequisiteMissing(AgentmemError):
    """The server lacks something agentmem needs (pgvector, version, pg_cron)."""


class InsufficientPrivilege(AgentmemError):
    """The role may not do what was asked (e.g. create the vector extension)."""


class MigrationError(AgentmemError):
    """A migration could not be applied, or the ledger disagrees with the code."""


class ChecksumMismatch(MigrationError):
    """An applied migration's file changed after it was applied."""


class DatabaseNewer(MigrationError):
    """The database was migrated by a newer agentmem than this code."""


class EmbedderError(AgentmemError):
    """The embedding service is unreachable, or the model is not available."""


class ConnectionLost(AgentmemError):
    """The database could not be reached in time, or the connection broke during the call.

    Raised for every kind of connection loss: the server down or restarting (no
    connection within ``Memory.connect(timeout=...)``, psycopg_pool's
    ``PoolTimeout``), an administrator or crash shutdown (SQLSTATE 57P01,
    57P02, 57P03), and the connection-exception class 08. A call that raised it
    may or may not have committed if the connection broke during COMMIT; any
    other call did not. The client recovers by itself: connections are checked
    when taken from the pool, so the next call after the server is back works.
    """


# SQLSTATE -> exception class. Codes are stable: never renumber one.
SQLSTATES: dict[str, type[AgentmemError]] = {
    "AM001": TenantNotSet,
    "AM002": InvalidTenant,
    "AM010": InvalidEmbedding,
    "AM011": UnknownModel,
    "AM020": InvalidArgument,
    "AM021": ContentTooLarge,
    "AM030": NotFound,
    "AM031": Conflict,
    "AM032": Conflict,
    "AM040": PrerequisiteMissing,
    "AM041": InsufficientPrivilege,
    "AM042": InsufficientPrivilege,  # a login whose tenant must be transaction-local (require_local_tenant)
    "AM050": PrerequisiteMissing,  # pg_cron missing
    # 22000 is not mapped: it is any data_exception, not only pgvector's refusal
    # of NaN or infinite components. The driver checks its vectors before
    # sending them (params.as_vector: InvalidEmbedding), so that refusal only
    # reaches callers who write SQL of their own.
}

# Connection loss, whatever its form: one exception (ConnectionLost).
CONNECTION_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})


def _connection_lost(exc: psycopg.Error) -> bool:
    from psycopg_pool import PoolTimeout
    if isinstance(exc, PoolTimeout):
        return True
    code = getattr(exc, "sqlstate", None)
    if code is None:  # no server reply at all: the socket broke or never opened
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return code in CONNECTION_LOST_SQLSTATES or code.startswith("08")


def translate(exc: psycopg.Error) -> Exception:
    """Return the agentmem exception for a psycopg error, or the error itself."""
    if _connection_lost(exc):
        new = ConnectionLost(f"the database connection was lost or could not be made: {exc}",
                             sqlstate=getattr(exc, "sqlstate", None),
                             hint="Retry once the server is reachable; the client reconnects by itself.")
        new.__cause__ = exc
        return new
    code = getattr(exc, "sqlstate", None)
    cls = SQLSTATES.get(code or "")
    if cls is None:
        return exc
    diag = exc.diag
    new = cls(diag.message_primary or str(exc), sqlstate=code,
              detail=diag.message_detail, hint=diag.message_hint)
    new.__cause__ = exc
    return new
