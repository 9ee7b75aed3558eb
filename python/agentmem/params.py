"""Python values -> the parameters the driver sends: embeddings, times, integers and JSON checked first."""

from __future__ import annotations

import datetime as dt
import math
from numbers import Real
from typing import Any

from pgvector import Vector
from psycopg.types.json import Jsonb

from .errors import InvalidArgument, InvalidEmbedding

INT_MIN, INT_MAX = -2**31, 2**31 - 1   # every integer argument of the SQL API is an int
JSON_MAX_DEPTH = 32                    # agentmem_private.check_metadata's limit
FLOAT32_MAX = 3.4028234663852886e38    # a larger component is infinite in a vector (float4)


def as_vector(value: Any) -> Vector | None:
    """An embedding as pgvector's adapter sends it (binary): a ``pgvector.Vector``, or None.

    Takes a Vector, a list or tuple of numbers, or anything with ``tolist()`` giving one (a numpy
    array, a torch tensor), so a caller may pass whatever an embedding library returned. Anything
    else (a str, a dict, a set, a nested list, a 2-d array) raises InvalidArgument; NaN or infinite
    components (also a value too large for float32) raise InvalidEmbedding, before anything is sent.
    """
    if value is None or isinstance(value, Vector):
        return value
    fast = _as_vector_fast(value)
    if fast is not None:
        return fast
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise InvalidArgument(f"an embedding must be a sequence of numbers, not {type(value).__name__}",
                              sqlstate="AM020")
    numbers = []
    for item in value:
        if isinstance(item, (list, tuple)):
            raise InvalidArgument("an embedding must be one-dimensional, got a nested sequence",
                                  sqlstate="AM020")
        if isinstance(item, (str, bytes)) or not isinstance(item, Real):
            raise InvalidArgument(f"an embedding must be a sequence of numbers, not of {type(item).__name__}",
                                  sqlstate="AM020")
        number = float(item)
        if not (math.isfinite(number) and abs(number) <= FLOAT32_MAX):
            raise InvalidEmbedding("the embedding has NaN or infinite components (in float32)",
                                   sqlstate="AM010")
        numbers.append(number)
    return Vector(numbers)


def _as_vector_fast(value: Any) -> Vector | None:
    """The common shapes checked in a few C-level passes: a one-dimensional numpy array of numbers,
    or a list of Python floats. None: not one of them, or one that fails a check (as_vector's
    element-by-element walk then says which error). The checks are as_vector's: every component
    finite and at most FLOAT32_MAX in size (a NaN fails the comparison too)."""
    if isinstance(value, list):
        if not value or not all(type(item) is float for item in value):
            return None
        # a NaN or an infinity makes the sum non-finite; finite components of at most FLOAT32_MAX
        # cannot overflow a float64 sum (16,000 of them stay below 1e43)
        if not (math.isfinite(sum(value)) and max(map(abs, value)) <= FLOAT32_MAX):
            return None
        return Vector(value)
    dtype = getattr(value, "dtype", None)
    if dtype is None or getattr(value, "ndim", None) != 1 or getattr(dtype, "kind", None) not in ("f", "i", "u") \
            or not getattr(value, "size", 0) or not hasattr(value, "tolist"):
        return None
    try:
        if not bool(abs(value).max() <= FLOAT32_MAX):
            return None
    except Exception:  # not a numpy-like array after all
        return None
    return Vector(value.tolist())


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
                if any("\x00" in k for k in item):
                    raise InvalidArgument("metadata holds a NUL character (U+0000), which PostgreSQL's jsonb cannot",
                                          sqlstate="AM020")
                children = item.values()
            else:
                children = item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            if "\x00" in item:
                raise InvalidArgument("metadata holds a NUL character (U+0000), which PostgreSQL's jsonb cannot",
                                      sqlstate="AM020")
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InvalidArgument("metadata holds NaN or an infinity, which JSON cannot", sqlstate="AM020")
        elif not (item is None or isinstance(item, (str, int, bool))):
            raise InvalidArgument(f"metadata must be JSON (dict, list, str, number, bool, None), "
                                  f"not {type(item).__name__}", sqlstate="AM020")


def check_params(params) -> None:
    """Caller type errors as InvalidArgument before anything is sent (called by every run).

    Integers outside PostgreSQL's int (every integer argument of the API is one; a larger
    Python int would be sent as bigint and match no function), texts holding NUL (U+0000), which
    PostgreSQL's text cannot hold (psycopg would refuse them with a DataError that has no SQLSTATE),
    and JSON that is not JSON.
    """
    values = params.values() if isinstance(params, dict) else (params or ())
    for value in values:
        items = value if isinstance(value, list) else (value,)
        for item in items:
            if isinstance(item, bool):
                continue
            if isinstance(item, str) and "\x00" in item:
                raise InvalidArgument("a text argument holds a NUL character (U+0000), which PostgreSQL's text cannot",
                                      sqlstate="AM020", hint="Remove the NUL characters, or store the bytes "
                                      "encoded (base64) if they matter.")
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


def as_vectors(values: Any) -> list[Vector | None]:
    return [as_vector(v) for v in values]
