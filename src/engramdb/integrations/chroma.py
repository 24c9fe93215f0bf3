"""Migration from ChromaDB (``pip install "engramdb[chroma]"``; CLI: ``engram import chroma PATH``).

>>> from engramdb import Engram
>>> from engramdb.integrations.chroma import import_chroma
>>> with Engram("./memory") as mem:                                      # doctest: +SKIP
...     report = import_chroma(mem, "./chroma", agent="surfer", dry_run=True)
...     print(report.to_dict())

:func:`import_chroma` reads a Chroma persist directory (the folder ``chromadb.PersistentClient(path=...)``
wrote, with its ``chroma.sqlite3``) offline: telemetry off, and no embedding function is ever loaded or
called. Every record of every collection with a document becomes one memory of ``agent``:

- content: the document (records without a document have nothing to search and are skipped, and counted);
- metadata: the record's Chroma metadata, plus ``chroma_id`` (its id) and ``chroma_collection``;
- tags: the collection's name; kind: ``kind`` (default ``knowledge``).

Vectors are not copied: Chroma's were made by another embedding model (its default MiniLM, or OpenAI's, ...)
and vectors of two models cannot be compared, so every document is embedded again with the store's model;
the report says which model the collection used and how many documents were re-embedded. Writes go through
:meth:`Engram.remember_many` (secrets redacted, every write audited), in batches. Records imported before
(same collection and ``chroma_id`` for the same agent) are skipped, so an interrupted import can simply be run
again. ``dry_run=True`` reports per collection what would come and writes nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engramdb import _validate as check
from engramdb.errors import EngramError, StorageError, ValidationError

if TYPE_CHECKING:
    import os

    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from engramdb.engram import Engram

__all__ = ["ChromaImportReport", "CollectionImport", "import_chroma"]

#: Records read from Chroma (and written to engramdb) per batch.
BATCH: Final = 256
_EXISTING_PAGE: Final = 1000

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionImport:
    """What one Chroma collection held and what came (or, in a dry run, would come) from it."""

    name: str
    #: Records in the collection.
    records: int
    #: Memories written (dry run: that would be written).
    imported: int
    #: Records already imported by an earlier run (same agent, collection and chroma_id).
    already_imported: int
    #: Records without a document: nothing to search, not imported.
    without_document: int
    #: The embedding function the collection was configured with, if Chroma recorded one.
    source_embedding: str | None
    #: The dimension of the collection's vectors (None for an empty collection).
    source_dimension: int | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "records": self.records,
            "imported": self.imported,
            "already_imported": self.already_imported,
            "without_document": self.without_document,
            "source_embedding": self.source_embedding,
            "source_dimension": self.source_dimension,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChromaImportReport:
    """The result of :func:`import_chroma`: per collection, and the embedding model documents were embedded with."""

    path: str
    agent: str
    dry_run: bool
    #: The engramdb embedding model every imported document is (or would be) embedded with.
    model: str
    collections: list[CollectionImport] = field(default_factory=list)

    @property
    def imported(self) -> int:
        """Memories written (dry run: that would be written), over all collections."""
        return sum(c.imported for c in self.collections)

    @property
    def records(self) -> int:
        """Records in the Chroma store, over all collections."""
        return sum(c.records for c in self.collections)

    @property
    def vectors_note(self) -> str:
        """Why Chroma's vectors were not reused."""
        used = [c for c in self.collections if c.records]
        dims = sorted({str(c.source_dimension) for c in used if c.source_dimension})
        names = sorted({c.source_embedding for c in used if c.source_embedding})
        about = [f"{'/'.join(dims)}-dimensional"] if dims else []
        about += [f"made by Chroma's {', '.join(names)} embedding function"] if names else []
        origin = f" ({', '.join(about)})" if about else ""
        verb = "would be" if self.dry_run else "were"
        return (
            f"Chroma's vectors{origin} are not reused: vectors of different models cannot be compared, so "
            f"{self.imported} document{'s' if self.imported != 1 else ''} {verb} embedded with {self.model}."
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "path": self.path,
            "agent": self.agent,
            "dry_run": self.dry_run,
            "model": self.model,
            "records": self.records,
            "imported": self.imported,
            "vectors": "re-embedded",
            "vectors_note": self.vectors_note,
            "collections": [c.to_dict() for c in self.collections],
        }


