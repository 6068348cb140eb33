"""Subscribed topic regular expressions (KIP-848's SubscribedTopicRegex), RE2/J as Kafka.

Kafka compiles them with Google's RE2/J and a topic matches when the *whole* name matches
(``Matcher.matches``); here Python's ``re`` with ``fullmatch``, made to agree with RE2/J:

* refused as RE2/J refuses them (RE2 has linear-time matching only): backreferences
  (``\\1``), lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups ``(?>`` and
  possessive quantifiers (``*+``, ``++``, ``?+``) — Python would accept them;
* translated: RE2's ``\\z`` (end of text) is Python's ``\\Z``;
* still different: RE2/J's ``\\pL`` / ``\\p{Greek}`` Unicode classes and ``\\Q...\\E``
  quoting are refused by Python's ``re`` (so refused here), and Python's ``\\d``/``\\w`` match
  Unicode digits and letters where RE2's match ASCII only (topic names are ASCII: no effect).

Internal topics (``__consumer_offsets``, ``__transaction_state``, any ``__`` name) never match,
as a consumer's default ``exclude.internal.topics`` keeps them out of pattern subscriptions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_UNSUPPORTED = re.compile(r"\\[1-9]|\(\?(?:=|!|<=|<!|>)|[*+?}]\+")


class InvalidRegexError(ValueError):
    """Not an RE2/J expression (Kafka's INVALID_REGULAR_EXPRESSION)."""


@functools.lru_cache(maxsize=256)
def compile_regex(regex: str) -> re.Pattern[str]:
    """The pattern for ``regex``; raises InvalidRegexError when RE2/J would refuse it."""
    if _UNSUPPORTED.search(regex.replace("\\\\", "")):
        raise InvalidRegexError(f"Invalid regular expression {regex}: unsupported by RE2/J.")
    try:
        return re.compile(regex.replace("\\z", "\\Z"))
    except re.error as exc:
        raise InvalidRegexError(f"Invalid regular expression {regex}: {exc}.") from None


def matching_topics(regex: str, topics: Iterable[str]) -> set[str]:
    """The topics whose whole name matches ``regex`` (none when it is invalid)."""
    try:
        pattern = compile_regex(regex)
    except InvalidRegexError:
        return set()
    return {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
