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
    """Wrong dimension, NaN or infinite components, or a zero vector."""


class UnknownModel(AgentmemError):
    """The embedding model is not in agentmem's model registry."""


class InvalidArgument(AgentmemError):
    """An argument is missing, empty or out of its documented range."""


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
    "AM040": PrerequisiteMissing,
    "AM041": InsufficientPrivilege,
    "AM050": PrerequisiteMissing,  # pg_cron missing
    # pgvector refuses NaN and infinite components (and malformed vectors) on
    # input with a plain data_exception, before any agentmem code runs.
    "22000": InvalidEmbedding,
}


def translate(exc: psycopg.Error) -> Exception:
    """Return the agentmem exception for a psycopg error, or the error itself."""
    code = getattr(exc, "sqlstate", None)
    cls = SQLSTATES.get(code or "")
    if cls is None:
        return exc
    diag = exc.diag
    new = cls(diag.message_primary or str(exc), sqlstate=code,
              detail=diag.message_detail, hint=diag.message_hint)
    new.__cause__ = exc
    return new
