"""The parts of a conversational-RAG turn that Turn and AsyncTurn share: the values, the
condensation, the prompts and model callables, and the steps that need no database or model
(see ``turn.py``)."""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Protocol, Sequence, TypedDict, TypeVar
from uuid import UUID

from .embed import Embedder, import_ollama
from .rows import StoredMessage, TopicShift

log = logging.getLogger("agentmem.turn")

# The condenser: a small chat model is enough to resolve references, and it runs
# on a CPU in well under a second for a short prompt. llama3.2:1b (1.3 GB) rather
# than a 0.5B model: models of half a billion parameters tend to answer the
# question instead of rewriting it. Same family as extract_facts' default.
DEFAULT_CONDENSE_MODEL = "llama3.2:1b"
DEFAULT_CHAT_MODEL = "llama3.2"          # the generator's default
DEFAULT_SUMMARY_MODEL = "llama3.2:1b"
CONDENSE_TURNS = 3                       # the last three turns go into the condensation prompt
MAX_PROMPT_MESSAGE_CHARS = 2000          # each history message is cut to this in the prompt

CONDENSE_PROMPT = """You rewrite the user's latest question so that it can be understood without the conversation.
- Replace every pronoun and implicit reference (it, that, they, this one, there, the first option, the same, ...)
  with what it refers to in the conversation.
- Change nothing else: keep the user's words, language and kind of question; do not answer it and do not add
  details the user did not refer to.
- If the question already stands on its own, return it unchanged.
Reply with the rewritten question only, on one line."""

SUMMARY_PROMPT = """You keep the running summary of a conversation between a user and an assistant.
Extend the summary with the new messages: keep facts, decisions, names, numbers and open questions; drop small
talk. At most 150 words. Reply with the summary only."""

ANSWER_PROMPT = """You are a documentation assistant. Answer the user's question from the documents and the
conversation below. If they do not contain the answer, say that you do not know. Be brief."""


# -- values ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Doc:
    """A document the application's retriever returned."""

    doc_id: str
    text: str


@dataclass(frozen=True)
class Condensed:
    """What condense did with a question."""

    question: str            # as asked
    standalone: str          # what retrieval and the cache use
    called: bool             # a chat call was made
    fell_back: bool          # the call failed or its reply was unusable: standalone == question
    reason: str | None = None  # why no call was made, or why it fell back


@dataclass(frozen=True)
class GenerationRequest:
    """Everything the generator gets for one turn."""

    question: str            # as asked
    standalone: str
    summary: str | None      # the running summary (None after a topic shift)
    history: list[dict]      # the short-term window, {'role', 'content'}, oldest first
    memories: list[dict]     # earlier messages of the user found by search_with_context
    # (history and memories: each content begins [YYYY-MM-DD], its occurred_at, where the messages
    # and today span more than one date: spans_days)
    docs: list[Doc]          # documents not sent in the last turns

    def messages(self) -> list[dict]:
        """The default chat prompt: instructions, documents, summary, memories, the window, the question."""
        parts = [ANSWER_PROMPT]
        if self.docs:
            parts.append("Documents:\n" + "\n".join(f"[{d.doc_id}] {d.text}" for d in self.docs))
        if self.summary:
            parts.append("Earlier in this conversation (summary): " + self.summary)
        if self.memories:
            parts.append("Related messages from the user's earlier conversations:\n"
                         + "\n".join(f"{m['role']}: {_cut(m['content'])}" for m in self.memories))
        return ([{"role": "system", "content": "\n\n".join(parts)}]
                + [{"role": m["role"], "content": _cut(m["content"])} for m in self.history]
                + [{"role": "user", "content": self.standalone}])


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    note: str = ""


