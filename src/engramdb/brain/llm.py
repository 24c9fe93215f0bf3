"""An optional LLM: a small protocol and one client for the OpenAI-compatible chat-completions protocol.

Nothing in engramdb calls an LLM unless one is configured. The one client speaks
``POST {base_url}/chat/completions`` over httpx, which covers OpenAI, Ollama, vLLM,
LM Studio and llama.cpp's server. It is configured by a spec string and plain values
(:func:`llm_from_settings`), e.g. ``ENGRAM_LLM=openai:gpt-4o-mini`` with
``ENGRAM_LLM_BASE_URL`` and ``ENGRAM_LLM_KEY_ENV=OPENAI_API_KEY`` (the *name* of the
variable holding the key, so the key itself is never written to a settings file).

Failures are bounded and explicit:

* each request has a timeout; 429, 5xx, timeouts and connection errors are retried at
  most ``max_retries`` times with exponential backoff and jitter, honouring the
  server's ``Retry-After`` (capped); anything else fails at once;
* with a ``schema`` the answer must be a JSON object of that shape (a small JSON
  Schema subset: object, array, string, number, integer, boolean, null, ``enum``,
  ``required``); it is parsed and checked, and bad output raises :class:`LLMError`.

Every failure is an :class:`LLMError` (an :class:`~engramdb.errors.EngramError`), with
a message that says what went wrong; callers either show it or fall back to their
deterministic path.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol, runtime_checkable

from engramdb._retry import backoff_delay, retry_after
from engramdb.errors import LLMError, LLMNotConfigured

__all__ = [
    "LLM",
    "PROVIDERS",
    "LLMError",
    "LLMNotConfigured",
    "Message",
    "OpenAICompatibleLLM",
    "check_shape",
    "llm_from_settings",
    "parse_json_answer",
]

Message = Mapping[str, str]

#: Providers a spec may name, with the base URL each one uses when none is given. All speak the same protocol.
PROVIDERS: Final[Mapping[str, str]] = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
    "vllm": "http://localhost:8000/v1",
    "llamacpp": "http://localhost:8080/v1",
}

#: How to configure an LLM, for error messages.
HOW_TO_CONFIGURE: Final = (
    "configure one with ENGRAM_LLM=openai:MODEL (e.g. openai:gpt-4o-mini, or ollama:llama3.1:8b for a local "
    "Ollama), ENGRAM_LLM_BASE_URL for another OpenAI-compatible server (vLLM, LM Studio, llama.cpp), and "
    "ENGRAM_LLM_KEY_ENV=NAME of the environment variable holding the API key (OPENAI_API_KEY by default; "
    "local servers need none); "
    "or pass Engram(llm=...)"
)

_RETRY_STATUS: Final = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@runtime_checkable
class LLM(Protocol):
    """What engramdb needs from an LLM: one chat completion, optionally as a validated JSON object."""

    #: ``provider:model``, for records and messages.
    name: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str | dict[str, Any]:
        """The assistant's answer: text, or (with ``schema``) a dict of that shape. Raises LLMError."""
        ...


