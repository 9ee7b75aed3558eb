"""Conversation memory (issue 3): driver methods, one literal call per SQL function.

Each method returns ``self._call(...)``, which the sync client runs at once and the
async client returns as a coroutine; see client.py.
"""

from __future__ import annotations


class ConversationAPI:
    pass
