"""Subscribed topic regular expressions (KIP-848's SubscribedTopicRegex), RE2/J as Kafka.

Kafka compiles them with Google's RE2/J (a Java port of RE2) and a topic matches when its
*whole* name matches (``Matcher.matches``). Here they are compiled by RE2 itself (the
``google-re2`` bindings) and matched with ``fullmatch``, so the syntax is RE2's and matching is
linear in the name, as Kafka's: what RE2 refuses (backreferences, lookaround, atomic groups,
possessive quantifiers) is INVALID_REGULAR_EXPRESSION, and no expression can make a broker
match for exponential time (Python's ``re`` would accept ``(a+)+b`` and backtrack).

Where RE2/J and RE2 differ, they differ here too: RE2/J works on UTF-16 code units and
lacks a few RE2 flags; for topic names (ASCII letters, digits, ``.``, ``_``, ``-``) they
agree. Python's ``re`` is not used: beside backtracking it refuses ``\\p{L}``, ``\\Q...\\E``
and ``\\z``, which RE2/J accepts.

Internal topics (``__consumer_offsets``, ``__transaction_state``, any ``__`` name) never match,
as a consumer's default ``exclude.internal.topics`` keeps them out of pattern subscriptions.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # (a refused expression is the client's error, answered as such)


class InvalidRegexError(ValueError):
    """Not an RE2 expression (Kafka's INVALID_REGULAR_EXPRESSION)."""


@functools.lru_cache(maxsize=256)
def compile_regex(regex: str) -> Any:
    """The compiled expression; raises InvalidRegexError when RE2 refuses it."""
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegexError(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}.") from None


def matching_topics(regex: str, topics: Iterable[str]) -> set[str]:
    """The topics whose whole name matches ``regex`` (none when it is invalid)."""
    try:
        pattern = compile_regex(regex)
    except InvalidRegexError:
        return set()
    return {t for t in topics if not t.startswith("__") and pattern.fullmatch(t) is not None}
