"""Bulk loading for benchmarks and tests: COPY straight into agentmem's tables, invariants kept.

Not API (the application role may not do this): it runs as a superuser, for
data sets that would take minutes through store_messages. It is the one place
that knows what the functions keep true of the tables they write, so that data
loaded here is what the API would have written:

* ``message_index`` 0, 1, 2, ... per conversation (as stored; only a deletion leaves gaps), and ``conversations.next_index``;
* ``user_id`` and ``conversation_id`` copied onto messages and message_embeddings
  (``created_at`` too), ``tenant_id`` everywhere, the model registered;
* facts' ``source_message_ids`` real messages of the user, sorted and distinct;
* cache entries with ``question_norm = normalize_question(question)``,
  ``question_key`` its sha256, the tenant's ``corpus_version``,
  ``cache_entry_sources`` for every source id, hit-log rows as cache_lookup writes them;
* embedding-cache rows keyed by the sha256 of the message text.

``check_invariants`` asserts all of these on loaded data; ``hnsw_dropped`` drops
the model's HNSW indexes for a load and rebuilds them after (much faster than
inserting into them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np

EMBEDDING_TABLES = ("message_embeddings", "facts", "cache_entries")
WORDS = ("order invoice refund shipping delay password account login upgrade plan price discount "
         "warranty return address phone email schedule meeting report export import backup restore "
         "error crash update version install license renew cancel trial support ticket agent").split()


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class Bulk:
    """COPY conversations, messages, facts and cached answers into the tables (superuser), invariants kept."""

    def __init__(self, conn, *, model: str, rng: np.random.Generator | None = None):
        self.conn, self.model = conn, model
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.dim = conn.execute("select dimension from agentmem.models where model = %s", (model,)).fetchone()[0]
        self.phrases = [" ".join(p) for p in self.rng.choice(WORDS, size=(997, 12))]

    @contextmanager
    def hnsw_dropped(self, tables: Sequence[str] = EMBEDDING_TABLES,
                     maintenance_work_mem: str = "512MB") -> Iterator[None]:
        """Drop the model's HNSW indexes on `tables`, load, then rebuild them and ANALYZE."""
        for table in tables:
            name = self.conn.execute("select agentmem_private.model_index_name(%s, %s)",
                                     (table, self.model)).fetchone()[0]
            self.conn.execute(f'drop index if exists agentmem."{name}"')
        yield
        self.conn.execute("select set_config('maintenance_work_mem', %s, false)", (maintenance_work_mem,))
        self.conn.execute("select agentmem_private.ensure_model_indexes(%s)", (self.model,))
        self.conn.execute("reset maintenance_work_mem")
        self.conn.execute("analyze agentmem.conversations, agentmem.messages, agentmem.message_embeddings, "
                          "agentmem.facts, agentmem.cache_entries")

    def messages(self, tenant: str, user: str, vectors: np.ndarray, **kwargs) -> tuple[list[uuid.UUID],
                                                                                        list[uuid.UUID]]:
        """One user's messages: load_messages with every message owned by (tenant, user)."""
        return self.load_messages([(tenant, user)] * len(vectors), vectors, **kwargs)

    def load_messages(self, owners: Sequence[tuple[str, str]], vectors: np.ndarray, *,
                      ids: Sequence[uuid.UUID] | None = None, contents: Sequence[str] | None = None,
                      per_conversation: int = 500, age_days: float = 0,
                      embedding_cache: bool = False,
                      occurred_at: Sequence[dt.datetime] | None = None) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """Messages with their embeddings, owners[i] = (tenant, user) of message i; each owner's messages
        in conversations of per_conversation messages, in order. One COPY per table, whatever the owners.

        With age_days the rows are backdated (spread over one hour from then on); occurred_at (one
        per message, in time order per owner) says when they happened, else when stored. With
        embedding_cache, the embedding-cache rows the driver would have left. Returns
        (message ids in the order of `vectors`, conversation ids).
        """
        n = len(vectors)
        now = dt.datetime.now(dt.timezone.utc)
        base = now - dt.timedelta(days=age_days)
        ts = [base + dt.timedelta(seconds=3600 * i / max(n, 1)) for i in range(n)] if age_days else [now] * n
        ids = list(ids) if ids is not None else [uuid.uuid4() for _ in range(n)]
        occurred = list(occurred_at) if occurred_at is not None else ts
        if contents is None:
            contents = [f"{self.phrases[i % len(self.phrases)]} ({owners[i][1]} #{i})" for i in range(n)]
        conv_of: list[uuid.UUID] = []
        index_of: list[int] = []
        conversations: dict[uuid.UUID, list] = {}  # id -> [tenant, user, size, first ts, last ts]
        current: dict[tuple[str, str], uuid.UUID] = {}
        for i, owner in enumerate(owners):
            c = current.get(owner)
            if c is None or conversations[c][2] == per_conversation:
                c = current[owner] = uuid.uuid4()
                conversations[c] = [owner[0], owner[1], 0, ts[i], ts[i]]
            conv_of.append(c)
            index_of.append(conversations[c][2])
            conversations[c][2] += 1
            conversations[c][4] = ts[i]
        with self.conn.cursor() as cur:
            with cur.copy("copy agentmem.conversations (tenant_id, conversation_id, user_id, title, next_index, "
                          "created_at, updated_at) from stdin") as cp:
                for c, (tenant, user, size, first, last) in conversations.items():
                    cp.write_row((tenant, c, user, f"conversation of {user}", size, first, last))
            with cur.copy("copy agentmem.messages (tenant_id, message_id, conversation_id, user_id, message_index, "
                          "role, content, created_at, occurred_at) from stdin") as cp:
                for i in range(n):
                    cp.write_row((owners[i][0], ids[i], conv_of[i], owners[i][1], index_of[i],
                                  "user" if index_of[i] % 2 == 0 else "assistant", contents[i], ts[i],
                                  occurred[i]))
            with cur.copy("copy agentmem.message_embeddings (tenant_id, message_id, model, user_id, conversation_id, "
                          "embedding, created_at, occurred_at) from stdin with (format binary)") as cp:
                cp.set_types(["text", "uuid", "text", "text", "uuid", "vector", "timestamptz", "timestamptz"])
                for i in range(n):
                    cp.write_row((owners[i][0], ids[i], self.model, owners[i][1], conv_of[i], vectors[i], ts[i],
                                  occurred[i]))
            if embedding_cache:  # what the driver leaves behind: the embedding of each text it embedded
                with cur.copy("copy agentmem.embedding_cache (tenant_id, model, text_sha256, cached_vector, "
                              "created_at) from stdin with (format binary)") as cp:
                    cp.set_types(["text", "text", "bytea", "vector", "timestamptz"])
                    for i in range(n):
                        cp.write_row((owners[i][0], self.model, hashlib.sha256(contents[i].encode()).digest(),
                                      vectors[i], ts[i]))
        return ids, list(conversations)

    def facts(self, tenant: str, user: str, n: int, source_pool: Sequence[uuid.UUID],
              created_at: dt.datetime | None = None) -> None:
        """n facts of a user, each citing 1 to 3 of the user's messages (source_pool)."""
        at = created_at or dt.datetime.now(dt.timezone.utc)
        vectors = unit_vectors(self.rng, n, self.dim)
        with self.conn.cursor() as cur, cur.copy(
                "copy agentmem.facts (tenant_id, fact_id, user_id, subject, fact, model, embedding, "
                "source_message_ids, created_at, updated_at) from stdin with (format binary)") as cp:
            cp.set_types(["text", "uuid", "text", "text", "text", "text", "vector", "uuid[]",
                          "timestamptz", "timestamptz"])
            for i in range(n):
                src = sorted({source_pool[int(j)] for j in self.rng.integers(0, len(source_pool), 1 + i % 3)})
                cp.write_row((tenant, uuid.uuid4(), user, f"subject {i}", f"{user} fact {i}: "
                              f"{self.phrases[(7 * i) % len(self.phrases)]}", self.model, vectors[i], src, at, at))

    def cache_entries(self, tenant: str, questions: Sequence[str], vectors: np.ndarray, *,
                      answers: Sequence[str] | None = None, sources: Sequence[Sequence[str]] | None = None,
                      user: str | None = None, conversations: Sequence[uuid.UUID] | None = None,
                      created_at: dt.datetime | None = None, ttl: dt.timedelta = dt.timedelta(days=7),
                      hits_per_entry: int = 0) -> None:
        """Cached answers as cache_store writes them (normalised key, corpus version, reverse index),
        with hits_per_entry exact hits each in the hit log as cache_lookup writes them."""
        at = created_at or dt.datetime.now(dt.timezone.utc)
        n = len(questions)
        self.conn.execute("create temp table if not exists stage_cache (entry_id uuid, user_id text, "
                          "conversation_id uuid, question text, answer text, embedding vector, docs text[], "
                          "created_at timestamptz)")
        with self.conn.cursor() as cur:
            with cur.copy("copy stage_cache from stdin with (format binary)") as cp:
                cp.set_types(["uuid", "text", "uuid", "text", "text", "vector", "text[]", "timestamptz"])
                for i in range(n):
                    cp.write_row((uuid.uuid4(), user, conversations[i % len(conversations)] if conversations else None,
                                  questions[i], answers[i] if answers else "an answer", vectors[i],
                                  list(sources[i]) if sources else [], at))
            cur.execute(
                "insert into agentmem.cache_entries (tenant_id, entry_id, question, question_norm, question_key, "
                "  corpus_version, intent, answer, model, embedding, source_ids, user_id, conversation_id, "
                "  created_at, expires_at, guard_version, guard_tokens, guard_features) "
                "select %(t)s, s.entry_id, s.question, n.norm, sha256(convert_to(n.norm, 'UTF8')), "
                "  coalesce((select v.version from agentmem.corpus_versions as v where v.tenant_id = %(t)s), 0), "
                "  'general', s.answer, %(m)s, s.embedding, "
                "  array(select distinct d from unnest(s.docs) as d order by d), s.user_id, s.conversation_id, "
                "  s.created_at, s.created_at + %(ttl)s, g.guard_version, g.guard_tokens, g.guard_features "
                "from stage_cache as s cross join lateral (select agentmem.normalize_question(s.question)) "
                "  as n (norm) cross join lateral agentmem_private.entry_guard(s.question) as g",
                {"t": tenant, "m": self.model, "ttl": ttl})
            cur.execute("insert into agentmem.cache_entry_sources (tenant_id, doc_id, entry_id) "
                        "select distinct %s, d, s.entry_id from stage_cache as s cross join unnest(s.docs) as d",
                        (tenant,))
            if hits_per_entry:
                cur.execute("insert into agentmem.cache_hits (tenant_id, entry_id, kind, similarity, intent, "
                            "  question_asked, matched_question, user_id, created_at) "
                            "select %s, s.entry_id, 'exact', 1, 'general', s.question, s.question, s.user_id, "
                            "  s.created_at "
                            "from stage_cache as s cross join generate_series(1, %s)", (tenant, hits_per_entry))
            cur.execute("truncate stage_cache")

    def user(self, tenant: str, user: str, n_msgs: int, per_conv: int = 500, n_facts: int = 0, n_answers: int = 0,
             hits_per_answer: int = 2, age_days: float = 0,
             embedding_cache: bool = True) -> tuple[list[uuid.UUID], list[uuid.UUID], np.ndarray]:
        """A user as the driver would leave one: messages (and their embedding-cache rows), facts citing
        them, cached answers with sources and hits. Returns (message ids, conversation ids, vectors)."""
        vectors = unit_vectors(self.rng, n_msgs, self.dim)
        ids, convs = self.messages(tenant, user, vectors, per_conversation=per_conv, age_days=age_days,
                                   embedding_cache=embedding_cache)
        at = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=age_days)
        if n_facts:
            self.facts(tenant, user, n_facts, ids, created_at=at)
        if n_answers:
            p = self.phrases
            self.cache_entries(
                tenant, [f"{user.capitalize()} asks: how do I {p[(3 * i) % len(p)]}? (#{i})" for i in range(n_answers)],
                unit_vectors(self.rng, n_answers, self.dim),
                answers=[f"an answer about {p[(5 * i) % len(p)]}" for i in range(n_answers)],
                sources=[[f"doc-{i % 50}"] for i in range(n_answers)], user=user, conversations=convs,
                created_at=at, hits_per_entry=hits_per_answer)
        return ids, convs, vectors