@dataclass
class TurnResult:
    """What happened in one turn, step by step."""

    question: str
    answer: str | None = None
    cache_hit: bool = False
    cache_kind: str | None = None        # exact | semantic (hit)
    cache_similarity: float | None = None
    cache_matched_question: str | None = None  # the cached question a hit matched
    cache_reason: str | None = None      # why the lookup missed
    standalone: str | None = None
    condensed: Condensed | None = None
    topic: TopicShift | None = None      # None on a hit
    history_used: int = 0                # messages of the window sent to the model
    summary_used: bool = False
    memories: list = field(default_factory=list)
    docs_retrieved: list[str] = field(default_factory=list)
    docs_used: list[str] = field(default_factory=list)
    docs_skipped: list[str] = field(default_factory=list)  # already sent in the last turns
    user_message: StoredMessage | None = None
    assistant_message: StoredMessage | None = None
    retrieval_recorded: int | None = None
    cache_stored: bool = False
    cache_store_reason: str | None = None  # why the answer was not cached
    summarised_through: int | None = None
    summary_note: str | None = None
    steps: list[Step] = field(default_factory=list)

    @property
    def timings(self) -> dict[str, float]:
        """Seconds per step (a step that ran twice is summed)."""
        out: dict[str, float] = {}
        for s in self.steps:
            out[s.name] = out.get(s.name, 0.0) + s.seconds
        return out

    def describe(self) -> str:
        return "\n".join(f"{s.name:<20} {s.seconds * 1000:7.1f} ms  {s.note}" for s in self.steps)


# -- helpers ---------------------------------------------------------------------------------

