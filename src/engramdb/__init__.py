"""engramdb: a persistent memory and learning layer for LLM agents.

>>> from engramdb import Engram
>>> with Engram(":memory:") as mem:                                    # doctest: +SKIP
...     mem.remember("Retry with backoff fixes 429s", agent="alice", kind="failure")
...     hits = mem.search("rate limit errors", agent="alice")
"""

from engramdb.config import Settings
from engramdb.engram import Engram
from engramdb.errors import (
    ConfigError,
    CorruptStoreError,
    EmbeddingError,
    EngramError,
    ModelIntegrityError,
    ModelMismatchError,
    NotAStoreError,
    NotFound,
    SchemaVersionError,
    StorageError,
    ValidationError,
)
from engramdb.learning.adaptive import Recovery
from engramdb.models import (
    KINDS,
    AuditEvent,
    Change,
    FailurePattern,
    Hit,
    Memory,
    OptionStats,
    Share,
    SolutionStats,
    Suggestion,
)
from engramdb.shortterm import Message, SessionContext

__version__ = "0.1.0"

__all__ = [
    "KINDS",
    "AuditEvent",
    "Change",
    "ConfigError",
    "CorruptStoreError",
    "EmbeddingError",
    "Engram",
    "EngramError",
    "FailurePattern",
    "Hit",
    "Memory",
    "Message",
    "ModelIntegrityError",
    "ModelMismatchError",
    "NotAStoreError",
    "NotFound",
    "OptionStats",
    "Recovery",
    "SchemaVersionError",
    "SessionContext",
    "Settings",
    "Share",
    "SolutionStats",
    "StorageError",
    "Suggestion",
    "ValidationError",
    "__version__",
]
