"""A lexical, offline embedder: hashed word and character-trigram counts.

It is NOT semantic: texts that share words come out similar, paraphrases with
other words do not. It exists so that ``make demo`` runs with no Ollama and so
that tests get deterministic vectors of any dimension.
"""

from __future__ import annotations

import hashlib
import math
import re

_WORD = re.compile(r"\w+", re.UNICODE)


def _bucket(token: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    n = int.from_bytes(digest, "little")
    return n % dim, (1.0 if (n >> 63) & 1 else -1.0)


def lexical_embedding(text: str, dim: int = 768) -> list[float]:
    """Embed one text: unit-length, deterministic, never the zero vector."""
    vec = [0.0] * dim
    words = _WORD.findall(text.lower())
    for word in words:
        i, sign = _bucket("w:" + word, dim)
        vec[i] += 2.0 * sign
        padded = f"#{word}#"
        for k in range(len(padded) - 2):
            i, sign = _bucket("c:" + padded[k:k + 3], dim)
            vec[i] += 0.5 * sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:  # empty or punctuation-only text: a fixed, valid direction
        vec[0], norm = 1.0, 1.0
    return [v / norm for v in vec]


class LexicalEmbedder:
    """Same interface as OllamaEmbedder, for offline use. Lexical, not semantic."""

    kind = "lexical"

    def __init__(self, model: str = "lexical-hash", dim: int = 768):
        self.model = model
        self.dim = dim

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [lexical_embedding(t, self.dim) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return lexical_embedding(text, self.dim)
