"""Exponential backoff with jitter, as Kafka's ``ExponentialBackoff``.

``backoff(attempts)`` is ``initial * multiplier ** attempts`` times a random factor in
``[1 - jitter, 1 + jitter)``, capped at ``max_ms``. The exponent stops growing once the
un-jittered term reaches ``max_ms``, so jitter still spreads retries at the cap (down to
``0.8 * max_ms`` with the default 20 %).
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    __slots__ = ("_exp_max", "initial_ms", "jitter", "max_ms", "multiplier", "rng")

    def __init__(
        self,
        initial_ms: int,
        multiplier: float,
        max_ms: int,
        jitter: float,
        rng: random.Random | None = None,
    ) -> None:
        if initial_ms < 0 or max_ms < 0 or multiplier < 1 or not 0 <= jitter < 1:
            raise ValueError(
                "backoff needs initial_ms, max_ms >= 0, multiplier >= 1, 0 <= jitter < 1"
            )
        self.initial_ms = initial_ms
        self.multiplier = multiplier
        self.max_ms = max_ms
        self.jitter = jitter
        self.rng = rng or random.Random()
        if max_ms > initial_ms and multiplier > 1:
            self._exp_max = math.log(max_ms / max(initial_ms, 1)) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    def backoff(self, attempts: int) -> int:
        """Milliseconds to wait before attempt number ``attempts + 1`` (``attempts`` >= 0)."""
        if self._exp_max == 0:
            return self.initial_ms
        term = self.initial_ms * self.multiplier ** min(float(attempts), self._exp_max)
        factor = self.rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else 1.0
        return min(int(term * factor), self.max_ms)
