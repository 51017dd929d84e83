"""The OpenAI-compatible client shared by logsage's LLM mode and the LLM judge.

One call shape (system + user prompt in, a JSON object matching a schema out) so both callers get
the same retry policy, the same schema validation and the same guarantee that the API key never
leaks into an error message, an artifact or a log. Every prompt is redacted here, on its way out
(`analyze.redact`): whatever a caller built, nothing that looks like a secret reaches the endpoint.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultloop.analyze.redact import Redactor

if TYPE_CHECKING:
    import openai

# Local servers (vLLM, llama.cpp, ...) accept any key, but the openai client insists on one.
PLACEHOLDER_KEY = "no-key"
REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class LLMSettings:
    """Where to reach the model and how patiently; the key itself is never stored here."""

    base_url: str
    model: str
    api_key_file: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 2
    temperature: float = 0.0


# An analyzer entry's `llm:` key (config schema), and what a fingerprint may keep of an endpoint.
LLM_OPTION = {"llm": {"$ref": "#/definitions/llm"}}


def endpoint_settings(endpoint: dict[str, Any]) -> LLMSettings:
    """A configured endpoint (`llm:` of the config) as settings."""
    return LLMSettings(
        base_url=str(endpoint.get("base_url", "")),
        model=str(endpoint.get("model", "")),
        api_key_file=endpoint.get("api_key_file") or None,
        timeout_s=float(endpoint.get("timeout_s", 60)),
        max_retries=int(endpoint.get("max_retries", 2)),
    )


def keyless(endpoint: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as a fingerprint may hold it: without its key's file."""
    return {k: v for k, v in sorted(endpoint.items()) if "key" not in k}


class LLMError(RuntimeError):
    """The model could not give a schema-valid answer; the message is safe to record (no key)."""


def read_api_key(settings: LLMSettings) -> str | None:
    """The key from the key file, else from the environment variable; None when neither has one."""
    if settings.api_key_file:
        path = Path(settings.api_key_file).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise LLMError(f"cannot read API key file {path}: {exc.strerror or type(exc).__name__}") from None
        if key:
            return key
    key = os.environ.get(settings.api_key_env, "").strip()
    return key or None


def redact(text: str, secret: str | None) -> str:
    """Remove the secret from text that might echo it (server error bodies, exception reprs)."""
    if secret and secret != PLACEHOLDER_KEY:
        text = text.replace(secret, REDACTED)
    return text


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a model's text (models wrap JSON in prose or code fences)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise ValueError("no JSON object in the answer")


class _Retryable(Exception):
    """An attempt failed in a way another attempt may fix (timeout, 5xx, malformed answer)."""


def _attempt(
    client: openai.OpenAI,
    settings: LLMSettings,
    messages: list[dict[str, str]],
    schema: dict,
    schema_name: str,
    structured: bool,
) -> dict[str, Any]:
    import openai  # imported on use: the deterministic paths never pay for it

    kwargs: dict[str, Any] = {}
    if structured:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }
    try:
        completion = client.chat.completions.create(
            model=settings.model,
            messages=messages,  # type: ignore[arg-type]
            temperature=settings.temperature,
            **kwargs,
        )
    except openai.APITimeoutError as exc:
        raise _Retryable(f"timed out after {settings.timeout_s:g} s") from exc
    except openai.APIConnectionError as exc:
        raise _Retryable(f"connection failed: {exc}") from exc
    except openai.APIStatusError as exc:
        if exc.status_code >= 500:
            raise _Retryable(f"HTTP {exc.status_code}: {exc.message}") from exc
        raise
    choices = getattr(completion, "choices", None) or []
    content = choices[0].message.content if choices and choices[0].message else None
    if not content:
        raise _Retryable("empty answer")
    try:
        answer = json.loads(content)
        if not isinstance(answer, dict):
            raise ValueError("answer is not a JSON object")
    except ValueError:
        try:
            answer = first_json_object(content)
        except ValueError as exc:
            raise _Retryable(f"malformed JSON: {exc}; answer began {content[:120]!r}") from None
    # Imported on an answer's arrival, not with the module: logsage's deterministic runs import this
    # client (its LLM mode) and would pay ~70 ms at every start for a validator they never use.
    import jsonschema

    try:
        jsonschema.validate(answer, schema)
    except jsonschema.ValidationError as exc:
        raise _Retryable(f"answer does not match schema {schema_name}: {exc.message}") from None
    return answer


def outgoing(key: str | None) -> Redactor:
    """The redaction of text bound for an endpoint: every secret shape, and its key as it is
    and as a JSON string holds it."""
    return Redactor((key, json.dumps(key)[1:-1]) if key and key != PLACEHOLDER_KEY else ())


def chat_json(
    settings: LLMSettings,
    system: str,
    user: str,
    schema: dict,
    *,
    schema_name: str,
    redactions: Counter[str] | None = None,
) -> dict:
    """Ask the model and return its answer as a dict valid against schema, or raise LLMError.
    Both prompts are redacted first; redactions: where to add what was replaced, by kind.

    Structured output (response_format json_schema) is asked for first; a server that rejects it
    with HTTP 400 is asked again without it and its text is parsed for the first JSON object.
    Timeouts, HTTP 5xx and malformed or schema-invalid answers are retried up to max_retries.
    """
    import openai

    key = read_api_key(settings)
    client = openai.OpenAI(
        base_url=settings.base_url,
        api_key=key or PLACEHOLDER_KEY,
        timeout=settings.timeout_s,
        max_retries=0,  # retries are ours, so every kind of failure follows one policy
    )
    redactor = outgoing(key)
    messages = [{"role": "system", "content": redactor.text(system)}, {"role": "user", "content": redactor.text(user)}]
    if redactions is not None:
        redactions.update(redactor.counts)
    where = f"{settings.model} at {settings.base_url}"
    structured = True
    failures: list[str] = []
    attempts = 1 + max(0, settings.max_retries)
    try:
        while len(failures) < attempts:
            try:
                return _attempt(client, settings, messages, schema, schema_name, structured)
            except _Retryable as exc:
                failures.append(redact(str(exc), key))
            except openai.APIStatusError as exc:
                if exc.status_code == 400 and structured:
                    structured = False  # server lacks structured output: plain text, parsed
                    continue
                detail = redact(f"HTTP {exc.status_code}: {exc.message}", key)
                raise LLMError(f"LLM request to {where} failed: {detail}") from None
            except openai.OpenAIError as exc:
                raise LLMError(f"LLM request to {where} failed: {redact(str(exc), key)}") from None
    finally:
        client.close()
    tried = "; ".join(f"attempt {i}: {msg}" for i, msg in enumerate(failures, 1))
    raise LLMError(f"LLM request to {where} failed after {len(failures)} attempts: {tried}")
