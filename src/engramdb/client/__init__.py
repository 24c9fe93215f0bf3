"""Clients of a running ``engram serve``: :class:`RemoteEngram` (what ``Engram("http://...")`` returns) and the
transport it shares with :class:`~engramdb.aio.AsyncEngram`."""

from engramdb.client._transport import is_url
from engramdb.client.remote import LOCAL_ONLY, RemoteEngram

__all__ = ["LOCAL_ONLY", "RemoteEngram", "is_url"]
