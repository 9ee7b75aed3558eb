"""Fact extraction's Python side: the prompt, and the validation of the chat model's reply.

One Ollama chat call turns a conversation turn into standalone facts (JSON,
validated by ``parse_facts``); ``conveniences.extract_facts`` embeds and upserts
them. A malformed reply raises FactExtractionError and stores nothing.
"""

from __future__ import annotations

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
- No facts: {"facts": []}."""


class FactExtractionError(AgentmemError):
    """The chat model's reply was not a valid list of facts (nothing was stored)."""


def parse_facts(reply: str) -> list[dict[str, str]]:
    """Validate the chat model's reply: ``{"facts": [{"subject", "fact"}, ...]}`` or a bare list."""
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
        if not isinstance(item, dict) or set(item) != {"subject", "fact"}:
            raise FactExtractionError(f"fact #{i + 1} is not an object with exactly 'subject' and 'fact'",
                                      detail=f"got: {json.dumps(item)[:200]}")
        subject, fact = item["subject"], item["fact"]
        if not isinstance(subject, str) or not isinstance(fact, str) or not subject.strip() or not fact.strip():
            raise FactExtractionError(f"fact #{i + 1} has an empty or non-text subject or fact",
                                      detail=f"got: {json.dumps(item)[:200]}")
        facts.append({"subject": subject.strip(), "fact": fact.strip()})
    return facts


def _turn_text(turn: Any) -> str:
    if isinstance(turn, str):
        text = turn
    elif isinstance(turn, dict) and "content" in turn:
        text = f"{turn.get('role', 'user')}: {turn['content']}"
    elif isinstance(turn, Sequence):
        text = "\n".join(f"{m['role']}: {m['content']}" for m in turn)
    else:
        raise TypeError("turn must be a text or a list of {'role', 'content'} messages")
    if not text.strip():
        raise FactExtractionError("the turn is empty: there is nothing to extract facts from")
    return text


def chat_messages(turn: Any) -> list[dict[str, str]]:
    return [{"role": "system", "content": EXTRACTION_PROMPT},
            {"role": "user", "content": "Conversation turn:\n" + _turn_text(turn)}]


def reply_content(response: Any) -> str:
    message = response["message"] if not hasattr(response, "message") else response.message
    return message["content"] if isinstance(message, dict) else message.content
