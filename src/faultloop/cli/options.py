"""Command-line options derived from a settings dataclass (faultloop.run.spec.JobSettings): each
field is one `--flag` with the field's type, default, help and choices, so a setting is declared
once, in its dataclass."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterable
from typing import Any, TypeVar

from faultloop.run.spec import flag

T = TypeVar("T")


def _chosen(cls: type[Any], only: Iterable[str] | None) -> list[dataclasses.Field[Any]]:
    names = None if only is None else set(only)
    return [f for f in dataclasses.fields(cls) if names is None or f.name in names]


def add_settings(parser: argparse.ArgumentParser, cls: type[Any], only: Iterable[str] | None = None) -> None:
    """One option per field of the dataclass (or of the fields named in `only`)."""
    hints = typing.get_type_hints(cls)
    for f in _chosen(cls, only):
        choices = f.metadata.get("choices") or None
        parser.add_argument(
            flag(f.name),
            dest=f.name,
            type=hints[f.name],
            default=f.default,
            choices=choices,
            help=f.metadata.get("help"),
        )


def settings_from(args: argparse.Namespace, cls: type[T], only: Iterable[str] | None = None) -> T:
    """The dataclass from the parsed options (fields left out of `only` keep their defaults)."""
    return cls(**{f.name: getattr(args, f.name) for f in _chosen(cls, only)})