def _cut(text: str, limit: int = MAX_PROMPT_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def _as_message(m: Any, dated: bool = False) -> dict:
    if isinstance(m, dict):
        out = {"role": m["role"], "content": m["content"]}
        at = m.get("occurred_at")
    else:
        out = {"role": m.role, "content": m.content}
        at = getattr(m, "occurred_at", None)
    if dated and at is not None:
        out["content"] = f"[{at:%Y-%m-%d}] {out['content']}"
    return out


def spans_days(messages: Sequence[Any], today: dt.date | None = None) -> bool:
    """Whether the messages (rows with occurred_at) and today fall on more than one date: then the
    prompt gives each message its date ([YYYY-MM-DD] before its text, in the session's time zone, as
    the rows come), so that "yesterday" in one of them can be placed; a same-day chat goes undated."""
    days = {today or dt.datetime.now(dt.timezone.utc).date()}
    for m in messages:
        at = m.get("occurred_at") if isinstance(m, dict) else getattr(m, "occurred_at", None)
        if at is not None:
            days.add(at.date())
    return len(days) > 1


def last_turns(history: Sequence[Any], turns: int = CONDENSE_TURNS) -> list[dict]:
    """The messages of the last `turns` turns (a turn starts at a user message), summary rows left out."""
    msgs = [_as_message(m) for m in history
            if getattr(m, "kind", None) != "summary" and not (isinstance(m, dict) and m.get("kind") == "summary")]
    starts = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    if len(starts) >= turns:
        return msgs[starts[-turns]:]
    return msgs


def _reply_text(response: Any) -> str:
    message = response["message"] if not hasattr(response, "message") else response.message
    content = message["content"] if isinstance(message, dict) else message.content
    return content or ""


def _as_docs(found: Any) -> list[Doc]:
    docs = []
    for d in found or []:
        if isinstance(d, Doc):
            docs.append(d)
        elif isinstance(d, dict):
            docs.append(Doc(str(d["doc_id"]), str(d["text"])))
        elif isinstance(d, (tuple, list)) and len(d) == 2:
            docs.append(Doc(str(d[0]), str(d[1])))
        else:
            raise TypeError("a retriever returns (doc_id, text) pairs, {'doc_id', 'text'} dicts or Doc objects")
    first: dict[str, Doc] = {}
    for d in docs:
        first.setdefault(d.doc_id, d)
    return list(first.values())


# -- condensation ----------------------------------------------------------------------------

def condense_messages(history: Sequence[Any], question: str) -> list[dict]:
    """The condensation prompt: instructions, the last three turns, the question."""
    lines = "\n".join(f"{m['role']}: {_cut(m['content'])}" for m in last_turns(history))
    return [{"role": "system", "content": CONDENSE_PROMPT},
            {"role": "user", "content": f"Conversation:\n{lines}\n\nLatest question: {question}\n\n"
                                        "Standalone question:"}]


def max_condensed_chars(question: str) -> int:
    """The longest reply accepted as a rewrite of `question`: three times its length, at least 200."""
    return max(200, 3 * len(question))


def read_condensed(question: str, reply: str | None, *, called: bool = True) -> Condensed:
    """Turn a condenser's reply into a Condensed, falling back to the question when it is unusable."""
    text = (reply or "").strip()
    for label in ("standalone question:", "rewritten question:", "question:"):
        if text.lower().startswith(label):
            text = text[len(label):].strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    if not text:
        return Condensed(question, question, called, True, "the condenser's reply was empty: the question is used as asked")
    if len(text) > max_condensed_chars(question):
        return Condensed(question, question, called, True,
                         f"the condenser's reply was {len(text)} characters, over the bound of "
                         f"{max_condensed_chars(question)}: the question is used as asked")
    return Condensed(question, text, called, False, None if text != question else "already standalone")


NO_HISTORY = "no history: nothing to resolve, no call made"


class OllamaCondenser:
    """condense() as a callable: one chat call to a small Ollama model (temperature 0)."""

    def __init__(self, model: str = DEFAULT_CONDENSE_MODEL, host: str | None = None, *, timeout: float = 30.0):
        self.model, self.host, self.timeout = model, host, timeout

    def _options(self, question: str) -> dict:
        return {"temperature": 0, "num_predict": max_condensed_chars(question) // 2}

    def _failed(self, question: str, exc: Exception) -> Condensed:
        log.warning("condense: the chat call to %s failed (%s); using the question as asked", self.model, exc)
        return Condensed(question, question, True, True,
                         f"the chat call to {self.model} failed ({type(exc).__name__}: {exc}): "
                         "the question is used as asked")

    def __call__(self, history: Sequence[Any], question: str) -> Condensed:
        if not last_turns(history):
            return Condensed(question, question, False, False, NO_HISTORY)
        ollama = import_ollama()
        try:
            response = ollama.Client(host=self.host, timeout=self.timeout).chat(
                model=self.model, messages=condense_messages(history, question), options=self._options(question))
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the question
            return self._failed(question, exc)
        return read_condensed(question, _reply_text(response))

    async def acall(self, history: Sequence[Any], question: str) -> Condensed:
        if not last_turns(history):
            return Condensed(question, question, False, False, NO_HISTORY)
        ollama = import_ollama()
        try:
            response = await ollama.AsyncClient(host=self.host, timeout=self.timeout).chat(
                model=self.model, messages=condense_messages(history, question), options=self._options(question))
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the question
            return self._failed(question, exc)
        return read_condensed(question, _reply_text(response))


def condense(history: Sequence[Any], question: str, *, model: str = DEFAULT_CONDENSE_MODEL,
             host: str | None = None, timeout: float = 30.0) -> Condensed:
    """Rewrite `question` as a standalone question, resolving references to the last three turns.

    history: the conversation so far, oldest first ({'role', 'content'} dicts, or the driver's
    Message / ContextItem rows; summary rows are left out). No history: no call. A failed chat call,
    an empty reply or one longer than max_condensed_chars(question) gives the question as asked,
    with fell_back=True and the reason.
    """
    return OllamaCondenser(model, host, timeout=timeout)(history, question)


async def acondense(history: Sequence[Any], question: str, *, model: str = DEFAULT_CONDENSE_MODEL,
                    host: str | None = None, timeout: float = 30.0) -> Condensed:
    """condense() for asyncio."""
    return await OllamaCondenser(model, host, timeout=timeout).acall(history, question)


class CannedCondenser:
    """An offline stand-in: standalone questions looked up in a dict (the question itself otherwise)."""

    def __init__(self, rewrites: dict[str, str]):
        self.rewrites = dict(rewrites)

    def __call__(self, history: Sequence[Any], question: str) -> Condensed:
        if not last_turns(history):
            return Condensed(question, question, False, False, NO_HISTORY)
        if question in self.rewrites:
            return Condensed(question, self.rewrites[question], False, False, "canned rewrite (offline, no model)")
        return Condensed(question, question, False, False, "canned: no rewrite known (offline, no model)")


# -- generation and summaries ----------------------------------------------------------------

class OllamaGenerator:
    """The default generator: one chat call with GenerationRequest.messages()."""

    def __init__(self, model: str = DEFAULT_CHAT_MODEL, host: str | None = None, *, timeout: float = 120.0):
        self.model, self.host, self.timeout = model, host, timeout

    def __call__(self, request: GenerationRequest) -> str:
        ollama = import_ollama()
        return _reply_text(ollama.Client(host=self.host, timeout=self.timeout).chat(
            model=self.model, messages=request.messages(), options={"temperature": 0}))

    async def acall(self, request: GenerationRequest) -> str:
        ollama = import_ollama()
        return _reply_text(await ollama.AsyncClient(host=self.host, timeout=self.timeout).chat(
            model=self.model, messages=request.messages(), options={"temperature": 0}))


def summary_messages(previous: str | None, messages: Sequence[dict]) -> list[dict]:
    lines = "\n".join(f"{m['role']}: {_cut(m['content'])}" for m in messages)
    return [{"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": f"Summary so far: {previous or '(none)'}\n\nNew messages:\n{lines}"}]


class OllamaSummariser:
    """The default summariser: extends the running summary with one chat call."""

    def __init__(self, model: str = DEFAULT_SUMMARY_MODEL, host: str | None = None, *, timeout: float = 60.0):
        self.model, self.host, self.timeout = model, host, timeout

    def __call__(self, previous: str | None, messages: Sequence[dict]) -> str:
        ollama = import_ollama()
        return _reply_text(ollama.Client(host=self.host, timeout=self.timeout).chat(
            model=self.model, messages=summary_messages(previous, messages), options={"temperature": 0}))

    async def acall(self, previous: str | None, messages: Sequence[dict]) -> str:
        ollama = import_ollama()
        return _reply_text(await ollama.AsyncClient(host=self.host, timeout=self.timeout).chat(
            model=self.model, messages=summary_messages(previous, messages), options={"temperature": 0}))


# -- the turn's parts shared by Turn and AsyncTurn ---------------------------------------------

def call_model(fn: Callable, *args: Any) -> Any:
    """A model step of Turn: the callable's value (an async callable is refused)."""
    value = fn(*args)
    if inspect.isawaitable(value):
        raise TypeError(f"{fn!r} is async: use AsyncTurn")
    return value


async def acall_model(fn: Callable, *args: Any) -> Any:
    """A model step of AsyncTurn: the callable's acall when it has one, awaited when it is async."""
    value = fn.acall(*args) if hasattr(fn, "acall") else fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


class StepClock:
    """Records each step of a turn with the seconds since the previous one."""

    def __init__(self, result: TurnResult):
        self.result = result
        self.last = time.perf_counter()

    def step(self, name: str, note: str = "") -> None:
        now = time.perf_counter()
        self.result.steps.append(Step(name, now - self.last, note))
        self.last = now


@dataclass
class Window:
    """The conversation's short-term window: its summary row, its messages, and what of them the
    prompt gets (after a topic shift only the new subject's messages, and no summary)."""

    summary_row: Any
    messages: list
    history: list
    summary: str | None


@dataclass(frozen=True)
class _Msg:
    role: str
    content: str
    message_index: int


class CacheScope(TypedDict):
    """The answer cache's scope of a turn: passed to cache_lookup and cache_store."""

    acl_hash: str
    prompt_version: str
    llm_model: str
    intent: str


class HasEmbedder(Protocol):
    """What TurnBase needs of its client: AsyncTurn is a TurnBase[AsyncMemory], Turn a TurnBase[Memory]."""

    embedder: Embedder | None


M = TypeVar("M", bound=HasEmbedder)


class TurnBase(Generic[M]):
    """The settings of a turn, and its steps that need no database or model."""

    def __init__(self, memory: M, *, retriever: Callable, generator: Callable | None = None,
                 condenser: Callable | None = None, summariser: Callable | None = None,
                 ollama_host: str | None = None, keep_last: int = 6, shift_threshold: float = 0.15,
                 lookback: int = 6, memories_k: int = 3, memories_radius: int = 1,
                 acl_hash: str = "", prompt_version: str = "", llm_model: str | None = None,
                 intent: str = "general"):
        """memory: a Memory (Turn) or AsyncMemory (AsyncTurn) with an embedder.
        retriever(standalone_question) -> [(doc_id, text), ...] (or dicts / Doc); the application's search.
        generator(GenerationRequest) -> answer text; default: OllamaGenerator (llama3.2).
        condenser(history, question) -> Condensed or a text; default: OllamaCondenser (llama3.2:1b).
        summariser(previous_summary, messages) -> summary text; default: OllamaSummariser (llama3.2:1b).
        Callables may be async for AsyncTurn. The cache scope (acl_hash, prompt_version, llm_model,
        intent) is passed to cache_lookup and cache_store; llm_model defaults to the generator's model.
        """
        if memory.embedder is None:
            raise ValueError("a Turn needs a client with an embedder (Memory.connect(..., embedder=...))")
        self.memory: M = memory
        self.model: str = memory.embedder.model
        self.retriever = retriever
        self.generator = generator or OllamaGenerator(host=ollama_host)
        self.condenser = condenser or OllamaCondenser(host=ollama_host)
        self.summariser = summariser or OllamaSummariser(host=ollama_host)
        self.keep_last, self.shift_threshold, self.lookback = keep_last, shift_threshold, lookback
        self.memories_k, self.memories_radius = memories_k, memories_radius
        self.scope: CacheScope = {
            "acl_hash": acl_hash, "prompt_version": prompt_version,
            "llm_model": llm_model if llm_model is not None else getattr(self.generator, "model", ""),
            "intent": intent}

    @staticmethod
    def recent_needed(window: Window, stored: list[Any]) -> int:
        """How many recent messages to read when the window lacks some the summary must take in."""
        through = window.summary_row.message_index if window.summary_row else -1
        return min(1000, stored[1].message_index - through)

    def summary_run(self, window: Window, stored: list[Any], r: TurnResult,
                    recent: Sequence[Any] | None = None) -> list | None:
        """The messages that fell out of the window since the summary, as a gap-free run from it
        (empty: nothing to summarise); None when the window lacks some of them and ``recent``
        (recent_messages) is needed."""
        through = window.summary_row.message_index if window.summary_row else -1
        cutoff = stored[1].message_index + 1 - self.keep_last   # first index still in the window
        if cutoff - 1 <= through:
            return []
        known = {m.message_index: m for m in window.messages}
        known.update({stored[0].message_index: _Msg("user", r.question, stored[0].message_index),
                      stored[1].message_index: _Msg("assistant", r.answer or "", stored[1].message_index)})
        wanted = range(through + 1, cutoff)
        if not all(i in known for i in wanted):
            if recent is None:
                return None
            for m in recent:
                known.setdefault(m.message_index, m)
        out = [known[i] for i in wanted if i in known]
        # only a gap-free run from the summary on can extend it
        run = []
        for i, m in zip(wanted, out):
            if m.message_index != i:
                break
            run.append(m)
        return run