# -- structured output -----------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """The JSON value in an answer: the whole text, or inside one code fence, or the outermost ``{...}``."""
    candidates = [text]
    m = _FENCE.match(text)
    if m:
        candidates.append(m.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except ValueError:
            continue
    raise LLMError(f"the LLM's answer is not valid JSON: {_snippet(text)}")


_TYPES: Final[Mapping[str, Callable[[Any], bool]]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def check_shape(value: Any, schema: Mapping[str, Any], *, path: str = "answer") -> None:
    """Raise LLMError unless ``value`` has the shape ``schema`` describes (a JSON Schema subset)."""
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_TYPES[k](value) for k in kinds):
            raise LLMError(f"the LLM's {path} should be {' or '.join(kinds)}, not {_snippet(json.dumps(value))}")
    if "enum" in schema and value not in schema["enum"]:
        raise LLMError(f"the LLM's {path} should be one of {schema['enum']!r}, not {value!r}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                raise LLMError(f"the LLM's {path} lacks the field {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                check_shape(value[key], sub, path=f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check_shape(item, schema["items"], path=f"{path}[{i}]")


def _snippet(text: str, width: int = 120) -> str:
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


# -- the client --------------------------------------------------------------------------------------------


class OpenAICompatibleLLM:
    """A client of the OpenAI-compatible chat-completions protocol (OpenAI, Ollama, vLLM, LM Studio, llama.cpp).

    ``timeout`` bounds each request (seconds); ``max_retries`` bounds the retries of
    retryable failures, waiting ``backoff * 2**attempt`` seconds (with up to 25% jitter,
    at most ``max_backoff``) or the server's ``Retry-After`` if it gives one (also capped).
    ``json_mode`` asks the server for structured output when a schema is given:
    ``"schema"`` (``response_format`` json_schema: OpenAI, vLLM, LM Studio, llama.cpp,
    recent Ollama), ``"object"`` (json_object) or ``"none"`` (the prompt alone asks for JSON).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = PROVIDERS["openai"],
        api_key: str | None = None,
        provider: str = "openai",
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        json_mode: str = "schema",
        transport: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise LLMNotConfigured(f"no LLM model given: {HOW_TO_CONFIGURE}")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise LLMError(f"the LLM base URL must start with http:// or https://, not {base_url!r}")
        if not (timeout > 0 and max_retries >= 0 and backoff >= 0 and max_backoff >= 0):
            raise LLMError("timeout must be positive; max_retries, backoff and max_backoff non-negative")
        if json_mode not in ("schema", "object", "none"):
            raise LLMError(f"json_mode must be 'schema', 'object' or 'none', not {json_mode!r}")
        import httpx  # optional dependency (engramdb[llm]); only needed once an LLM is configured

        self.model = model.strip()
        self.provider = provider
        self.name = f"{provider}:{self.model}"
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.json_mode = json_mode
        self._sleep = sleep
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(self.timeout), transport=transport)

    def __repr__(self) -> str:
        return f"OpenAICompatibleLLM({self.name!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str | dict[str, Any]:
        """One chat completion: the answer's text, or with ``schema`` the validated JSON object."""
        msgs = _messages(messages)
        body: dict[str, Any] = {"model": self.model, "messages": msgs, "temperature": float(temperature)}
        if max_tokens is not None:
            body["max_tokens"] = int(max_tokens)
        if schema is not None:
            instruction = "Answer with one JSON object only, no prose, matching this JSON Schema:\n" + json.dumps(
                schema, separators=(",", ":")
            )
            body["messages"] = [{"role": "system", "content": instruction}, *msgs]
            if self.json_mode == "schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": dict(schema)},
                }
            elif self.json_mode == "object":
                body["response_format"] = {"type": "json_object"}
        text = self._content(self._post(body))
        if schema is None:
            return text
        value = parse_json_answer(text)
        check_shape(value, schema)
        if not isinstance(value, dict):
            raise LLMError(f"the LLM's answer should be a JSON object, not {_snippet(text)}")
        return value

    # -- transport -------------------------------------------------------------------------------------------
    def _post(self, body: Mapping[str, Any]) -> Any:
        url = f"{self.base_url}/chat/completions"
        httpx = self._httpx
        last = ""
        for attempt in range(self.max_retries + 1):
            server_wait: float | None = None
            try:
                response = self._client.post(url, json=body)
            except httpx.TimeoutException:
                last = f"no answer within {self.timeout:g} s"
            except httpx.TransportError as exc:
                last = f"cannot reach {self.base_url}: {exc}"
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise LLMError(
                            f"{self.name} answered with a body that is not JSON: {_snippet(response.text)}"
                        ) from None
                detail = _error_detail(response)
                if response.status_code not in _RETRY_STATUS:
                    raise LLMError(f"{self.name} refused the request (HTTP {response.status_code}): {detail}")
                last = f"HTTP {response.status_code}: {detail}"
                server_wait = retry_after(response.headers.get("Retry-After"), now=datetime.now(UTC))
            if attempt == self.max_retries:
                break
            self._sleep(backoff_delay(attempt, base=self.backoff, cap=self.max_backoff, server_wait=server_wait))
        tries = self.max_retries + 1
        raise LLMError(f"{self.name} failed after {tries} attempt{'s' if tries != 1 else ''}: {last}")

    def _content(self, data: Any) -> str:
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            shown = _snippet(json.dumps(data))
            raise LLMError(f"{self.name} answered without choices[0].message.content: {shown}") from None
        if not isinstance(content, str) or not content.strip():
            raise LLMError(f"{self.name} answered with an empty message")
        return content


def _messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    if isinstance(messages, str) or not isinstance(messages, Sequence) or not messages:
        raise LLMError("messages must be a non-empty list of {'role': ..., 'content': ...}")
    out = []
    for m in messages:
        role, content = (m.get("role"), m.get("content")) if isinstance(m, Mapping) else (None, None)
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise LLMError(f"each message needs a role (system, user, assistant) and text content, not {m!r}")
        out.append({"role": role, "content": content})
    return out


def _error_detail(response: Any) -> str:
    try:
        data = response.json()
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return _snippet(err["message"])
        if isinstance(err, str):
            return _snippet(err)
    except ValueError:
        pass
    return _snippet(response.text or response.reason_phrase or "")


# -- configuration -----------------------------------------------------------------------------------------


def llm_from_settings(
    spec: str | None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    key_env: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 3,
    env: Mapping[str, str] | None = None,
) -> OpenAICompatibleLLM | None:
    """The LLM a spec names, or None when ``spec`` is empty (no LLM: every feature stays deterministic).

    ``spec`` is ``PROVIDER:MODEL`` with PROVIDER one of :data:`PROVIDERS` (``openai:gpt-4o-mini``,
    ``ollama:llama3.1:8b``: everything after the first colon is the model). ``base_url``
    overrides the provider's default. The key is ``api_key`` if given, else the value of the
    environment variable named ``key_env`` (read from ``env``, default ``os.environ``); for
    ``openai`` a named variable that is unset is an error, so a typo does not silently send
    no key; the local providers send none then.
    """
    if spec is None or not str(spec).strip():
        return None
    provider, sep, model = str(spec).strip().partition(":")
    provider = provider.strip().lower()
    if not sep or not model.strip() or provider not in PROVIDERS:
        raise LLMNotConfigured(
            f"bad LLM setting {spec!r}: use PROVIDER:MODEL with PROVIDER one of "
            f"{', '.join(PROVIDERS)}; {HOW_TO_CONFIGURE}"
        )
    key = api_key
    if key is None and key_env:
        environ = os.environ if env is None else env
        key = environ.get(key_env) or None
        # A local server (Ollama, LM Studio, vLLM, llama.cpp) takes no key: seed 002 runs on Ollama, and
        # demanding OPENAI_API_KEY there refused every command. OpenAI's own API always needs one.
        if key is None and provider == "openai":
            raise LLMNotConfigured(
                f"the LLM key variable {key_env!r} (ENGRAM_LLM_KEY_ENV) is not set in the environment"
            )
    return OpenAICompatibleLLM(
        model,
        base_url=base_url or PROVIDERS[provider],
        api_key=key,
        provider=provider,
        timeout=timeout,
        max_retries=max_retries,
    )
