"""Fact extraction's Python side: the prompt, and the validation of the chat model's reply.

One Ollama chat call turns a conversation turn into standalone facts (JSON,
validated by ``parse_facts``); ``Memory.extract_facts`` (client_async.py) embeds and upserts
them. A malformed reply raises FactExtractionError and stores nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Sequence

from .errors import AgentmemError

DEFAULT_CHAT_MODEL = "llama3.2"
MAX_FACTS_PER_TURN = 20

EXTRACTION_PROMPT = """You extract durable facts about the USER from one conversation turn.
Reply with JSON only: {"facts": [{"subject": "...", "fact": "..."}]}.
- subject: a short snake_case key naming what the fact is about (home_city, diet, employer, pet_name).
  Use the same key for a fact that updates an earlier one.
- fact: one standalone sentence about the user that makes sense without the conversation.
- Only facts the user states or confirms about themselves; no opinions of the assistant, no small talk.
- valid_from (optional): when the fact became true, as an ISO date (YYYY-MM-DD), when the turn says
  ("last week", "since 2019"); work relative times out from the date the turn happened. Leave it out
  when the turn does not say.
- No facts: {"facts": []}."""


class FactExtractionError(AgentmemError):
    """The chat model's reply was not a valid list of facts (nothing was stored)."""


def _valid_from(value: Any, i: int, turn_at: dt.datetime | None) -> dt.datetime:
    """A fact's valid_from from the reply: an ISO date or time (no zone: UTC), not after the turn."""
    try:
        at = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        at = None
    if at is None:
        raise FactExtractionError(f"fact #{i + 1} has a valid_from that is not an ISO date",
                                  detail=f"got: {json.dumps(value)[:200]}")
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    latest = (turn_at or dt.datetime.now(dt.timezone.utc)) + dt.timedelta(days=1)
    if at > latest:
        raise FactExtractionError(f"fact #{i + 1} has a valid_from ({at.date()}) after the turn it came from",
                                  detail=f"the turn happened at {latest - dt.timedelta(days=1)}")
    return at


def parse_facts(reply: str, turn_at: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Validate the chat model's reply: ``{"facts": [{"subject", "fact"[, "valid_from"]}, ...]}`` or a bare
    list. valid_from, when there, must be an ISO date or time no later than a day after the turn
    (turn_at, else now); without a zone it is UTC."""
    try:
        data = json.loads(reply)
    except (TypeError, ValueError) as exc:
        raise FactExtractionError(f"the chat model's reply is not JSON: {exc}",
                                  detail=f"reply: {str(reply)[:200]!r}") from None
    if isinstance(data, dict) and set(data) == {"facts"}:
        data = data["facts"]
    if not isinstance(data, list):
        raise FactExtractionError("the chat model's reply is not a list of facts",
                                  detail=f"expected {{\"facts\": [...]}} or [...], got: {str(reply)[:200]!r}")
    if len(data) > MAX_FACTS_PER_TURN:
        raise FactExtractionError(f"the chat model returned {len(data)} facts; at most "
                                  f"{MAX_FACTS_PER_TURN} are accepted from one turn")
    facts = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not {"subject", "fact"} <= set(item) <= {"subject", "fact", "valid_from"}:
            raise FactExtractionError(f"fact #{i + 1} is not an object with exactly 'subject' and 'fact'",
                                      detail=f"got: {json.dumps(item)[:200]}")
        subject, fact = item["subject"], item["fact"]
        if not isinstance(subject, str) or not isinstance(fact, str) or not subject.strip() or not fact.strip():
            raise FactExtractionError(f"fact #{i + 1} has an empty or non-text subject or fact",
                                      detail=f"got: {json.dumps(item)[:200]}")
        out: dict[str, Any] = {"subject": subject.strip(), "fact": fact.strip()}
        if item.get("valid_from") is not None:
            out["valid_from"] = _valid_from(item["valid_from"], i, turn_at)
        facts.append(out)
    return facts


def _turn_text(turn: Any) -> str:
    if isinstance(turn, str):
        text = turn
    elif isinstance(turn, dict) and "content" in turn:
        text = f"{turn.get('role', 'user')}: {turn['content']}"
    elif isinstance(turn, Sequence):
        text = "\n".join(f"{m['role']}: {m['content']}" if isinstance(m, dict) else f"{m.role}: {m.content}"
                         for m in turn)
    else:
        raise TypeError("turn must be a text or a list of {'role', 'content'} messages")
    if not text.strip():
        raise FactExtractionError("the turn is empty: there is nothing to extract facts from")
    return text


def turn_time(turn: Any) -> dt.datetime | None:
    """When a turn happened: the occurred_at of its last message (rows or dicts that carry one)."""
    items = [turn] if isinstance(turn, (str, dict)) or not isinstance(turn, Sequence) else list(turn)
    for m in reversed(items):
        at = m.get("occurred_at") if isinstance(m, dict) else getattr(m, "occurred_at", None)
        if isinstance(at, dt.datetime):
            return at
    return None


def chat_messages(turn: Any, turn_at: dt.datetime | None = None) -> list[dict[str, str]]:
    when = turn_at or turn_time(turn)
    dated = f"The turn happened on {when:%A %Y-%m-%d}.\n" if when else ""
    return [{"role": "system", "content": EXTRACTION_PROMPT},
            {"role": "user", "content": dated + "Conversation turn:\n" + _turn_text(turn)}]


def reply_content(response: Any) -> str:
    message = response["message"] if not hasattr(response, "message") else response.message
    return message["content"] if isinstance(message, dict) else message.content
