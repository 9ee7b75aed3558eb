from agentmem.client import Memory
from agentmem.embed import OllamaEmbedder
# -- round trips --------------------------------------------------------------------------------

class RoundTrips:
    """libpq's protocol trace of a one-connection client: the server's ReadyForQuery messages are the
    round trips (one per pipeline's Sync, per simple query, per BEGIN / COMMIT)."""

    def __init__(self, mem, tmp_path):
        self.path = tmp_path / "trace.txt"
        self.file = open(self.path, "w")
        with mem.pool.connection() as conn:
            self.conn = conn
        self.conn.prepare_threshold = None  # every statement's text in the trace (a prepared one sends its name)
        self._trace()
        self.seen = 0

    def _trace(self):
        import psycopg.pq
        self.conn.pgconn.trace(self.file.fileno())
        self.conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

    def __call__(self) -> tuple[int, list[str]]:
        """The round trips since the last call, and the functions called in them."""
        import re
        self.conn.pgconn.untrace()  # flushes libpq's buffer
        lines = self.path.read_text().splitlines()[self.seen:]
        self.seen += len(lines)
        self._trace()
        called = [m for line in lines if line.startswith("F") for m in re.findall(r"agentmem\.(\w+)\(", line)]
        return sum(1 for line in lines if line.startswith("B") and "ReadyForQuery" in line), called


def test_round_trips_of_cached_answer_recall_and_search_messages(app_url, stub, tmp_path):
    """The data path in round trips on a cold and a warm embedding cache (the figures of docs/driver.md)."""
    with Memory.connect(app_url, tenant="acme", max_size=1,
                        embedder=OllamaEmbedder("all-minilm", host=stub.host)) as mem:
        trips = RoundTrips(mem, tmp_path)
        mem.cached_answer("How do I rotate an API key?")   # first use of the embedder: its prefixes too
        assert trips() == (4, ["set_tenant", "get_model", "set_tenant", "embedding_cache_lookup",
                               "set_tenant", "embedding_cache_store", "set_tenant", "cache_lookup"])
        mem.cached_answer("How do I revoke an API key?")   # cold embedding cache
        assert trips()[0] == 3
        mem.cached_answer("How do I revoke an API key?")   # warm
        assert trips() == (2, ["set_tenant", "embedding_cache_lookup", "set_tenant", "cache_lookup"])
        mem.recall("alice", "my API keys")                 # cold
        assert trips()[0] == 3
        mem.recall("alice", "my API keys")                 # warm
        assert trips()[0] == 2
        mem.search_messages("alice", [0.1] * 384, model="all-minilm")  # no embedding: one round trip
        assert trips() == (1, ["set_tenant", "search_messages"])
