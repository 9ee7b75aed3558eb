"""`agentmem demo`: a short narrated tour through the real API (`make demo`).

It recreates a database ``agentmem_demo`` on the given server, migrates it,
creates an application login (no superuser, so row-level security applies) and
walks through what a docs assistant does with agentmem.
"""

from __future__ import annotations

import os
import textwrap

import psycopg

from agentmem import __version__
from agentmem.migrate import Migrator, Source

from .shell import with_database

DEMO_DB = "agentmem_demo"
DEMO_APP = "agentmem_demo_app"
DEMO_WORKER = "agentmem_demo_worker"  # the embedding worker's login: role agentmem_worker, nothing else
TENANT = "docs-co"
OFFLINE_MODEL = "agentmem-lexical-768"


def say(text: str) -> None:
    print(textwrap.fill(text, width=100, subsequent_indent="  ", break_on_hyphens=False))  # names whole


def step(title: str) -> None:
    print(f"\n== {title}")


def _prepare(url: str) -> tuple[str, str]:
    """Recreate the demo database, migrate it, create the app login. Returns (admin, app) URLs."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {DEMO_DB} with (force)")
        conn.execute(f"create database {DEMO_DB}")
        for login in (DEMO_APP, DEMO_WORKER):
            if not conn.execute("select 1 from pg_roles where rolname = %s", (login,)).fetchone():
                conn.execute(f"create role {login} login")
    admin_url = with_database(url, DEMO_DB)
    migrator = Migrator(admin_url, Source.load())
    applied = migrator.migrate()
    migrator.grant_app_role(DEMO_APP)
    with psycopg.connect(admin_url) as conn:
        # Tenants are bound to logins: the demo's login may act as its two tenants, no other.
        for tenant in ("docs-co", "other-co"):
            conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => %s)", (DEMO_APP, tenant))
        conn.execute(f"grant agentmem_worker to {DEMO_WORKER}")
        version = conn.execute("select current_setting('server_version'), "
                               "(select extversion from pg_extension where extname = 'vector')").fetchone()
    say(f"agentmem {__version__} on PostgreSQL {version[0]} with pgvector {version[1]}: database "
        f"{DEMO_DB} created and migrated ({len(applied)} migrations). The app connects as "
        f"{DEMO_APP}, an ordinary login in role agentmem_app, so row-level security applies to it, "
        f"granted the tenants docs-co and other-co (agentmem.grant_tenant).")
    return admin_url, with_database(url, DEMO_DB, DEMO_APP)


def _embedder(admin_url: str):
    """Ollama with nomic-embed-text when one answers; else the offline lexical embedder."""
    from agentmem.lexical import LexicalEmbedder
    host = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434")
    try:
        import ollama
        ollama.Client(host=host, timeout=5).embed(model="nomic-embed-text", input="ping")
    except Exception:  # noqa: BLE001 - any failure means: no usable Ollama here
        print(f"No Ollama with nomic-embed-text at {host}: using the built-in offline embedder "
              f"{OFFLINE_MODEL}, which is lexical (shared words), not semantic.")
        from agentmem.admin import Admin
        with Admin.connect(admin_url) as dba:  # the DBA's client: registering a model is not the app's job
            dba.register_model(OFFLINE_MODEL, 768)
        return LexicalEmbedder(model=OFFLINE_MODEL, dim=768)
    from agentmem.embed import OllamaEmbedder
    say(f"Ollama answered at {host}: embedding with nomic-embed-text (768 dimensions).")
    return OllamaEmbedder(model="nomic-embed-text", host=host)


def run(url: str | None) -> int:
    if not url:
        print("agentmem demo: pass --database-url (make demo starts an embedded server and passes it)")
        return 2
    print("agentmem demo: a docs assistant's memory, inside PostgreSQL")
    step("1. install")
    admin_url, app_url = _prepare(url)
    step("2. embeddings")
    embedder = _embedder(admin_url)
    from agentmem.client import Memory
    with Memory.connect(app_url, tenant=TENANT, embedder=embedder) as mem:
        tour(mem, app_url, with_database(url, DEMO_DB, DEMO_WORKER))
    leftover(with_database(url, DEMO_DB))
    return 0


def leftover(admin_url: str) -> None:
    """What the tour leaves in the database, and the one command that opens it in psql."""
    step("9. what is left, and where")
    with psycopg.connect(admin_url) as conn:  # the superuser's count: row-level security does not hide rows
        users = conn.execute("select user_id, count(*) from agentmem.messages where tenant_id = %s "
                             "group by user_id order by user_id", (TENANT,)).fetchall()
        answers = conn.execute("select count(*) from agentmem.cache_entries where tenant_id = %s",
                               (TENANT,)).fetchone()[0]
    held = ", ".join(f"user '{u}' ({n} messages)" for u, n in users) or "no user"
    say(f"Left in database {DEMO_DB}, tenant '{TENANT}': {held} and {answers} cached answer(s); user 'alice' "
        "was erased. Open them in psql as the application login with that tenant set (make psql does the "
        "same for the dev server's database agentmem, tenant acme):")
    print(f"    .venv/bin/agentmem psql --database-url {admin_url} --tenant {TENANT}")
    say("then, for instance:")
    print("    select message_index, role, content from agentmem.search_messages(user_id => 'bob', "
          "query_text => 'refund annual plans', k => 3);")
    print("    \\df+ agentmem.*")
    say("The answer cache's value per threshold, as a table or a plot (the plot needs matplotlib: the "
        "package's plot extra, which make demo installs):")
    print(f"    .venv/bin/agentmem cache-report --database-url {with_database(admin_url, DEMO_DB, DEMO_APP)} "
          f"--tenant {TENANT} --cost-uncached 0.01 --cost-wrong 0.50 --png cache-report.png")
    print("\nDone. Re-run with `make demo`.")


TURNS = [
    ("user", "How do I rotate an API key for the billing service?"),
    ("assistant", "Create a new key under Settings > API keys, deploy it, then revoke the old key."),
    ("user", "Does revoking the old API key break running jobs?"),
    ("assistant", "Jobs still holding the old key fail on their next call: restart them with the new key first."),
    ("user", "Thanks. Where do I download invoices?"),
    ("assistant", "Invoices are under Billing > Invoices, as PDF files."),
]


def _show(rows, fmt) -> None:
    for row in rows:
        print("   ", fmt(row))


def worker_embedder(embedder):
    """The demo's embedder as the worker's (texts already carry the model's prefix from the claim)."""
    from agentmem.lexical import LexicalEmbedder
    if isinstance(embedder, LexicalEmbedder):
        return lambda model, dimension, host: (lambda texts: embedder.embed_documents(list(texts)))
    from agentmem.worker import ollama_embedder
    return lambda model, dimension, host: ollama_embedder(model, dimension, embedder.host)


def text_in_worker_out(mem, conversation, worker_url: str) -> None:
    """A message stored as text alone, found by words at once, embedded by one worker pass, then found
    by meaning."""
    from agentmem.worker import Worker
    text = "My invoice PDF still shows our old company address."
    query = "is the address on the invoice PDF old"
    stored = mem.store_message(conversation, "user", text, None, model=mem.embedder.model)
    say(f"An app with no embedding model stores a message as text alone (embedding => null): {text!r} is "
        f"message {stored.message_index}, and an embedding job for it is queued in the same transaction.")
    by_words = [h.content for h in mem.search_messages("alice", query_text="company address", k=3)]
    print(f"    by words at once ('company address'): {'FOUND' if text in by_words else 'not found'}")
    by_meaning = [h.content for h in mem.recall("alice", query, k=3, hybrid=False)]
    print(f"    by meaning ({query!r}): {'FOUND' if text in by_meaning else 'not yet: no vector'}")
    worker = Worker(worker_url, embedder=worker_embedder(mem.embedder), batch_size=16)
    try:
        stats = worker.run(once=True)
        backlog = worker.backlog()
    finally:
        worker.close()
    say(f"One pass of the embedding worker (agentmem worker --once; here in this process, as {DEMO_WORKER}, a "
        f"login in role agentmem_worker, with the demo's embedder {mem.embedder.model}): claimed "
        f"{stats.claimed} job(s) under a lease, embedded {stats.embedded_texts} text(s), completed "
        f"{stats.completed}; backlog now {backlog}. A deployment runs `agentmem worker`, which waits for jobs "
        "(LISTEN/NOTIFY); docker-compose.yml runs one.")
    hits = mem.recall("alice", query, k=3, hybrid=False)
    found = next((h for h in hits if h.content == text), None)
    print(f"    by meaning ({query!r}): " + (f"FOUND, rank {hits.index(found) + 1}, similarity "
                                               f"{found.similarity:.2f}" if found else "not found"))


def tour(mem, app_url: str, worker_url: str) -> None:
    from agentmem.errors import InsufficientPrivilege, TenantNotSet

    step("3. conversation memory")
    conversation = mem.start_conversation("alice", title="API keys and invoices")
    for role, content in TURNS:
        mem.remember(conversation, role, content)
    say(f"alice's conversation holds {len(TURNS)} messages, each stored with its embedding in one "
        "transaction (a rejected embedding stores nothing). Recall 'what happens to jobs when a key "
        "is revoked?':")
    hits = mem.recall("alice", "what happens to jobs when a key is revoked?", k=2)
    _show(hits, lambda h: f"[{h.message_index}] sim {h.similarity:.2f}  {h.role}: {h.content}")
    say("The top hit expanded to its context window (1 message either side):")
    _show(mem.context_window(hits[0].message_id, before=1, after=1),
          lambda m: f"[{m.message_index}] {m.role}: {m.content}")
    mem.set_summary(conversation, "alice rotated a billing API key and asked about revoking the old one.",
                    through_index=3)
    say("Short-term context for the next prompt: the running summary, then the last 2 messages verbatim:")
    _show(mem.short_term_context(conversation, keep_last=2),
          lambda c: f"({c.kind}) {c.role}: {c.content}")

    step("4. text in, embeddings by the worker")
    text_in_worker_out(mem, conversation, worker_url)

    step("5. tenant isolation")
    other = mem.for_tenant("other-co")
    found = other.recall("alice", "what happens to jobs when a key is revoked?", k=2)
    say(f"The same search from tenant 'other-co' finds {len(found)} messages: row-level security and "
        "every function scope reads to the tenant set for the transaction.")
    try:
        _no_tenant_call(app_url)
    except TenantNotSet as exc:
        say(f"A session with no tenant gets an error, never everything: [{exc.sqlstate}] {exc.args[0]}")
    try:
        mem.for_tenant("not-granted-co").recall("alice", "what happens to jobs when a key is revoked?", k=2)
    except InsufficientPrivilege as exc:
        say(f"A tenant not granted to this login is refused, by set_tenant, set_config or SET alike: "
            f"[{exc.sqlstate}] {exc.args[0]}")

    step("6. answer cache")
    question = "How do I rotate an API key?"
    personal = mem.store_answer(question, "Alice, your key expires on 2026-12-31: rotate it before then.")
    say(f"An answer that names a person and a date the question does not is refused: "
        f"stored={personal.stored} ({personal.reason}).")
    stored = mem.store_answer(question, "Create a new key, deploy it, then revoke the old key.",
                              source_ids=["docs/api-keys.md"])
    say(f"The generic answer is cached, citing docs/api-keys.md (stored={stored.stored}).")
    for asked in ("how do I rotate an API key", "How do I rotate an API key after 30 days?"):
        r = mem.cached_answer(asked)
        verdict = f"HIT ({r.kind}, similarity {r.similarity:.2f})" if r.hit else f"miss ({r.reason})"
        say(f"  {asked!r}: {verdict}")
    removed = mem.invalidate_source("docs/api-keys.md")
    r = mem.cached_answer(question)
    say(f"docs/api-keys.md changed: invalidate_source removed {removed} cached answer(s); "
        f"the same question now {'hits' if r.hit else 'misses'}.")

    step("7. facts and forgetting")
    fact = "alice deploys the billing service with Python"
    vector = mem.embed_documents([fact])[0]
    mem.upsert_fact("alice", "stack", fact, vector, source_message_ids=[hits[0].message_id])
    query = mem.embed_queries(["which language does alice use"])[0]
    _show(mem.recall_facts("alice", query, k=1), lambda f: f"fact [{f.subject}] {f.fact}")
    receipt = mem.forget_user("alice")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(receipt.rows_removed.items()) if v)
    say(f"forget_user('alice') in one transaction: {counts}. The receipt holds counts and a time, no content.")
    say(f"Recall for alice now finds {len(mem.recall('alice', 'API key', k=5))} messages.")

    step("8. a conversational-RAG turn, five times")
    conversation_turns(mem)