def import_chroma(
    mem: Engram,
    path: str | os.PathLike[str],
    *,
    agent: str | None = None,
    kind: str = "knowledge",
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ChromaImportReport:
    """Bring every collection of the Chroma persist directory ``path`` into ``mem`` as ``agent``'s memories.

    ``agent`` defaults to ``"default"``. ``progress(done, total)`` is called after each batch (``total``:
    records with a document over all collections). A path that is not a Chroma persist directory raises
    :class:`~engramdb.errors.ValidationError`; a store Chroma cannot read raises
    :class:`~engramdb.errors.StorageError`. Bad records (e.g. an empty document) raise ValidationError
    naming the collection and id; batches written before stay (run it again to continue).
    """
    owner = check.agent_name("default" if agent is None else agent)
    kind = check.kind(kind)
    client = _open(path)
    report = ChromaImportReport(path=str(path), agent=owner, dry_run=dry_run, model=mem.embedder.model_id)
    collections = [_collection(client, name) for name in _collection_names(client)]
    plans = [_Plan(c, _existing_ids(mem, owner, c.name)) for c in collections]
    total = sum(p.pending for p in plans)
    done = 0
    for plan in plans:
        imported = 0
        if not dry_run:
            for items in plan.batches(owner, kind):
                mem.remember_many(items, force=True)
                imported += len(items)
                done += len(items)
                if progress is not None:
                    progress(done, total)
        report.collections.append(
            CollectionImport(
                name=plan.name,
                records=plan.records,
                imported=plan.pending if dry_run else imported,
                already_imported=plan.already,
                without_document=plan.empty,
                source_embedding=plan.source_embedding,
                source_dimension=plan.dimension,
            )
        )
    return report


# -- reading Chroma -------------------------------------------------------------------------------------------
def _open(path: str | os.PathLike[str]) -> ClientAPI:
    """A Chroma client on an existing persist directory (Chroma itself would create a new, empty one)."""
    folder = Path(path)
    if not folder.exists():
        raise ValidationError(f"no Chroma store at {folder}: the path does not exist")
    if not folder.is_dir():
        raise ValidationError(f"{folder} is not a Chroma persist directory (it is a file; give its folder)")
    if not (folder / "chroma.sqlite3").is_file():
        raise ValidationError(f"{folder} is not a Chroma persist directory (it has no chroma.sqlite3)")
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:
        raise EngramError("importing from Chroma needs chromadb: pip install 'engramdb[chroma]'") from exc
    try:
        return chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
    except Exception as exc:
        raise StorageError(f"cannot open the Chroma store at {folder}: {_one_line(exc)}") from exc


def _collection_names(client: ClientAPI) -> list[str]:
    try:
        return sorted(c.name for c in client.list_collections())
    except Exception as exc:
        raise StorageError(f"cannot list the Chroma collections: {_one_line(exc)}") from exc


def _collection(client: ClientAPI, name: str) -> Collection:
    try:
        # No embedding function: nothing here embeds, so nothing is downloaded or called.
        return client.get_collection(name, embedding_function=None)
    except Exception as exc:
        raise StorageError(f"cannot open the Chroma collection {name!r}: {_one_line(exc)}") from exc


def _source_embedding(collection: Collection) -> str | None:
    """The name of the embedding function the collection was created with, as Chroma recorded it."""
    try:
        config = collection.configuration_json
        ef = config.get("embedding_function") if isinstance(config, Mapping) else None
        name = ef.get("name") if isinstance(ef, Mapping) else None
    except (AttributeError, KeyError, TypeError, ValueError):  # an older store without a recorded configuration
        return None
    return str(name) if name else None


class _Plan:
    """One collection: its counts (read once, up front) and its records to import, batch by batch."""

    def __init__(self, collection: Collection, existing: set[str]) -> None:
        self.collection = collection
        self.name = collection.name
        self.existing = existing
        self.source_embedding = _source_embedding(collection)
        self.records = self.already = self.empty = self.pending = 0
        for ids, documents, _ in self._pages(["documents"]):
            for record_id, document in zip(ids, documents, strict=True):
                self.records += 1
                if record_id in existing:
                    self.already += 1
                elif document is None:
                    self.empty += 1
                else:
                    self.pending += 1
        self.dimension = self._dimension() if self.records else None

    def _dimension(self) -> int | None:
        """The length of the collection's vectors (read from one record)."""
        try:
            page = self.collection.get(include=["embeddings"], limit=1)
        except Exception as exc:
            raise StorageError(f"cannot read the Chroma collection {self.name!r}: {_one_line(exc)}") from exc
        vectors = page.get("embeddings")
        return len(vectors[0]) if vectors is not None and len(vectors) else None

    def _pages(self, include: list[Any]) -> Iterator[tuple[list[str], list[str | None], list[Any]]]:
        """(ids, documents, metadatas) of the collection, one page of :data:`BATCH` records at a time."""
        offset = 0
        while True:
            try:
                page = self.collection.get(include=include, limit=BATCH, offset=offset)
            except Exception as exc:
                raise StorageError(f"cannot read the Chroma collection {self.name!r}: {_one_line(exc)}") from exc
            ids = list(page["ids"])
            if not ids:
                return
            no_values: list[Any] = [None] * len(ids)
            documents: list[str | None] = list(page.get("documents") or no_values)
            metadatas: list[Any] = list(page.get("metadatas") or no_values)
            yield ids, documents, metadatas
            if len(ids) < BATCH:
                return
            offset += len(ids)

    def batches(self, agent: str, kind: str) -> Iterator[list[dict[str, Any]]]:
        """The records to import, as ``remember_many`` items, one list per page read."""
        for ids, documents, metadatas in self._pages(["documents", "metadatas"]):
            items = []
            for record_id, document, metadata in zip(ids, documents, metadatas, strict=True):
                if record_id in self.existing or document is None:
                    continue
                if not isinstance(document, str) or not document.strip():
                    raise ValidationError(
                        f"collection {self.name!r}, record {record_id!r}: the document is empty; nothing to import"
                    )
                items.append(
                    {
                        "content": document,
                        "agent": agent,
                        "kind": kind,
                        "tags": [self.name],
                        "metadata": {
                            **_json_metadata(metadata),
                            "chroma_id": record_id,
                            "chroma_collection": self.name,
                        },
                    }
                )
            if items:
                yield items


def _json_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Chroma metadata as JSON values (scalars and lists of scalars; a non-finite number becomes text)."""
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        out[str(key)] = _json_value(value)
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Sequence):
        return [_json_value(v) for v in value]
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)


# -- what is there already ------------------------------------------------------------------------------------
def _existing_ids(mem: Engram, agent: str, collection: str) -> set[str]:
    """The chroma ids of ``collection`` already imported for ``agent``."""
    out: set[str] = set()
    offset = 0
    while True:
        page = mem.list(agent=agent, tags=[collection], limit=_EXISTING_PAGE, offset=offset)
        for m in page:
            if m.agent == agent and m.metadata.get("chroma_collection") == collection:
                chroma_id = m.metadata.get("chroma_id")
                if isinstance(chroma_id, str):
                    out.add(chroma_id)
        if len(page) < _EXISTING_PAGE:
            return out
        offset += len(page)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
