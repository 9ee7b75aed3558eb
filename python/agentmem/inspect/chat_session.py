"""The chat page's logic, with no web framework: one ``Turn`` per message, and what the page shows.

``ChatRoom`` runs a user's conversation through the SQL API (the driver's ``Memory``, one
``agentmem.*`` call per step) and returns view models that ``chat.py`` renders:

* ``send``: the user's current conversation (their newest; one is started when they have none),
  the user's facts recalled for the message (``recall_facts``), one ``Turn`` (cache lookup,
  window, topic shift, condensation, ``search_with_context``, documents not yet seen, generation,
  the exchange stored, the answer cached, the summary), then the facts of the exchange extracted
  (``extract_facts`` with the chat model; offline, a few sentence patterns and ``upsert_fact``).
  Its ``TurnView`` holds the answer, whether the cache answered and the question it matched, each
  step with its milliseconds (Turn's ``StepClock`` and the two fact steps), the documents skipped
  as already seen, the topic shift, the facts used and the facts new this turn.
* ``page``: the conversation's messages (``recent_messages``), the user's facts with their
  validity (``list_facts``), the earlier messages the turns recalled, the earlier conversations
  (``list_conversations``): what a reload shows.
* ``clear``: a new conversation (``start_conversation``); facts and earlier conversations stay.

Models (``choose_models``): Ollama at ``OLLAMA_HOST`` when it answers (nomic-embed-text, llama3.2
for answers and facts, llama3.2:1b for condensation and summaries); otherwise the offline lexical
embedder and a template generator, and every reply says so.

The answer cache is scoped to the user (``acl_hash``): the generator sees the user's facts and
earlier messages, so an answer may hold something personal the cache's guard cannot see.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .._extraction import FactExtractionError
from ..client import Memory
from ..lexical import LexicalEmbedder
from ..turn import (DEFAULT_CHAT_MODEL, DEFAULT_CONDENSE_MODEL, CannedCondenser, GenerationRequest, OllamaCondenser,
                    OllamaSummariser, Step, Turn, TurnResult)

OFFLINE_MODEL = "agentmem-lexical-768"   # the offline embedder's registered name (make demo's too)
DEFAULT_EMBED_MODEL = "nomic-embed-text"
HISTORY_SHOWN = 200                      # messages of the current conversation a page shows
FACTS_RECALLED = 5                       # facts given to the generator per turn
TURN_VIEWS_KEPT = 1000                   # the step logs the server keeps (not stored in the database)

FACTS_HEADER = "What you know about the user (facts from earlier messages, each with the date it became true):"


# -- models ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Models:
    """What the chat runs on, said in full on the page and in a few words under every reply."""

    host: str
    embed_model: str
    chat_model: str | None       # answers and fact extraction; None: the template generator
    small_model: str | None      # condensation and summaries; None: canned / template
    note: str                    # what each model is, in full (the page's banner)
    short: str                   # the same in a few words (under every reply)

    @property
    def offline(self) -> bool:
        """Some model is an offline stand-in: the lexical embedder, or templates instead of a chat model."""
        return self.chat_model is None or self.small_model is None or self.embed_model == OFFLINE_MODEL


def _ollama_answers(host: str, probe: Callable[[Any], Any]) -> str | None:
    """None when the probe succeeds against host, else why not (one line)."""
    try:
        from ..embed import import_ollama
        ollama = import_ollama()
        probe(ollama.Client(host=host, timeout=30))
    except Exception as exc:  # noqa: BLE001 - any failure means: not usable here
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


def _chat_probe(client: Any, model: str) -> None:
    """Raise unless the chat model is there: listed by the server (no model loaded), else one token of chat."""
    try:
        listed = {m.model for m in client.list().models}
    except Exception:  # noqa: BLE001 - a server without the listing: ask the model itself
        listed = set()
    if model not in listed and f"{model}:latest" not in listed:
        client.chat(model=model, messages=[{"role": "user", "content": "ping"}], options={"num_predict": 1})


def choose_models(host: str | None = None, *, embed_model: str = DEFAULT_EMBED_MODEL,
                  chat_model: str = DEFAULT_CHAT_MODEL, small_model: str = DEFAULT_CONDENSE_MODEL,
                  embedder: str = "auto") -> tuple[Models, Any]:
    """(Models, embedder): Ollama's models where they answer at host (default OLLAMA_HOST), else offline.

    embedder: auto (probe), ollama (Ollama's embedding model even when the probe fails) or lexical
    (offline, no probe of the embedding model). A chat model is there when the server lists it (GET
    /api/tags, nothing loaded), else when a one-token chat answers."""
    host = host or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
    embed_failed = None
    if embedder == "lexical":
        embed_failed = "offline embedder chosen"
    elif embedder == "auto":
        embed_failed = _ollama_answers(host, lambda c: c.embed(model=embed_model, input="ping"))
    chat_failed = _ollama_answers(host, lambda c: _chat_probe(c, chat_model))
    small_failed = chat_failed if small_model == chat_model else _ollama_answers(
        host, lambda c: _chat_probe(c, small_model))
    if embed_failed is None:
        from ..embed import OllamaEmbedder
        emb: Any = OllamaEmbedder(model=embed_model, host=host)
        embedding = f"embeddings: {embed_model} at {host}"
    else:
        emb = LexicalEmbedder(model=OFFLINE_MODEL, dim=768)
        embedding = f"embeddings: the offline lexical embedder {OFFLINE_MODEL} (shared words, not meaning)"
    if chat_failed is None:
        answers = f"answers and facts: {chat_model}"
    else:
        answers = (f"answers: a TEMPLATE generator, facts: sentence patterns (offline: no {chat_model} at "
                   f"{host})")
    small = f"condensation and summaries: {small_model}" if small_failed is None else (
        "condensation: none (offline), summaries: a template")
    parts = [("Ollama " + embed_model) if embed_failed is None else "OFFLINE lexical embedder",
             chat_model if chat_failed is None else "OFFLINE template answers",
             small_model if small_failed is None else "no condenser"]
    models = Models(host, emb.model, chat_model if chat_failed is None else None,
                    small_model if small_failed is None else None, "; ".join([embedding, answers, small]),
                    ", ".join(parts))
    return models, emb


# -- the sample documents --------------------------------------------------------------------

# The chat's retriever: a keyword search over a few help pages of a billing service, so that a turn
# shows documents used and skipped as already seen (an application brings its own retriever).
SAMPLE_DOCS = {
    "docs/refunds.md": ("Refunds are possible within 14 days from the invoice date.", ("refund",)),
    "docs/annual-plans.md": ("Annual plans are billed once a year, in advance; the refund window is the same.",
                             ("annual", "yearly")),
    "docs/api-keys.md": ("Rotate an API key under Settings > API keys, then revoke the old key.",
                         ("api key", "api-key", "rotate")),
    "docs/jobs.md": ("Running jobs keep the key they started with until their next call.", ("job",)),
    "docs/invoices.md": ("Invoices are under Billing > Invoices, as PDF files.", ("invoice", "billing")),
}


def sample_retriever(question: str) -> list[tuple[str, str]]:
    """The sample help pages whose keywords the question holds: (doc_id, text) pairs."""
    q = question.lower()
    return [(doc_id, text) for doc_id, (text, words) in SAMPLE_DOCS.items() if any(w in q for w in words)]


# -- generators ----------------------------------------------------------------------------------

def facts_lines(facts: Sequence[Any]) -> str:
    return "\n".join(f"- [{f.subject}] {f.fact} (since {f.valid_from:%Y-%m-%d})" for f in facts)


class OllamaFactsGenerator:
    """Turn's Ollama generator with the user's recalled facts in its system prompt."""

    def __init__(self, model: str, host: str, facts: Sequence[Any], *, timeout: float = 120.0):
        self.model, self.host, self.facts, self.timeout = model, host, list(facts), timeout

    def messages(self, request: GenerationRequest) -> list[dict]:
        messages = request.messages()
        if self.facts:
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + FACTS_HEADER + "\n"
                           + facts_lines(self.facts)}
        return messages

    def __call__(self, request: GenerationRequest) -> str:
        from ..embed import import_ollama
        ollama = import_ollama()
        response = ollama.Client(host=self.host, timeout=self.timeout).chat(
            model=self.model, messages=self.messages(request), options={"temperature": 0})
        message = response["message"] if not hasattr(response, "message") else response.message
        return (message["content"] if isinstance(message, dict) else message.content) or ""


_WORDS = re.compile(r"[a-z0-9]+")
_STOP = set("a an and are as at be by can do does for from had has have how i in is it its me my of on or "
            "our so that the their them they this to was we were what when where which who why will with you "
            "your about tell know".split())


def content_words(text: str) -> set[str]:
    """The words of a text that are not stop words, cut to 4 letters (lives, live and living agree)."""
    return {w[:4] for w in _WORDS.findall(text.lower()) if w not in _STOP and len(w) > 1}


class TemplateGenerator:
    """The offline generator: an answer put together from the facts, documents and earlier messages."""

    model = "template"

    def __init__(self, facts: Sequence[Any]):
        self.facts = list(facts)

    def __call__(self, request: GenerationRequest) -> str:
        asked = content_words(request.standalone)
        facts = [f for f in self.facts if asked & content_words(f.subject.replace("_", " ") + " " + f.fact)]
        parts = []
        if facts:
            parts.append("From what I remember about you: " + " ".join(f.fact for f in facts))
        if request.docs:
            parts.append(" ".join(f"From {d.doc_id}: {d.text}" for d in request.docs))
        if not parts and "?" not in request.question:
            parts.append("Noted.")
        if not parts and request.memories:
            said = next((m for m in request.memories if m["role"] == "user"), request.memories[0])
            parts.append(f"Earlier you said: \u201c{said['content'][:300]}\u201d")
        if not parts:
            parts.append("I do not know that yet.")
        return " ".join(parts)


def template_summary(previous: str | None, messages: Sequence[dict]) -> str:
    asked = [m["content"][:80] for m in messages if m["role"] == "user"]
    return ((previous + " ") if previous else "") + "The user said: " + "; ".join(asked) + "."


# -- offline fact extraction -------------------------------------------------------------------

_PATTERNS = [
    (re.compile(r"\b(?i:my name is) ([A-Z][\w-]+(?: [A-Z][\w-]+)?)"), "name", "The user's name is {}."),
    (re.compile(r"\bI live in ([A-Z][\w-]+(?: [A-Z][\w-]+)?)"), "home_city", "The user lives in {}."),
    (re.compile(r"\bI (?:work at|work for) ([A-Z][\w&-]+(?: [A-Z][\w&-]+)?)"), "employer", "The user works at {}."),
    (re.compile(r"\bI (?:like|love|prefer) ([\w -]{2,40}?)(?=[.,;!?]|$)", re.I), "preference", "The user likes {}."),
    (re.compile(r"\bI(?:'m| am) allergic to ([\w -]{2,40}?)(?=[.,;!?]|$)", re.I), "allergy",
     "The user is allergic to {}."),
    (re.compile(r"\bmy favou?rite ([a-z]+) is ([\w -]{1,40}?)(?=[.,;!?]|$)", re.I), None,
     "The user's favourite {} is {}."),
]


def pattern_facts(text: str) -> list[dict[str, str]]:
    """Facts a user states about themselves in a few fixed sentence forms (offline; no model)."""
    out = []
    for pattern, subject, template in _PATTERNS:
        for m in pattern.finditer(text):
            groups = [g.strip() for g in m.groups()]
            out.append({"subject": subject or f"favourite_{groups[0].lower()}", "fact": template.format(*groups)})
    return out


# -- view models ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepView:
    name: str
    ms: float
    note: str


@dataclass
class TurnView:
    """What one turn did and cost, for the reply it produced."""

    question: str
    answer: str
    models_note: str
    cache_hit: bool
    cache_kind: str | None
    cache_similarity: float | None
    matched_question: str | None
    cache_note: str                      # the lookup's miss reason, or the store's outcome
    standalone: str | None
    topic_shifted: bool | None           # None on a cache hit (no window read)
    topic_note: str
    docs_used: list[str]
    docs_skipped: list[str]
    facts_used: list[Any]                # Fact rows given to the generator
    facts_extracted: list[Any]           # ExtractedFact rows (action inserted / merged / replaced)
    facts_note: str
    recalled: list[Any]                  # earlier messages search_with_context found
    steps: list[StepView]
    total_ms: float
    user_message_id: uuid.UUID | None = None
    assistant_message_id: uuid.UUID | None = None

    @property
    def new_fact_ids(self) -> set[uuid.UUID]:
        return {f.fact_id for f in self.facts_extracted if f.action in ("inserted", "replaced")}


@dataclass
class ChatMessage:
    role: str
    content: str
    message_index: int
    occurred_at: dt.datetime
    metadata: dict
    turn: TurnView | None = None         # assistant messages this server produced


@dataclass
class FactRow:
    fact_id: uuid.UUID
    subject: str
    fact: str
    status: str                          # current | superseded
    valid_from: dt.datetime
    valid_to: dt.datetime | None
    new: bool


@dataclass
class RecalledRow:
    message_id: uuid.UUID
    role: str
    content: str
    occurred_at: dt.datetime
    new: bool


@dataclass
class ChatPage:
    """What a (re)load of the chat page shows for one user."""

    user_id: str
    conversation_id: uuid.UUID | None
    messages: list[ChatMessage]
    facts: list[FactRow]
    recalled: list[RecalledRow]
    earlier: list[Any]                   # ConversationSummary rows of the user's other conversations
    models_note: str
    offline: bool
    last_turn: TurnView | None = None


def user_scope(user_id: str) -> str:
    """The answer cache's acl_hash for a user's chat: answers are shared by no one else."""
    return "chat-user:" + hashlib.sha256(user_id.encode()).hexdigest()[:32]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


# -- the room ------------------------------------------------------------------------------------

class ChatRoom:
    """The chat's state between requests: the models, and the step logs of the turns it ran."""

    def __init__(self, models: Models, embedder: Any, *,
                 retriever: Callable[[str], Any] = sample_retriever):
        self.models, self.embedder, self.retriever = models, embedder, retriever
        self._views: OrderedDict[tuple[str, uuid.UUID], TurnView] = OrderedDict()
        self._lock = threading.Lock()

    def memory(self, pool: Any, tenant: str) -> Memory:
        """A client of the tenant on a pool of the page's login, with the chat's embedder."""
        return Memory(pool, tenant=tenant, embedder=self.embedder)

    # -- conversations

    @staticmethod
    def current(mem: Memory, user_id: str) -> Any:
        """The user's current conversation (their newest), or None."""
        rows = mem.list_conversations(user_id, page_size=1)
        return rows[0] if rows else None

    def clear(self, mem: Memory, user_id: str) -> uuid.UUID:
        """End the current conversation: a new one starts (unless the current one is still empty)."""
        current = self.current(mem, user_id)
        if current is not None and current.message_count == 0:
            return current.conversation_id
        return mem.start_conversation(user_id, title="chat")

    # -- a turn

    def send(self, mem: Memory, user_id: str, text: str) -> TurnView:
        """Run one turn for the user's message in their current conversation."""
        start = time.perf_counter()
        current = self.current(mem, user_id)
        conversation_id = current.conversation_id if current else mem.start_conversation(user_id, title="chat")
        before = [Step("current conversation", time.perf_counter() - start,
                       "started" if current is None else f"{current.message_count} messages so far")]
        t = time.perf_counter()
        facts = mem.recall_facts_about(user_id, text, k=FACTS_RECALLED)
        before.append(Step("recall_facts", time.perf_counter() - t, f"{len(facts)} facts of the user"))
        m = self.models
        generator: Any = (OllamaFactsGenerator(m.chat_model, m.host, facts) if m.chat_model
                          else TemplateGenerator(facts))
        turn = Turn(mem, retriever=self.retriever, generator=generator,
                    condenser=OllamaCondenser(m.small_model, m.host) if m.small_model else CannedCondenser({}),
                    summariser=OllamaSummariser(m.small_model, m.host) if m.small_model else template_summary,
                    acl_hash=user_scope(user_id), llm_model=m.chat_model or "template")
        r = turn(conversation_id, user_id, text)
        extracted: list[Any] = []
        facts_note, t = "", time.perf_counter()
        if r.cache_hit:
            facts_note = "none extracted: the cache answered"
        else:
            extracted, facts_note = self._extract(mem, user_id, r)
        after = [Step("extract_facts", time.perf_counter() - t, facts_note)] if not r.cache_hit else []
        steps = before + r.steps + after
        view = self._view(r, facts if not r.cache_hit else [], extracted, facts_note, steps,
                          time.perf_counter() - start)
        with self._lock:
            self._views[(mem.tenant, r.assistant_message.message_id)] = view
            while len(self._views) > TURN_VIEWS_KEPT:
                self._views.popitem(last=False)
        return view

    def _extract(self, mem: Memory, user_id: str, r: TurnResult) -> tuple[list[Any], str]:
        source = [r.user_message.message_id]
        try:
            if self.models.chat_model:
                found = mem.extract_facts([{"role": "user", "content": r.question},
                                           {"role": "assistant", "content": r.answer or ""}], user_id,
                                          source_message_ids=source, chat_model=self.models.chat_model,
                                          ollama_host=self.models.host)
                how = self.models.chat_model
            else:
                found = self._pattern_extract(mem, user_id, r.question, source)
                how = "sentence patterns (offline)"
        except FactExtractionError as exc:
            return [], f"failed, nothing stored: {exc}"
        counts = ", ".join(f"{sum(f.action == a for f in found)} {a}" for a in ("inserted", "merged", "replaced")
                           if any(f.action == a for f in found))
        return found, f"{len(found)} facts by {how}" + (f" ({counts})" if counts else "")

    @staticmethod
    def _pattern_extract(mem: Memory, user_id: str, text: str, source: list[uuid.UUID]) -> list[Any]:
        from ..rows import ExtractedFact
        facts = pattern_facts(text)
        if not facts:
            return []
        vectors = mem.embed_documents([f["fact"] for f in facts])
        out = []
        for f, vec in zip(facts, vectors):
            res = mem.upsert_fact(user_id, f["subject"], f["fact"], vec, source, mem.embedder.model)
            out.append(ExtractedFact(f["subject"], f["fact"], res.fact_id, res.action, res.similarity))
        return out

    def _view(self, r: TurnResult, facts: list[Any], extracted: list[Any], facts_note: str,
              steps: list[Step], total: float) -> TurnView:
        if r.cache_hit:
            cache_note = f"answered from the cache ({r.cache_kind}, similarity {r.cache_similarity:.2f})"
            topic_shifted, topic_note = None, "not read: the cache answered"
        else:
            cache_note = (f"miss ({r.cache_reason}); " + ("answer cached" if r.cache_stored
                                                           else f"answer not cached: {r.cache_store_reason}"))
            topic = r.topic
            topic_shifted = bool(topic.shifted)
            if topic.shifted:
                topic_note = (f"shifted (document overlap {topic.overlap:.2f}): the window before message "
                              f"{topic.since_message_index} was dropped")
            elif topic.overlap is None:
                topic_note = f"no shift ({topic.turns_compared} turns with documents to compare)"
            else:
                topic_note = f"no shift (document overlap {topic.overlap:.2f})"
        return TurnView(
            question=r.question, answer=r.answer or "", models_note=self.models.short, cache_hit=r.cache_hit,
            cache_kind=r.cache_kind, cache_similarity=r.cache_similarity, matched_question=r.cache_matched_question,
            cache_note=cache_note, standalone=r.standalone, topic_shifted=topic_shifted, topic_note=topic_note,
            docs_used=list(r.docs_used), docs_skipped=list(r.docs_skipped), facts_used=facts,
            facts_extracted=extracted, facts_note=facts_note, recalled=list(r.memories),
            steps=[StepView(s.name, _ms(s.seconds), s.note) for s in steps], total_ms=_ms(total),
            user_message_id=r.user_message.message_id if r.user_message else None,
            assistant_message_id=r.assistant_message.message_id if r.assistant_message else None)

    # -- a page

    def page(self, mem: Memory, user_id: str) -> ChatPage:
        """The user's current conversation, facts, recalled messages and earlier conversations."""
        convs = mem.list_conversations(user_id, page_size=20)
        current = convs[0] if convs else None
        messages: list[ChatMessage] = []
        if current is not None and current.message_count:
            with self._lock:
                views = dict(self._views)
            for msg in mem.recent_messages(current.conversation_id, HISTORY_SHOWN):
                messages.append(ChatMessage(msg.role, msg.content, msg.message_index, msg.occurred_at,
                                            msg.metadata or {}, views.get((mem.tenant, msg.message_id))))
        turns = [m.turn for m in messages if m.turn is not None]
        last = turns[-1] if turns else None
        new_facts = last.new_fact_ids if last else set()
        facts = [FactRow(f.fact_id, f.subject, f.fact, f.status, f.valid_from, f.valid_to,
                         f.status == "current" and f.fact_id in new_facts)
                 for f in mem.list_facts(user_id, include_superseded=True, page_size=100)]
        recalled: dict[uuid.UUID, RecalledRow] = {}
        for i, tv in enumerate(turns):
            for hit in tv.recalled:
                if getattr(hit, "is_hit", True) is False:
                    continue  # a neighbour of a hit in its window: the hit is listed
                recalled.pop(hit.message_id, None)  # listed once, where it was last recalled
                recalled[hit.message_id] = RecalledRow(hit.message_id, hit.role, hit.content, hit.occurred_at,
                                                       new=(i == len(turns) - 1))
        earlier_ids = {r.message_id for tv in turns[:-1] for r in tv.recalled}
        for row in recalled.values():
            row.new = row.new and row.message_id not in earlier_ids
        return ChatPage(user_id, current.conversation_id if current else None, messages, facts,
                        list(reversed(list(recalled.values()))), convs[1:], self.models.note, self.models.offline,
                        last)

