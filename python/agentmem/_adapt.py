"""Python values -> what the driver sends, and embedding through the client's embedder."""

from __future__ import annotations

import datetime as dt

import numpy as np
from pgvector import Vector

from psycopg.types.json import Jsonb

from .errors import EmbedderError, InvalidArgument, InvalidEmbedding

INT_MIN, INT_MAX = -2**31, 2**31 - 1   # every integer argument of the SQL API is an int
JSON_MAX_DEPTH = 32                    # agentmem_private.check_metadata's limit


def as_vector(value):
    """An embedding as pgvector's adapter sends it (binary): numpy float32, or Vector, or None.

    Lists, tuples and float64 arrays all become float32 arrays, so a caller may pass
    whatever an embedding library returned. Anything else (a str, a dict, a set, a
    nested list) raises InvalidArgument; NaN or infinite components (also a float64
    value too large for float32) raise InvalidEmbedding, before anything is sent.
    """
    if value is None:
        return value
    if isinstance(value, Vector):
        array = value.to_numpy()
    elif isinstance(value, (str, bytes, bytearray, dict, set, frozenset)) or not hasattr(value, "__len__"):
        raise InvalidArgument(f"an embedding must be a sequence of numbers, not {type(value).__name__}",
                              sqlstate="AM020")
    else:
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                array = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"an embedding must be a sequence of numbers: {exc}",
                                  sqlstate="AM020") from None
    if array.ndim != 1:
        raise InvalidArgument(f"an embedding must be one-dimensional, got shape {array.shape}",
                              sqlstate="AM020")
    if not np.isfinite(array).all():
        raise InvalidEmbedding("the embedding has NaN or infinite components (in float32)",
                               sqlstate="AM010")
    return value if isinstance(value, Vector) else array


def _check_json(value) -> None:
    """JSON the server will accept: dict/list/str/number/bool/None, finite numbers, depth <= 32.

    Iterative, so a deeply nested value raises InvalidArgument, never RecursionError.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > JSON_MAX_DEPTH:
                raise InvalidArgument(f"metadata is nested too deeply: the limit is {JSON_MAX_DEPTH} levels",
                                      sqlstate="AM020")
            if isinstance(item, dict):
                if not all(isinstance(k, str) for k in item):
                    raise InvalidArgument("metadata keys must be strings", sqlstate="AM020")
                children = item.values()
            else:
                children = item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InvalidArgument("metadata holds NaN or an infinity, which JSON cannot", sqlstate="AM020")
        elif not (item is None or isinstance(item, (str, int, bool))):
            raise InvalidArgument(f"metadata must be JSON (dict, list, str, number, bool, None), "
                                  f"not {type(item).__name__}", sqlstate="AM020")


def check_params(params) -> None:
    """Caller type errors as InvalidArgument before anything is sent (called by every run).

    Integers outside PostgreSQL's int (every integer argument of the API is one; a larger
    Python int would be sent as bigint and match no function), and JSON that is not JSON.
    """
    values = params.values() if isinstance(params, dict) else (params or ())
    for value in values:
        items = value if isinstance(value, list) else (value,)
        for item in items:
            if isinstance(item, bool):
                continue
            if isinstance(item, int) and not INT_MIN <= item <= INT_MAX:
                raise InvalidArgument(f"integer argument {item} is outside -2**31 .. 2**31-1",
                                      sqlstate="AM020")
            if isinstance(item, Jsonb):
                _check_json(item.obj)


def aware(value):
    """A time the server may take: None, or a timezone-aware datetime (a naive one is refused: the
    server would read it in the session's TimeZone, which a caller rarely means). Other values go
    through unchanged for the server to check."""
    if isinstance(value, dt.datetime) and (value.tzinfo is None or value.utcoffset() is None):
        raise InvalidArgument(f"the time {value.isoformat()} has no time zone",
                              sqlstate="AM020", hint="Pass an aware datetime, e.g. "
                              "datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).")
    return value


def as_vectors(values) -> list:
    return [as_vector(v) for v in values]


# -- embedding through the client's embedder -------------------------------------------------
# OllamaEmbedder takes the client (memory=) for the model's prefixes and the embedding cache;
# any other object with embed_documents(texts) / embed_query(text) works too (LexicalEmbedder).

def require_embedder(client):
    if client.embedder is None:
        raise EmbedderError("this client has no embedder",
                            hint="Pass embedder=OllamaEmbedder(...) to Memory.connect, or call the "
                                 "function that takes an embedding with your own vectors.")
    return client.embedder


def embed_texts(client, method: str, texts: list[str]):
    """method: 'embed_documents' (texts to store) or 'embed_queries' (texts to search with)."""
    embedder = require_embedder(client)
    if getattr(embedder, "uses_memory", False):
        return getattr(embedder, method)(texts, memory=client)
    if method == "embed_queries":
        return [embedder.embed_query(t) for t in texts]
    return embedder.embed_documents(texts)


async def aembed_texts(client, method: str, texts: list[str]):
    embedder = require_embedder(client)
    if getattr(embedder, "uses_memory", False):
        return await getattr(embedder, "a" + method)(texts, memory=client)
    return embed_texts(client, method, texts)
