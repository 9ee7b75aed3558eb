"""One statement the driver sends: the literal ``select … from agentmem.fn(name => %s)``, its
parameters, and how its rows become the value a method returns (``one`` row, ``rows``, a
``value``, ``nothing``), as which row class of ``rows.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, Optional, Protocol, Sequence, TypeVar, Union

from pgvector import Vector
from psycopg.rows import class_row, dict_row

if TYPE_CHECKING:
    import psycopg

R = TypeVar("R")
T = TypeVar("T")

# The caller's own connection (a transaction of theirs): psycopg.Connection on Memory, AsyncConnection on
# AsyncMemory.
Conn = Optional[Union["psycopg.Connection[Any]", "psycopg.AsyncConnection[Any]"]]


class ToList(Protocol):
    """Anything with tolist() giving a list of numbers: a numpy array, a torch tensor."""

    def tolist(self) -> Any: ...


# An embedding a caller passes: a list of floats, a pgvector Vector, or anything with tolist().
Embedding = Union[Sequence[float], Vector, ToList]


@dataclass(frozen=True)
class Sql(Generic[R]):
    """One literal statement, its parameters, and how its rows become the method's value."""

    query: str
    params: tuple = ()
    fetch: str = "all"            # all | one | scalar | none
    row: Any = None               # a row class (rows.py), or None for dict rows
    post: Callable[[Any], Any] | None = None

    def then(self, post: Callable[[R], T]) -> Sql[T]:
        """The same statement, its value passed through post (e.g. rows -> lists of floats)."""
        return Sql(self.query, self.params, self.fetch, self.row, post)  # type: ignore[arg-type]

    def row_factory(self) -> Any:
        return dict_row if self.row is None else class_row(self.row)

    def result(self, rows: list) -> R:
        """The rows of the statement as its method returns them: all, one (or None), a scalar, or nothing."""
        if self.fetch == "none":
            return None  # type: ignore[return-value]
        if self.fetch == "all":
            result: Any = rows
        else:
            result = rows[0] if rows else None
            if self.fetch == "scalar" and result is not None:
                result = next(iter(result.values())) if isinstance(result, dict) else result
        return self.post(result) if self.post else result


def one(row: type[T], query: str, *params: Any) -> Sql[T]:
    """The first row, as `row` (a dataclass of rows.py, or dict)."""
    return Sql(query, params, "one", None if row is dict else row)


def rows(row: type[T], query: str, *params: Any) -> Sql[list[T]]:
    """Every row, each as `row`."""
    return Sql(query, params, "all", None if row is dict else row)


def value(kind: type[T], query: str, *params: Any) -> Sql[T]:
    """The first column of the first row (`kind` is what it is, for the type checker)."""
    return Sql(query, params, "scalar")


def nothing(query: str, *params: Any) -> Sql[None]:
    return Sql(query, params, "none")


def lines(found: list[dict]) -> list[str]:
    """export rows -> their lines."""
    return [r["line"] for r in found]


def cached_embeddings(found: list[dict]) -> list[list[float] | None]:
    """embedding_cache_lookup rows -> one embedding (or None for a miss) per text, in order."""
    return [None if r["embedding"] is None else r["embedding"].to_list() for r in found]
