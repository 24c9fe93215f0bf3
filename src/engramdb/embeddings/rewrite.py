"""A question in the form of the statement that answers it, for a second query vector. Pure, rule-based.

Memories are statements ("Vacation requests go into Personio ..."), questions are not ("how do I book time
off?"); a sentence encoder puts a question near other questions (chat turns such as "Does anyone know how to
book the company car?"). The rewrite drops the interrogative and the auxiliary that carries the question
and keeps its content in statement order; "why ..." becomes "... because". It never adds a content word.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["statement_form"]

_AUX: Final = (
    r"(?:(?:do|does|did|is|are|was|were|am|has|have|had|should|shall|can|could|must|may|might|will|would)(?:n't)?)"
)
_WHO: Final = r"(?:i|we|you|they|he|she|it|our|my)"
#: (pattern at the start of the question, replacement); the first match wins.
_RULES: Final = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (rf"^why\s+not\s+{_AUX}?\s*(.*)$", r"not \1 because"),
        (rf"^why\s+{_AUX}\s+(.*)$", r"\1 because"),
        (r"^why\s+(.*)$", r"\1 because"),
        (rf"^how\s+{_AUX}\s+{_WHO}\s+(.*)$", r"\1"),
        (rf"^how\s+(long|fast|early|often|many|much|soon|big|large)\s+{_AUX}\s+(.*)$", r"\2 \1"),
        (rf"^how\s+{_AUX}\s+(.*)$", r"\1"),
        (r"^how\s+to\s+(.*)$", r"\1"),
        (rf"^(?:what|which)\s+{_AUX}\s+(.*)$", r"\1"),
        (rf"^(?:what|which)\s+(\w+(?:\s+\w+)?)\s+{_AUX}\s+(.*)$", r"\2 \1"),
        (rf"^(?:who|whom|whose)\s+{_AUX}?\s*(.*)$", r"\1"),
        (rf"^(?:when|where)\s+{_AUX}\s+(.*)$", r"\1"),
        (rf"^{_AUX}\s+(.*)$", r"\1"),
    )
)


def statement_form(question: str) -> str:
    """``question`` without its interrogative and auxiliary, in statement order ("how do I book time off?" ->
    "book time off"; "why did builds fail?" -> "builds fail because"). A text that is no question comes back
    with only its outer whitespace and a trailing "?" removed."""
    text = question.strip().rstrip("?").strip()
    # Only the last clause asks ("a user asked for all their personal data; who handles it?").
    head, sep, last = text.rpartition(";")
    for pattern, replacement in _RULES:
        rewritten, n = pattern.subn(replacement, last.strip())
        if n:
            return f"{head}{sep} {rewritten.strip()}".strip() if sep else rewritten.strip()
    return text
