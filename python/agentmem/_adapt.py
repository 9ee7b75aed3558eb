"""Python values -> what the driver sends. Shared by every feature mixin."""

from __future__ import annotations

import numpy as np
from pgvector import Vector


def as_vector(value):
    """An embedding as pgvector's adapter sends it (binary): numpy float32, or Vector, or None.

    Lists, tuples and float64 arrays all become float32 arrays, so a caller may pass
    whatever an embedding library returned.
    """
    if value is None or isinstance(value, Vector):
        return value
    return np.asarray(value, dtype=np.float32)


def as_vectors(values) -> list:
    return [as_vector(v) for v in values]
