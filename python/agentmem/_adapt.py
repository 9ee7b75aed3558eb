"""Python values -> what the driver sends, and embedding through the client's embedder."""

from __future__ import annotations

import numpy as np
from pgvector import Vector

from .errors import EmbedderError


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