INVARIANTS = {
    "conversations.next_index = message count = max(message_index) + 1, min 0": """
        select count(*) from agentmem.conversations as c
        left join (select m.tenant_id, m.conversation_id, count(*) as n, min(m.message_index) as lo,
                          max(m.message_index) as hi
                   from agentmem.messages as m group by 1, 2) as s using (tenant_id, conversation_id)
        where c.tenant_id = any(%(t)s)
          and (c.next_index <> coalesce(s.n, 0) or coalesce(s.lo, 0) <> 0 or coalesce(s.hi, -1) <> c.next_index - 1)""",
    "messages.user_id = its conversation's": """
        select count(*) from agentmem.messages as m join agentmem.conversations as c using (tenant_id, conversation_id)
        where m.tenant_id = any(%(t)s) and m.user_id <> c.user_id""",
    "one embedding of the model per message, user_id/conversation_id/created_at/occurred_at copied": """
        select count(*) from agentmem.messages as m
        left join agentmem.message_embeddings as e
            on e.tenant_id = m.tenant_id and e.message_id = m.message_id and e.model = %(m)s
        where m.tenant_id = any(%(t)s)
          and (e.message_id is null or e.user_id <> m.user_id
               or e.conversation_id <> m.conversation_id or e.created_at <> m.created_at
               or e.occurred_at <> m.occurred_at
               or vector_dims(e.embedding) <> (select d.dimension from agentmem.models as d where d.model = %(m)s))""",
    "facts' sources are the user's real messages, sorted and distinct": """
        select count(*) from agentmem.facts as f
        where f.tenant_id = any(%(t)s) and (
            f.source_message_ids <> array(select distinct s from unnest(f.source_message_ids) as s order by s)
            or exists (select from unnest(f.source_message_ids) as s where not exists (
                select from agentmem.messages as m
                where m.tenant_id = f.tenant_id and m.message_id = s and m.user_id = f.user_id)))""",
    "cache_entries: question_norm/question_key/corpus_version as cache_store writes them": """
        select count(*) from agentmem.cache_entries as e
        where e.tenant_id = any(%(t)s) and (
            e.question_norm <> agentmem.normalize_question(e.question)
            or e.question_key <> sha256(convert_to(e.question_norm, 'UTF8'))
            or e.corpus_version <> coalesce((select v.version from agentmem.corpus_versions as v
                                             where v.tenant_id = e.tenant_id), 0))""",
    "cache_entry_sources = cache_entries.source_ids": """
        select count(*) from agentmem.cache_entries as e
        where e.tenant_id = any(%(t)s) and e.source_ids <> array(
            select s.doc_id from agentmem.cache_entry_sources as s
            where s.tenant_id = e.tenant_id and s.entry_id = e.entry_id order by s.doc_id)""",
    "embedding_cache rows are the sha256 of a message text": """
        select count(*) from agentmem.embedding_cache as c
        left join (select distinct m.tenant_id, sha256(convert_to(m.content, 'UTF8')) as h
                   from agentmem.messages as m where m.tenant_id = any(%(t)s)) as m
            on m.tenant_id = c.tenant_id and m.h = c.text_sha256
        where c.tenant_id = any(%(t)s) and m.h is null""",
}


def check_invariants(conn, tenants: Sequence[str], model: str) -> list[str]:
    """Assert every invariant above on the tenants' data; returns their names (for a report)."""
    bad = {name: conn.execute(sql, {"t": list(tenants), "m": model}).fetchone()[0]
           for name, sql in INVARIANTS.items()}
    assert not any(bad.values()), f"bulk data breaks invariants: {bad}"
    return list(INVARIANTS)
