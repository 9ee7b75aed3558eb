"""Shared helpers of the facts, forgetting and retention tests (issue 5)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from agentmem.lexical import lexical_embedding


def vec(text: str, dim: int = 768) -> np.ndarray:
    """The stub's embedding of a text (lexical: similar for texts sharing words)."""
    return np.asarray(lexical_embedding(text, dim), dtype=np.float32)


def sqlstate_of(conn, query, params=None) -> str:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate


def count(admin, table: str, where: str = "true", params=None) -> int:
    return admin.execute(f"select count(*) from agentmem.{table} where {where}", params).fetchone()[0]


class StubEmbedder:
    """The minimal embedder interface extract_facts needs, through the real ollama client."""

    def __init__(self, host: str, model: str = "nomic-embed-text"):
        self.host, self.model = host, model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        import ollama
        return list(ollama.Client(host=self.host).embed(model=self.model, input=texts).embeddings)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def upsert(conn, user, subject, fact, sources=(), dim_text=None, **kw):
    extra = "".join(f", {k} => %s" for k in kw)
    return conn.execute(
        "select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, embedding => %s, "
        f"source_message_ids => %s::uuid[]{extra})",
        (user, subject, fact, vec(dim_text or fact), list(sources), *kw.values())).fetchone()
