"""Server logs as text (the default) or as JSON, one object a line (the ``log_format`` setting).

JSON lines are for log collectors (Loki, Elasticsearch, CloudWatch): each record is
``{"time", "level", "logger", "message"}``, plus ``exception`` (the traceback, as one
string) when there is one, and uvicorn's access-log fields (``client``, ``method``,
``path``, ``status``) on request lines. :func:`log_config` is the ``logging.config``
dictionary ``engram serve`` and ``engram mcp --transport http`` hand to uvicorn, so
the server's own messages, uvicorn's and the library's share one format.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Final, Literal

__all__ = ["LOG_FORMATS", "JSONFormatter", "log_config"]

LogFormat = Literal["text", "json"]
LOG_FORMATS: Final = ("text", "json")

#: uvicorn's access-log record carries these as ``args``: (client address, method, full path, HTTP version, status).
_ACCESS_FIELDS: Final = ("client", "method", "path", "http_version", "status")


class JSONFormatter(logging.Formatter):
    """One JSON object per record, on one line (messages with newlines stay one line: JSON escapes them)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            out.update(zip(_ACCESS_FIELDS, record.args, strict=True))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def log_config(log_format: LogFormat, *, level: str = "INFO") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dictionary: uvicorn's loggers and the library's (``engramdb``) on stderr."""
    text = {"()": "logging.Formatter", "fmt": "%(levelname)s:     %(name)s: %(message)s"}
    access_text = {"()": "logging.Formatter", "fmt": "%(levelname)s:     %(message)s"}
    as_json = {"()": f"{__name__}.JSONFormatter"}
    formatter = as_json if log_format == "json" else text
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter, "access": as_json if log_format == "json" else access_text},
        "handlers": {"default": {**handler, "formatter": "default"}, "access": {**handler, "formatter": "access"}},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["access"], "level": level, "propagate": False},
            "engramdb": {"handlers": ["default"], "level": level, "propagate": False},
        },
    }
