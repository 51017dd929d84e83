"""faultloop.analyze.llm over real HTTP against tests/openai_server.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from faultloop.analyze.llm import LLMError, LLMSettings, chat_json, first_json_object
from openai_server import OpenAIServer, Reply, openai_server

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "why": {"type": "string"}},
    "required": ["verdict", "why"],
    "additionalProperties": False,
}
KEY = "sk-test-SECRET-4242"


def settings(server: OpenAIServer, tmp_path: Path, **kw: object) -> LLMSettings:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    base = dict(base_url=server.base_url, model="judge-1", api_key_file=str(key_file), timeout_s=2.0, max_retries=2)
    base.update(kw)
    return LLMSettings(**base)  # type: ignore[arg-type]


def test_good_answer_and_request_shape(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply.json({"verdict": "yes", "why": "rank 3 died"}))
    answer = chat_json(settings(openai_server, tmp_path), "be strict", "rank 3 log here", SCHEMA, schema_name="verdict")
    assert answer == {"verdict": "yes", "why": "rank 3 died"}
    (req,) = openai_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "judge-1"
    assert req.body["temperature"] == 0.0
    assert req.body["messages"] == [
        {"role": "system", "content": "be strict"},
        {"role": "user", "content": "rank 3 log here"},
    ]
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "verdict"
    assert fmt["json_schema"]["schema"] == SCHEMA
    # the key travels only as the bearer header, never in the body
    auth = {k.lower(): v for k, v in req.headers.items()}["authorization"]
    assert auth == f"Bearer {KEY}"
    assert KEY.encode() not in req.raw


def test_json_wrapped_in_prose_is_parsed(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply('Sure! ```json\n{"verdict": "no", "why": "x {y}"}\n``` done'))
    answer = chat_json(settings(openai_server, tmp_path), "s", "u", SCHEMA, schema_name="v")
    assert answer == {"verdict": "no", "why": "x {y}"}


def test_malformed_json_is_retried_then_succeeds(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(
        Reply("not json at all"),
        Reply.json({"verdict": "maybe", "why": ""}),
        Reply.json({"verdict": "no", "why": "ok"}),
    )
    answer = chat_json(settings(openai_server, tmp_path), "s", "u", SCHEMA, schema_name="v")
    assert answer == {"verdict": "no", "why": "ok"}
    assert len(openai_server.requests) == 3


def test_malformed_json_exhausts_retries(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(*[Reply("{broken") for _ in range(5)])
    with pytest.raises(LLMError) as err:
        chat_json(settings(openai_server, tmp_path, max_retries=1), "s", "u", SCHEMA, schema_name="v")
    assert "after 2 attempts" in str(err.value) and "malformed JSON" in str(err.value)
    assert len(openai_server.requests) == 2


def test_timeout(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(
        Reply.json({"verdict": "yes", "why": "late"}, delay_s=3.0),
        Reply.json({"verdict": "yes", "why": "late"}, delay_s=3.0),
    )
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        chat_json(settings(openai_server, tmp_path, timeout_s=0.5, max_retries=1), "s", "u", SCHEMA, schema_name="v")
    assert time.monotonic() - started < 2.9
    assert len(openai_server.requests) == 2


def test_http_500_retried(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply("overloaded", status=500), Reply.json({"verdict": "yes", "why": "ok"}))
    assert chat_json(settings(openai_server, tmp_path), "s", "u", SCHEMA, schema_name="v")["verdict"] == "yes"
    assert len(openai_server.requests) == 2


def test_http_401_not_retried_and_key_redacted(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply(f"Incorrect API key provided: {KEY}", status=401))
    with pytest.raises(LLMError) as err:
        chat_json(settings(openai_server, tmp_path), "s", "u", SCHEMA, schema_name="v")
    text = str(err.value) + repr(err.value)
    assert "401" in text and KEY not in text and "[REDACTED]" in text
    assert err.value.__cause__ is None
    assert len(openai_server.requests) == 1


def test_500s_exhaust_retries_key_redacted(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(*[Reply(f"bad key {KEY}", status=503) for _ in range(3)])
    with pytest.raises(LLMError) as err:
        chat_json(settings(openai_server, tmp_path), "s", "u", SCHEMA, schema_name="v")
    assert "503" in str(err.value) and KEY not in str(err.value)
    assert len(openai_server.requests) == 3


def test_400_falls_back_to_plain_text(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(
        Reply("response_format not supported", status=400), Reply('{"verdict": "yes", "why": "plain"}')
    )
    assert chat_json(settings(openai_server, tmp_path), "s", "u", SCHEMA, schema_name="v")["why"] == "plain"
    first, second = openai_server.requests
    assert "response_format" in first.body and "response_format" not in second.body


def test_no_key_uses_placeholder_and_env_key(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FL_TEST_KEY", raising=False)
    openai_server.script(Reply.json({"verdict": "yes", "why": ""}), Reply.json({"verdict": "no", "why": ""}))
    s = LLMSettings(base_url=openai_server.base_url, model="m", api_key_env="FL_TEST_KEY", timeout_s=2)
    chat_json(s, "s", "u", SCHEMA, schema_name="v")
    monkeypatch.setenv("FL_TEST_KEY", "env-key-1")
    chat_json(s, "s", "u", SCHEMA, schema_name="v")
    auths = [{k.lower(): v for k, v in r.headers.items()}["authorization"] for r in openai_server.requests]
    assert auths == ["Bearer no-key", "Bearer env-key-1"]


def test_connection_refused_is_llm_error(tmp_path: Path) -> None:
    s = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=1, max_retries=0)
    with pytest.raises(LLMError, match="connection"):
        chat_json(s, "s", "u", SCHEMA, schema_name="v")


def test_first_json_object() -> None:
    assert first_json_object('x [1] {"a": {"b": 2}} {"c": 3}') == {"a": {"b": 2}}
    with pytest.raises(ValueError):
        first_json_object("no object [1, 2]")
    assert json.dumps(first_json_object('{bad {"ok": true}')) == '{"ok": true}'
