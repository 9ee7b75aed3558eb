"""AsyncTurn: one conversational-RAG turn over an AsyncMemory, as straight-line code.

``turn_sync.py`` (Turn, over Memory) is generated from this file by ``scripts/async_to_sync.py``.
The turn's values, prompts and model callables are in ``turn.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from .errors import Conflict
from .turn_parts import (Condensed, GenerationRequest, StepClock, TurnBase, TurnResult, Window, _as_docs, _as_message,
                         acall_model, log, read_condensed, spans_days)

if TYPE_CHECKING:
    from .client_async import AsyncMemory


class AsyncTurn(TurnBase["AsyncMemory"]):
    """Run one conversational-RAG turn: ``await turn(conversation_id, user_id, question)``."""

    async def __call__(self, conversation_id: UUID, user_id: str, question: str) -> TurnResult:
        r = TurnResult(question=question)
        clock = StepClock(r)
        q_vec = (await self.memory.embed_queries([question]))[0]
        clock.step("embed question")
        lookup = await self.memory.cache_lookup(question, q_vec, **self.scope, model=self.model, user_id=user_id)
        if lookup.hit:
            r.cache_hit, r.cache_kind, r.cache_similarity = True, lookup.kind, lookup.similarity
            r.cache_matched_question = lookup.matched_question
            r.answer, r.standalone = lookup.answer, question
            r.docs_used = list(lookup.source_ids or [])
            clock.step("cache_lookup", f"HIT ({lookup.kind}, similarity {lookup.similarity:.2f}): "
                                       f"{lookup.matched_question!r}; retrieval and generation skipped")
            log.info("turn %s: cache hit (%s, %.3f) for %r", conversation_id, lookup.kind, lookup.similarity,
                     question)
            await self._store_exchange(r, conversation_id, clock)
            return r
        r.cache_reason = lookup.reason
        clock.step("cache_lookup", f"miss ({lookup.reason})")

        window = await self._window(r, conversation_id, clock)
        condensed = await self._condense(r, window, question, clock)
        s_vec = q_vec
        if condensed.standalone != question:
            s_vec = (await self.memory.embed_queries([condensed.standalone]))[0]
            clock.step("embed standalone")
        found = await self.memory.search_with_context(user_id, s_vec, model=self.model, k=self.memories_k,
                                                      radius=self.memories_radius, query_text=condensed.standalone)
        in_window = {m.message_id for m in window.messages}
        r.memories = [m for m in found if m.message_id not in in_window]
        clock.step("search_with_context", f"{len(r.memories)} earlier messages of the user")

        docs = _as_docs(await acall_model(self.retriever, condensed.standalone))
        r.docs_retrieved = [d.doc_id for d in docs]
        clock.step("retrieve", f"{len(docs)} documents: {', '.join(r.docs_retrieved)}")
        unseen = set(await self.memory.unseen_docs(conversation_id, r.docs_retrieved, self.lookback))
        used = [d for d in docs if d.doc_id in unseen]
        r.docs_used = [d.doc_id for d in used]
        r.docs_skipped = [d for d in r.docs_retrieved if d not in unseen]
        clock.step("unseen_docs", f"used {r.docs_used or 'none'}; skipped as already seen {r.docs_skipped or 'none'}")

        request = GenerationRequest(
            question=question, standalone=condensed.standalone, summary=window.summary,
            history=[_as_message(m, spans_days(window.history)) for m in window.history],
            memories=[_as_message(m, spans_days(r.memories)) for m in r.memories], docs=used)
        r.answer = await acall_model(self.generator, request)
        if not isinstance(r.answer, str) or not r.answer.strip():
            raise ValueError("the generator returned no answer: nothing was stored")
        clock.step("generate", f"{len(r.answer)} characters")

        stored = await self._store_exchange(r, conversation_id, clock)
        if condensed.fell_back and window.history:
            r.cache_store_reason = ("not cached: the question could not be made standalone, so its answer "
                                    "may depend on this conversation")
            clock.step("cache_store", r.cache_store_reason)
        else:
            res = await self.memory.cache_store(condensed.standalone, s_vec, r.answer, **self.scope,
                                                source_ids=r.docs_retrieved, model=self.model, user_id=user_id,
                                                conversation_id=conversation_id)
            r.cache_stored, r.cache_store_reason = res.stored, res.reason
            clock.step("cache_store", "stored under the standalone question" if res.stored else f"refused: {res.reason}")
        await self._summarise(r, conversation_id, window, stored, clock)
        return r

    async def _window(self, r: TurnResult, conversation_id: UUID, clock: StepClock) -> Window:
        """The short-term window and running summary, less what came before a topic shift."""
        context = await self.memory.short_term_context(conversation_id, self.keep_last)
        summary_row = next((c for c in context if c.kind == "summary"), None)
        messages = [c for c in context if c.kind == "message"]
        clock.step("short_term_context", f"{len(messages)} messages" + (", a summary" if summary_row else ""))
        topic = await self.memory.topic_shift(conversation_id, self.shift_threshold)
        r.topic = topic
        window = Window(summary_row, messages, messages, summary_row.content if summary_row else None)
        if topic.shifted:
            # The last recorded turn started a new subject: what came before it is dropped.
            since = topic.since_message_index if topic.since_message_index is not None else 0
            window.history = [m for m in messages if m.message_index >= since]
            window.summary = None
            clock.step("topic_shift", f"SHIFT (overlap {topic.overlap:.2f} < {self.shift_threshold}): window "
                                      f"dropped, {len(window.history)} messages of the new subject kept")
        else:
            overlap = "n/a" if topic.overlap is None else f"{topic.overlap:.2f}"
            clock.step("topic_shift", f"no shift (overlap {overlap}, {topic.turns_compared} recorded turns)")
        r.history_used, r.summary_used = len(window.history), window.summary is not None
        return window

    async def _condense(self, r: TurnResult, window: Window, question: str, clock: StepClock) -> Condensed:
        try:
            condensed = await acall_model(self.condenser, window.history, question)
            if isinstance(condensed, str):
                condensed = read_condensed(question, condensed, called=True)
        except Exception as exc:  # noqa: BLE001 - a failing condenser falls back to the question
            condensed = Condensed(question, question, True, True,
                                  f"the condenser failed ({type(exc).__name__}: {exc}): the question is used as asked")
        r.condensed, r.standalone = condensed, condensed.standalone
        clock.step("condense", f"{condensed.standalone!r}"
                               + (f" ({condensed.reason})" if condensed.reason else "")
                               + (" [FELL BACK]" if condensed.fell_back else ""))
        return condensed

    async def _store_exchange(self, r: TurnResult, conversation_id: UUID, clock: StepClock) -> list[Any]:
        """Embed and store the question and the answer, and the documents retrieved, in one transaction."""
        answer = r.answer or ""   # set by the cache or the generator before the exchange is stored
        d_vecs = await self.memory.embed_documents([r.question, answer])
        clock.step("embed messages")
        user_meta = {"standalone": r.standalone} if r.standalone != r.question else {}
        bot_meta = ({"cache": r.cache_kind} if r.cache_hit else {}) | ({"doc_ids": r.docs_used} if r.docs_used else {})
        recorded = None
        async with self.memory.pool.connection() as conn, conn.transaction():
            stored = await self.memory.store_messages(conversation_id, ["user", "assistant"], [r.question, answer],
                                                      d_vecs, model=self.model, metadata=[user_meta, bot_meta],
                                                      conn=conn)
            if not r.cache_hit:
                recorded = await self.memory.record_retrieval(stored[0].message_id, r.docs_retrieved, conn=conn)
        r.user_message, r.assistant_message = stored[0], stored[1]
        r.retrieval_recorded = recorded
        clock.step("store_messages", f"user [{stored[0].message_index}] and assistant [{stored[1].message_index}]"
                                     + ("" if recorded is None else f"; record_retrieval: {recorded} documents"))
        return stored

    async def _summarise(self, r: TurnResult, conversation_id: UUID, window: Window, stored: list[Any],
                         clock: StepClock) -> None:
        """Extend the running summary with the messages that fell out of the window."""
        run = self.summary_run(window, stored, r)
        if run is None:
            more = await self.memory.recent_messages(conversation_id, self.recent_needed(window, stored))
            run = self.summary_run(window, stored, r, more)
        if not run:
            return
        try:
            text = await acall_model(self.summariser, window.summary_row.content if window.summary_row else None,
                                     [_as_message(m) for m in run])
            if not isinstance(text, str) or not text.strip():
                raise ValueError("empty summary")
            await self.memory.set_summary(conversation_id, text.strip(), run[-1].message_index)
            r.summarised_through = run[-1].message_index
            r.summary_note = f"messages {run[0].message_index}..{run[-1].message_index} summarised"
        except Conflict:
            r.summary_note = "a concurrent turn stored a newer summary: kept it"
        except Exception as exc:  # noqa: BLE001 - a failed summary never fails the turn
            r.summary_note = f"summariser failed ({type(exc).__name__}: {exc}); will retry next turn"
        clock.step("summarise", r.summary_note)
