"""One conversational-RAG turn: query condensation, the turn's values and model callables.

``condense(history, question)`` rewrites a follow-up ("Does that apply to annual
plans?") as a standalone question ("Does the 14-day refund window apply to annual
plans?") with one chat call to a small Ollama model, over the last three turns.

``Turn`` (sync, over ``Memory``; ``turn_sync.py``) and ``AsyncTurn`` (asyncio, over
``AsyncMemory``; ``turn_async.py``) run a whole turn for one user message::

    embed the question -> cache_lookup -> hit: store the exchange, return the cached answer
                                       -> miss: short_term_context -> topic_shift -> condense
                                          -> search_with_context -> retriever -> unseen_docs
                                          -> generator -> store_messages + record_retrieval
                                          -> cache_store -> summariser + set_summary

Every database step is one call of a driver method, i.e. one SQL function: no module of the
turn holds SQL. Every model step is a parameter (a callable) with an Ollama default, so a
turn runs offline with stand-ins. The turn is written once, as straight-line code in
``turn_async.py``; ``turn_sync.py`` is generated from it.
"""

from .turn_async import AsyncTurn
from .turn_parts import (CONDENSE_TURNS, DEFAULT_CHAT_MODEL, DEFAULT_CONDENSE_MODEL, DEFAULT_SUMMARY_MODEL,
                         MAX_PROMPT_MESSAGE_CHARS, CannedCondenser, Condensed, Doc, GenerationRequest,
                         OllamaCondenser, OllamaGenerator, OllamaSummariser, Step, TurnResult, _as_message, acondense,
                         condense, condense_messages, last_turns, max_condensed_chars, read_condensed, spans_days,
                         summary_messages)
from .turn_sync import Turn

__all__ = ["CONDENSE_TURNS", "DEFAULT_CHAT_MODEL", "DEFAULT_CONDENSE_MODEL", "DEFAULT_SUMMARY_MODEL",
           "MAX_PROMPT_MESSAGE_CHARS", "AsyncTurn", "CannedCondenser", "Condensed", "Doc", "GenerationRequest",
           "OllamaCondenser", "OllamaGenerator", "OllamaSummariser", "Step", "Turn", "TurnResult", "_as_message",
           "acondense", "condense", "condense_messages", "last_turns", "max_condensed_chars", "read_condensed",
           "spans_days", "summary_messages"]
