"""The exceptions engramdb raises.

Every error the library raises on purpose derives from :class:`EngramError`, and
subclasses the builtin exception with the same meaning, so ``except KeyError``
and ``except ValueError`` keep working for callers who do not know our tree::

    EngramError
    ├── ValidationError (ValueError)        bad input: empty content, unknown kind, bad outcome
    │   └── ConfigError                     a bad setting in a config file, the environment or arguments
    ├── NotFound (KeyError)                 no such memory (or not visible to this agent)
    ├── AccessDenied (PermissionError)      an API key does not allow this (another agent, a read-only key)
    ├── NotAuthenticated                    a server needs an API key: none sent, or an unknown or revoked one
    ├── StorageError                        the storage backend failed
    │   ├── NotAStoreError                  the path is not an engramdb store
    │   ├── CorruptStoreError               the database file is damaged
    │   └── SchemaVersionError              the store was written by a newer engramdb
    ├── EmbeddingError                      the embedding model could not run
    │   ├── ModelIntegrityError             the model file does not match its published hash
    │   └── ModelMismatchError              the store's vectors come from another model
    └── LLMError                            the optional LLM failed, timed out or answered unusably
        └── LLMNotConfigured                a feature needs an LLM and none is configured

Driver errors (``sqlite3.Error``, ``onnxruntime`` failures, ...) are translated at
the boundary where they happen: ``raise StorageError(msg) from exc``.
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "ConfigError",
    "CorruptStoreError",
    "EmbeddingError",
    "EngramError",
    "LLMError",
    "LLMNotConfigured",
    "ModelIntegrityError",
    "ModelMismatchError",
    "NotAStoreError",
    "NotAuthenticated",
    "NotFound",
    "SchemaVersionError",
    "StorageError",
    "ValidationError",
]


class EngramError(Exception):
    """Root of every error engramdb raises on purpose."""


class ValidationError(EngramError, ValueError):
    """An argument or input record is not acceptable; nothing was changed."""


class ConfigError(ValidationError):
    """A setting (file, environment or argument) is invalid."""


class NotFound(EngramError, KeyError):
    """No such item, or it is not visible to the agent asking."""

    def __str__(self) -> str:
        # KeyError.__str__ quotes its argument; we want the plain message.
        return str(self.args[0]) if self.args else "not found"


class AccessDenied(EngramError, PermissionError):
    """The caller's API key does not allow this (another agent's data, or a write with a read-only key)."""


class NotAuthenticated(EngramError):
    """A server requires an API key and the request carried none, or an unknown or revoked one (HTTP 401)."""


class StorageError(EngramError):
    """The storage backend failed."""


class NotAStoreError(StorageError):
    """The path exists but is not an engramdb store."""


class CorruptStoreError(StorageError):
    """The database file is damaged or unreadable."""


class SchemaVersionError(StorageError):
    """The store's schema is newer than this version of engramdb understands."""


class EmbeddingError(EngramError):
    """The embedding model could not be loaded or run."""


class ModelIntegrityError(EmbeddingError):
    """The model file's hash does not match the one its package publishes."""


class ModelMismatchError(EmbeddingError):
    """The store holds vectors made by a different embedding model."""


class LLMError(EngramError):
    """The LLM could not be reached, refused, timed out, or answered something unusable."""


class LLMNotConfigured(LLMError):
    """A feature needs an LLM and none is configured."""