DOCS = {
    "docs/refunds.md": "Refunds are possible within 14 days from the invoice date.",
    "docs/annual-plans.md": "Annual plans are billed once a year, in advance.",
    "docs/api-keys.md": "Rotate an API key under Settings > API keys, then revoke the old key.",
    "docs/jobs.md": "Running jobs keep the key they started with until their next call.",
}
DOC_WORDS = {"refund": ["docs/refunds.md"], "annual": ["docs/annual-plans.md", "docs/refunds.md"],
             "key": ["docs/api-keys.md"], "jobs": ["docs/jobs.md", "docs/api-keys.md"]}
# What a small chat model would rewrite the follow-ups to; the demo runs with no chat model.
REWRITES = {
    "Does that apply to annual plans?": "Does the 14-day refund window apply to annual plans?",
    "Does revoking it break running jobs?": "Does revoking the old API key break running jobs?",
}
ANSWERS = {
    "What is the refund window?": "14 days from the invoice date.",
    "Does the 14-day refund window apply to annual plans?": "Yes: annual plans have the same 14-day window.",
    "How do I rotate an API key?": "Create a new key in the API keys settings, then revoke the old one.",
    "Does revoking the old API key break running jobs?": "Running jobs fail on their next call with the old key.",
}
QUESTIONS = ["What is the refund window?", "Does that apply to annual plans?", "How do I rotate an API key?",
             "Does revoking it break running jobs?", "Does the 14-day refund window also apply to annual plans?"]


