"""OllamaEmbedder: embeddings from an Ollama server; and how a client calls its embedder.

The embedder holds no SQL and never calls the client. A client built with an embedder that has
``embed(texts)`` (OllamaEmbedder) puts the model's prefixes from the registry (``get_model``)
before the texts and looks them up in the tenant's embedding cache first
(``embedding_cache_lookup`` / ``embedding_cache_store``), sending only the misses to ``embed``,
``batch_size`` texts per Ollama request. Texts are cached with their prefix, so a document and a
query of the same words are different entries. Any other embedder (``model``,
``embed_documents(texts)``, ``embed_query(text)``: LexicalEmbedder) is called as is.

    from agentmem.client import Memory
    from agentmem.embed import OllamaEmbedder
    mem = Memory.connect(url, tenant="acme", embedder=OllamaEmbedder("nomic-embed-text"))
    mem.remember(conversation_id, "user", "I moved to Lisbon in May")
    mem.recall("alice", "where does the user live?")

Embeddings come back as lists of floats.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeGuard

from .errors import EmbedderError

CACHE_BATCH = 10000  # texts per embedding_cache_lookup / embedding_cache_store call


class Embedder(Protocol):
    """What a client needs of any embedder: the registered model's name, and embeddings of texts to
    store and of a search query (LexicalEmbedder, or a LangChain-style embeddings object)."""

    model: str

    def embed_documents(self, texts: list[str]) -> Sequence[Any]: ...

    def embed_query(self, text: str) -> Sequence[Any] | Any: ...


class PrefixingEmbedder(Embedder, Protocol):
    """An embedder a client drives itself (OllamaEmbedder): it embeds texts as given (``embed``), and
    the client puts the registry's prefixes before them and looks them up in the embedding cache."""

    document_prefix: str | None
    query_prefix: str | None
    use_cache: bool

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    def use_registry_prefixes(self, model_row: dict) -> None: ...

    def prefixed(self, kind: str, texts: Sequence[str]) -> list[str]: ...


def prefixes_texts(embedder: Embedder) -> TypeGuard[PrefixingEmbedder]:
    """Whether the client drives this embedder (prefixes, cache): it has ``embed(texts)``."""
    return hasattr(embedder, "embed")


def as_floats(vector: Any) -> list[float]:
    """An embedding as a list of floats: from a list, a pgvector Vector, or anything with tolist()."""
    if hasattr(vector, "to_list"):
        return vector.to_list()
    if hasattr(vector, "tolist"):
        return vector.tolist()
    return [float(x) for x in vector]


def import_ollama() -> Any:
    """The ollama client module, imported where it is used (it is the extra pg-agentmem[ollama]); a
    missing one says what to install."""
    try:
        import ollama
    except ModuleNotFoundError as exc:
        if exc.name not in ("ollama", "httpx"):
            raise
        raise ModuleNotFoundError("the Ollama client is not installed: pip install 'pg-agentmem[ollama]' "
                                  "(the driver and every SQL call work without it)", name="ollama") from exc
    return ollama


