"""agentmem: memory and answer caching for LLM agents, inside PostgreSQL.

The database is the product: every behaviour lives in SQL functions in the
``agentmem`` schema. This package only embeds text and calls those functions.
"""

__version__ = "0.1.0"

# The clients, as the README uses them: from agentmem import Memory, AsyncMemory, Admin. Importing
# them imports psycopg and pgvector, never ollama (every use of it imports it where it is used).
from .admin import Admin  # noqa: E402
from .client import AsyncMemory, Memory  # noqa: E402
from .errors import (  # noqa: E402
    AgentmemError, ChecksumMismatch, Conflict, ConnectionLost, ContentTooLarge, DatabaseNewer,
    EmbedderError, InsufficientPrivilege, InvalidArgument, InvalidEmbedding,
    InvalidTenant, MigrationError, NotFound, PrerequisiteMissing, TenantNotSet,
    UnknownModel,
)

__all__ = [
    "__version__", "Admin", "AsyncMemory", "Memory", "AgentmemError", "ChecksumMismatch", "Conflict", "ConnectionLost", "ContentTooLarge",
    "DatabaseNewer", "EmbedderError", "InsufficientPrivilege", "InvalidArgument",
    "InvalidEmbedding", "InvalidTenant", "MigrationError", "NotFound",
    "PrerequisiteMissing", "TenantNotSet", "UnknownModel",
]
