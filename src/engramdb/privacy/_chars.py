"""Pure character tests the secret detectors share: entropy, character classes, Luhn, base64 JSON."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections import Counter

__all__ = ["b64json", "char_classes", "entropy", "luhn", "random_enough"]


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    if not text:
        return 0.0
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def char_classes(text: str) -> int:
    """How many of lower case, upper case, digits and other characters ``text`` mixes."""
    return (
        any(c.islower() for c in text)
        + any(c.isupper() for c in text)
        + any(c.isdigit() for c in text)
        + any(not c.isalnum() for c in text)
    )


def random_enough(body: str) -> bool:
    """Rejects placeholders shaped like a token (``ghp_xxxx...``, ``AKIA0000...``)."""
    return len(set(body)) >= 6


def luhn(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum (card numbers do)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def b64json(part: str) -> bool:
    """Whether ``part`` is unpadded URL-safe base64 of a JSON object (a JWT header or payload)."""
    padded = part + "=" * (-len(part) % 4)
    try:
        decoded = base64.urlsafe_b64decode(padded)
        return isinstance(json.loads(decoded), dict)
    except (binascii.Error, ValueError):
        return False