class OllamaEmbedder:
    """Embed with Ollama's /api/embed.

    model: the Ollama model name, registered in agentmem.models (its dimension and prefixes).
    host: the Ollama server; None means the ollama client's default (OLLAMA_HOST or localhost:11434).
    document_prefix / query_prefix: override the registry's prefixes (None: a client fills them in from
    the registry; '' when used without one).
    batch_size: texts per Ollama request.
    use_cache: whether a client looks texts up in the tenant's embedding cache first.
    """

    kind = "ollama"

    def __init__(self, model: str = "nomic-embed-text", host: str | None = None, *, batch_size: int = 64,
                 document_prefix: str | None = None, query_prefix: str | None = None,
                 timeout: float | None = 60.0, use_cache: bool = True):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        ollama = import_ollama()
        self.model = model
        self.host = host  # None: the ollama client reads OLLAMA_HOST, else 127.0.0.1:11434
        self.batch_size = batch_size
        self.document_prefix = document_prefix
        self.query_prefix = query_prefix
        self.use_cache = use_cache
        self._client = ollama.Client(host=self.host, timeout=timeout)
        self._async_client: Any = None
        self._timeout = timeout

    # -- prefixes -------------------------------------------------------------------------------

    def use_registry_prefixes(self, model_row: dict) -> None:
        """Take the prefixes not given to the constructor from the model's registry row (get_model)."""
        if self.document_prefix is None:
            self.document_prefix = model_row["document_prefix"]
        if self.query_prefix is None:
            self.query_prefix = model_row["query_prefix"]

    def prefixed(self, kind: str, texts: Sequence[str]) -> list[str]:
        """kind 'document' or 'query': the texts with that prefix before them."""
        prefix = (self.document_prefix if kind == "document" else self.query_prefix) or ""
        return [prefix + t for t in texts]

    # -- Ollama ---------------------------------------------------------------------------------

    def _error(self, exc: Exception) -> EmbedderError:
        import httpx
        ollama = import_ollama()
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

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' embeddings, as given (no prefix), ``batch_size`` texts per request."""
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            try:
                response = self._client.embed(model=self.model, input=list(texts[i:i + self.batch_size]))
            except Exception as exc:  # noqa: BLE001 - mapped to EmbedderError
                raise self._error(exc) from exc
            out.extend(as_floats(v) for v in response["embeddings"])
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """embed() for asyncio."""
        ollama = import_ollama()
        if self._async_client is None:
            self._async_client = ollama.AsyncClient(host=self.host, timeout=self._timeout)
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            try:
                response = await self._async_client.embed(model=self.model, input=list(texts[i:i + self.batch_size]))
            except Exception as exc:  # noqa: BLE001 - mapped to EmbedderError
                raise self._error(exc) from exc
            out.extend(as_floats(v) for v in response["embeddings"])
        return out

    # -- without a client: the constructor's prefixes, no cache ------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of texts to store (document prefix)."""
        return self.embed(self.prefixed("document", texts))

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of search queries (query prefix)."""
        return self.embed(self.prefixed("query", texts))

    def embed_query(self, text: str) -> list[float]:
        return self.embed_queries([text])[0]


# -- how a client calls its embedder (client_async.py, client_sync.py) ---------------------------

def require_embedder(client: Any) -> Embedder:
    if client.embedder is None:
        raise EmbedderError("this client has no embedder",
                            hint="Pass embedder=OllamaEmbedder(...) to Memory.connect, or call the "
                                 "function that takes an embedding with your own vectors.")
    return client.embedder


def embed_as_given(embedder: Embedder, kind: str, texts: list[str]) -> list[list[float]]:
    """An embedder without embed(texts), called as is: embed_documents, or embed_query per text."""
    if kind == "document":
        return [as_floats(v) for v in embedder.embed_documents(texts)]
    return [as_floats(embedder.embed_query(t)) for t in texts]


def embed_prefixed(embedder: PrefixingEmbedder, texts: list[str]) -> list[list[float]]:
    return embedder.embed(texts)


async def aembed_prefixed(embedder: PrefixingEmbedder, texts: list[str]) -> list[list[float]]:
    """embed_prefixed for asyncio: the embedder's aembed when it has one."""
    aembed = getattr(embedder, "aembed", None)
    if aembed is not None:
        return await aembed(texts)
    return embedder.embed(texts)


def misses_of(texts: list[str], cached: list[list[float] | None]) -> list[str]:
    """The distinct texts the cache did not have, in first-seen order."""
    return list(dict.fromkeys(t for t, c in zip(texts, cached) if c is None))


def merge_cached(texts: list[str], cached: list[list[float] | None], misses: list[str],
                 fresh: list[list[float]]) -> list[list[float]]:
    made = dict(zip(misses, fresh))
    return [c if c is not None else made[t] for t, c in zip(texts, cached)]
