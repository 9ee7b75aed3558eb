"""OllamaEmbedder: embeddings from an Ollama server, through agentmem's embedding cache.

The embedder holds no SQL: it asks the client it is given (``memory=``) for
the model's prefixes (``get_model``) and for cached embeddings
(``embedding_cache_lookup`` / ``embedding_cache_store``), and embeds only the misses,
``batch_size`` texts per Ollama request. Texts are cached with their prefix,
so a document and a query of the same words are different entries.

    from agentmem.client import Memory
    from agentmem.embed import OllamaEmbedder
    mem = Memory.connect(url, tenant="acme", embedder=OllamaEmbedder("nomic-embed-text"))
    mem.remember(conversation_id, "user", "I moved to Lisbon in May")
    mem.recall("alice", "where does the user live?")
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import EmbedderError


class OllamaEmbedder:
    """Embed with Ollama's /api/embed; cache-first when given a client.

    model: the Ollama model name, registered in agentmem.models (its dimension and prefixes).
    host: the Ollama server; None means the ollama client's default (OLLAMA_HOST or localhost:11434).
    document_prefix / query_prefix: override the registry's prefixes (None: ask the registry
    through the client; '' with no client).
    batch_size: texts per Ollama request.
    """

    kind = "ollama"
    uses_memory = True  # its methods take memory= (the client: prefixes and cache)

    def __init__(self, model: str = "nomic-embed-text", host: str | None = None, *, batch_size: int = 64,
                 document_prefix: str | None = None, query_prefix: str | None = None,
                 timeout: float | None = 60.0, use_cache: bool = True):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        import ollama
        self.model = model
        self.host = host  # None: the ollama client reads OLLAMA_HOST, else 127.0.0.1:11434
        self.batch_size = batch_size
        self.document_prefix = document_prefix
        self.query_prefix = query_prefix
        self.use_cache = use_cache
        self._client = ollama.Client(host=self.host, timeout=timeout)
        self._async_client = None
        self._timeout = timeout

    # -- prefixes -------------------------------------------------------------------------------

    def _prefixes_from(self, row) -> None:
        if self.document_prefix is None:
            self.document_prefix = row["document_prefix"]
        if self.query_prefix is None:
            self.query_prefix = row["query_prefix"]

    def _need_prefixes(self, memory) -> bool:
        return memory is not None and (self.document_prefix is None or self.query_prefix is None)

    def _prefixed(self, kind: str, texts: Sequence[str]) -> list[str]:
        prefix = (self.document_prefix if kind == "document" else self.query_prefix) or ""
        return [prefix + t for t in texts]

    # -- Ollama ---------------------------------------------------------------------------------

    def _error(self, exc: Exception) -> EmbedderError:
        import httpx
        import ollama
        where = self.host or "the default host (OLLAMA_HOST or http://127.0.0.1:11434)"
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                return EmbedderError(f"Ollama at {where} does not have the model {self.model!r}",
                                     detail=str(exc.error),
                                     hint=f"Pull it first: ollama pull {self.model}")
            return EmbedderError(f"Ollama at {where} refused to embed with {self.model!r} "
                                 f"(HTTP {exc.status_code})", detail=str(exc.error),
                                 hint="Check the Ollama server's log.")
        if isinstance(exc, (ConnectionError, httpx.HTTPError, OSError)):
            return EmbedderError(f"Ollama is unreachable at {where}", detail=str(exc),
                                 hint="Start it (ollama serve) or pass host=... / set OLLAMA_HOST.")
        return EmbedderError(f"embedding with Ollama failed: {exc}")

    @staticmethod
    def _vectors(response) -> list[np.ndarray]:
        return [np.asarray(v, dtype=np.float32) for v in response["embeddings"]]

    def _embed_batches(self, texts: list[str]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for i in range(0, len(texts), self.batch_size):
            try:
                response = self._client.embed(model=self.model, input=texts[i:i + self.batch_size])
            except Exception as exc:  # noqa: BLE001 - mapped to EmbedderError
                raise self._error(exc) from exc
            out.extend(self._vectors(response))
        return out

    async def _aembed_batches(self, texts: list[str]) -> list[np.ndarray]:
        import ollama
        if self._async_client is None:
            self._async_client = ollama.AsyncClient(host=self.host, timeout=self._timeout)
        out: list[np.ndarray] = []
        for i in range(0, len(texts), self.batch_size):
            try:
                response = await self._async_client.embed(model=self.model, input=texts[i:i + self.batch_size])
            except Exception as exc:  # noqa: BLE001 - mapped to EmbedderError
                raise self._error(exc) from exc
            out.extend(self._vectors(response))
        return out

    # -- cache-first embedding ------------------------------------------------------------------

    @staticmethod
    def _misses(texts, cached) -> list[str]:
        """The distinct texts the cache did not have, in first-seen order."""
        return list(dict.fromkeys(t for t, c in zip(texts, cached) if c is None))

    @staticmethod
    def _merge(texts, cached, misses, fresh):
        made = dict(zip(misses, fresh))
        return [c if c is not None else made[t] for t, c in zip(texts, cached)]

    def _embed(self, kind: str, texts: Sequence[str], memory=None) -> list[np.ndarray]:
        if not texts:
            return []
        if self._need_prefixes(memory):
            self._prefixes_from(memory.get_model(self.model))
        prefixed = self._prefixed(kind, texts)
        if memory is None or not self.use_cache:
            return self._embed_batches(prefixed)
        cached = []
        for i in range(0, len(prefixed), 10000):
            cached += memory.embedding_cache_lookup(self.model, prefixed[i:i + 10000])
        misses = self._misses(prefixed, cached)
        fresh = self._embed_batches(misses) if misses else []
        for i in range(0, len(misses), 10000):
            memory.embedding_cache_store(self.model, misses[i:i + 10000], fresh[i:i + 10000])
        return self._merge(prefixed, cached, misses, fresh)

    async def _aembed(self, kind: str, texts: Sequence[str], memory=None) -> list[np.ndarray]:
        if not texts:
            return []
        if self._need_prefixes(memory):
            self._prefixes_from(await memory.get_model(self.model))
        prefixed = self._prefixed(kind, texts)
        if memory is None or not self.use_cache:
            return await self._aembed_batches(prefixed)
        cached = []
        for i in range(0, len(prefixed), 10000):
            cached += await memory.embedding_cache_lookup(self.model, prefixed[i:i + 10000])
        misses = self._misses(prefixed, cached)
        fresh = await self._aembed_batches(misses) if misses else []
        for i in range(0, len(misses), 10000):
            await memory.embedding_cache_store(self.model, misses[i:i + 10000], fresh[i:i + 10000])
        return self._merge(prefixed, cached, misses, fresh)

    # -- public ---------------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str], *, memory=None) -> list[np.ndarray]:
        """Embeddings of texts to store (document prefix). With memory=, cache first."""
        return self._embed("document", list(texts), memory)

    def embed_queries(self, texts: Sequence[str], *, memory=None) -> list[np.ndarray]:
        """Embeddings of search queries (query prefix). With memory=, cache first."""
        return self._embed("query", list(texts), memory)

    def embed_query(self, text: str, *, memory=None) -> np.ndarray:
        return self.embed_queries([text], memory=memory)[0]

    async def aembed_documents(self, texts: Sequence[str], *, memory=None) -> list[np.ndarray]:
        return await self._aembed("document", list(texts), memory)

    async def aembed_queries(self, texts: Sequence[str], *, memory=None) -> list[np.ndarray]:
        return await self._aembed("query", list(texts), memory)
