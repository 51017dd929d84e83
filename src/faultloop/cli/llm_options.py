"""The LLM endpoint flags shared by every command that can ask an LLM (logsage, score)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faultloop.analyze.llm import LLMSettings


def add_endpoint_arguments(parser: argparse.ArgumentParser, *, timeout_s: float) -> None:
    """--llm-base-url, --llm-model, the key file or variable, timeout and retries."""
    parser.add_argument("--llm-base-url", default="")
    parser.add_argument("--llm-model", default="")
    parser.add_argument("--llm-api-key-file", default=None)
    parser.add_argument("--llm-api-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--llm-timeout", type=float, default=timeout_s)
    parser.add_argument("--llm-max-retries", type=int, default=2)


def endpoint_from_args(args: argparse.Namespace) -> LLMSettings:
    # imported here: `faultloop logsage` adds these flags before it starts its prefilter, and most
    # of its runs ask no LLM
    from faultloop.analyze.llm import LLMSettings

    return LLMSettings(
        base_url=args.llm_base_url,
        model=args.llm_model,
        api_key_file=args.llm_api_key_file or None,
        api_key_env=args.llm_api_key_env,
        timeout_s=args.llm_timeout,
        max_retries=args.llm_max_retries,
    )
