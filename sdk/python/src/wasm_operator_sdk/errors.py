"""The three answers that are not a result: the contract's `error` variant.

Raise one from `references`, `desired` or `status`; the SDK turns it into
the WIT `error` (`malformed`, `invalid` or `unsupported`). Any other
exception is a bug in the module: the SDK logs it and the call traps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Union


class FieldError(NamedTuple):
    """One problem, located by a field path such as `spec.replicas`
    (empty: the whole input). Compares equal to a `(path, message)` tuple."""

    path: str
    message: str


ErrorsOrPath = Union[str, Iterable[tuple[str, str]]]


def _field_errors(errors: ErrorsOrPath, message: str | None) -> list[FieldError]:
    if isinstance(errors, str):
        if message is None:
            raise TypeError("a field error needs a message: Invalid(path, message)")
        return [FieldError(errors, message)]
    if message is not None:
        raise TypeError("give either (path, message) or a list of (path, message) pairs")
    result = [FieldError(str(path), str(text)) for path, text in errors]
    if not result:
        raise ValueError("an error needs at least one (path, message)")
    return result


def describe(errors: Iterable[tuple[str, str]]) -> str:
    """Field errors as one line: `spec.text: must be a string; ...`."""
    return "; ".join(f"{path}: {message}" if path else message for path, message in errors)


class ModuleError(Exception):
    """Base of Malformed, Invalid and Unsupported."""


class _FieldErrors(ModuleError):
    def __init__(self, errors: ErrorsOrPath, message: str | None = None) -> None:
        self.errors: list[FieldError] = _field_errors(errors, message)
        super().__init__(describe(self.errors))


class Malformed(_FieldErrors):
    """The input is not JSON, or not the expected shape:
    `Malformed("metadata.name", "must be a string")` or
    `Malformed([(path, message), ...])`."""


class Invalid(_FieldErrors):
    """The object parsed but breaks the module's rules, every broken rule
    listed: `Invalid("spec.replicas", "must be at least 1")` or
    `Invalid([(path, message), ...])`. The host changes and deletes nothing
    and reports it in the parent's status (through `problem`) and an event."""


class Unsupported(ModuleError):
    """The host asked for something this module does not do."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def malformed(path: str, message: str) -> Malformed:
    """`raise malformed("metadata.name", "must be a string")`."""
    return Malformed(path, message)


def invalid(path: str, message: str) -> Invalid:
    """`raise invalid("spec.replicas", "must be at least 1")`."""
    return Invalid(path, message)


def unsupported(message: str) -> Unsupported:
    """`raise unsupported("...")`."""
    return Unsupported(message)