def _retrieve(question: str):
    """The application's document search (a keyword stand-in): (doc_id, text) pairs."""
    ids = [d for word, docs in DOC_WORDS.items() if word in question.lower() for d in docs]
    return [(d, DOCS[d]) for d in dict.fromkeys(ids)]


def _generate(request) -> str:
    """A canned generator: the demo has no chat model."""
    return ANSWERS.get(request.standalone, "I do not know.")


def conversation_turns(mem) -> None:
    from agentmem.turn import CannedCondenser, Turn
    say("Turn runs a whole turn: embed, cache_lookup, short_term_context, topic_shift, condense, "
        "search_with_context, the app's retriever filtered by unseen_docs, the generator, store_messages + "
        "record_retrieval, cache_store, summarise. Each database step is one SQL function. Offline stand-ins: "
        "the condenser is CANNED (fixed rewrites, no model; for real it is one call to llama3.2:1b), the "
        "generator gives canned answers and the retriever matches keywords over four documents.")
    turn = Turn(mem, retriever=_retrieve, generator=_generate, condenser=CannedCondenser(REWRITES),
                summariser=lambda previous, messages: (previous + " " if previous else "")
                + f"bob asked {sum(m['role'] == 'user' for m in messages)} more question(s) about billing.")
    conversation = mem.start_conversation("bob", title="refunds, then API keys")
    say("The subject is judged from documents, so a turn's own shift is known once its retrieval is "
        "recorded: each turn below reports topic_shift as it stands after the turn; Turn acts on it at the "
        "next turn, which drops the history from before the new subject.")
    started: dict[int, int] = {}  # the user message's index -> the turn that asked it
    for i, question in enumerate(QUESTIONS, 1):
        r = turn(conversation, "bob", question)
        print(f"  turn {i}: {question!r}")
        if r.cache_hit:
            print(f"    cache HIT ({r.cache_kind}, similarity {r.cache_similarity:.3f}): retrieval and "
                  "generation skipped")
        else:
            c = r.condensed
            if c.standalone != question:
                print(f"    condensed ({c.reason}): {c.standalone!r}")
            if r.topic.shifted:
                since = r.topic.since_message_index
                print(f"    history: the window before message {since} (turn {started.get(since, '?')}, where the "
                      f"subject changed) is dropped; {r.history_used} messages kept")
            else:
                print(f"    history: {r.history_used} messages")
            print(f"    documents used {r.docs_used}" + (f", skipped as already seen {r.docs_skipped}"
                                                           if r.docs_skipped else ""))
            after = mem.topic_shift(conversation)
            if after.since_message_index is not None:
                started[after.since_message_index] = i
            if after.turns_compared < 2:
                print("    subject: the first turn with documents")
            elif after.shifted:
                print(f"    subject CHANGED here: this turn's documents overlap the previous turn's "
                      f"{after.overlap:.2f} < 0.15")
            else:
                print(f"    subject: the same (documents overlap the previous turn's {after.overlap:.2f})")
            stored = ("answer stored in the cache" if r.cache_stored
                      else f"answer not stored in the cache ({r.cache_store_reason})")
            print(f"    {stored}" + (f"; {r.summary_note}" if r.summary_note else ""))
        print(f"    answer: {r.answer}")
    ms = ", ".join(f"{name} {sec * 1000:.0f}" for name, sec in r.timings.items())
    say(f"Every step is timed in the result (last turn, ms): {ms}.")
    served = [h for h in mem.sample_hits(n=50, min_similarity=0.0) if h.kind != "miss"]
    for hit in served:
        mem.review_hit(hit.hit_id, correct=True)  # a person read each served answer: all right
    say(f"A reviewer read the {len(served)} answers the cache served and marked them right (sample_hits, "
        "review_hit): cache_report prices each similarity threshold from such reviews.")


def _no_tenant_call(app_url: str) -> None:
    """One call from a fresh application session that never set a tenant."""
    from agentmem.errors import translate
    with psycopg.connect(app_url) as conn:
        try:
            conn.execute("select * from agentmem.recent_messages(conversation_id => gen_random_uuid())")
        except psycopg.Error as exc:
            raise translate(exc) from exc
