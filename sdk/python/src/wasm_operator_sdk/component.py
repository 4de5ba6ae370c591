"""The componentize-py glue: `Reconciler = reconciler(MyModule())` in the
module's app file gives componentize-py the class it instantiates for the
`reconciler` export, `writes(Reconciler)` the one for the `writes` export,
`reach(Reconciler)` the one for contract 1.3's `reach` (whose `answer` a
1.3 host asks instead of `desired`: told the time, with the timer the module
asked for) and `Admission` the one for `admission` (no part), which
`wasm_operator_sdk.entry` makes for the app file.

The generated bindings (`wit_world`, `componentize_py_types`) are imported
when a method runs, never when this file is imported, so a module and its
tests import under plain CPython. A `ModuleError` becomes the WIT `error`
variant (`Err(...)`); any other exception is a bug: its traceback and then
its message go to the `log` import at level error, and the call fails: in a
component the instance exits (status 70) at once, under CPython the exception
is raised again. The host takes the last error line as the failure's message
(in the operator's log and the parent's Warning event).

Why exit rather than let the exception leave the call (which traps too):
componentize-py then prints the traceback to WASI standard error, which the
host discards, and through which wasm-operator up to dd10d96 panicked ("Cannot
start a runtime from within a runtime": the synchronous WASI output stream
blocks inside the host's async runtime), taking the whole operator down.
An exit writes nothing and ends the call the same way for the host. For
the same reason `reconciler()` points a component's `sys.stdout` and
`sys.stderr` at nothing: the host discards them anyway, and a `print()`
would otherwise take that host down as well.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from . import log
from .errors import Invalid, Malformed, ModuleError, Unsupported
from .module import Kind, Module, WriteModel, run_answer, run_desired, run_references, run_status, write_model

T = TypeVar("T")

# The host keeps at most 4 KiB of a line and cuts the rest: a traceback
# keeps its end, where the failure is.
MAX_LINE = 4000

_HERE = os.path.dirname(__file__)


def _bindings() -> tuple[Any, Any]:
    from componentize_py_types import Err  # type: ignore[import-not-found, unused-ignore]
    from wit_world.exports import reconciler as wit  # type: ignore[import-not-found, unused-ignore]

    return Err, wit


def to_wit_error(error: ModuleError) -> Any:
    """The WIT `error` variant for a ModuleError (needs the bindings)."""
    _, wit = _bindings()

    def fields(errors: Sequence[tuple[str, str]]) -> list[Any]:
        return [wit.FieldError(path=path, message=message) for path, message in errors]

    if isinstance(error, Malformed):
        return wit.Error_Malformed(fields(error.errors))
    if isinstance(error, Invalid):
        return wit.Error_Invalid(fields(error.errors))
    if isinstance(error, Unsupported):
        return wit.Error_Unsupported(error.message)
    raise TypeError("not one of Malformed, Invalid, Unsupported: " + type(error).__name__)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def format_traceback(error: BaseException) -> str:
    """The exception's traceback as Python prints it, chained causes first,
    without the source lines. (Not the `traceback` module: importing it adds
    about 1 MB to every component, and a failing call is no time to import.)"""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen and len(chain) < 32:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, "The above exception was the direct cause of the following exception:"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, "During handling of the above exception, another exception occurred:"
        else:
            current = None
    parts = []
    for exception, following in reversed(chain):
        lines = ["Traceback (most recent call last):"]
        frame = exception.__traceback__
        while frame is not None and os.path.dirname(frame.tb_frame.f_code.co_filename) == _HERE:
            frame = frame.tb_next  # the SDK's own frames, above the module's, say nothing
        while frame is not None:
            code = frame.tb_frame.f_code
            lines.append(f'  File "{code.co_filename}", line {frame.tb_lineno}, in {code.co_name}')
            frame = frame.tb_next
        lines.append(_describe(exception))
        parts.append("\n".join(lines))
        if following:
            parts.append(following)
    return "\n\n".join(parts)


def report(function: str, error: BaseException) -> None:
    """Logs an unexpected exception at level error: its traceback, then the
    one line that names it (`desired: ValueError: ...`), the line the host
    reports when the call traps."""
    trace = format_traceback(error)
    if len(trace) > MAX_LINE:
        trace = "...\n" + trace[-MAX_LINE:]
    log.error(trace)
    log.error(f"{function}: {_describe(error)}"[:MAX_LINE])


def call(function: str, run: Callable[[], T]) -> T:
    """Runs one contract function: ModuleError -> Err(error); anything else
    reported, then the call fails (exit in a component, raised again under
    CPython)."""
    try:
        return run()
    except ModuleError as error:
        err, _ = _bindings()
        raise err(to_wit_error(error)) from None
    except BaseException as error:
        if type(error).__name__ == "Err" and type(error).__module__ == "componentize_py_types":
            raise  # already the contract's answer
        # A failing report must not hide the error itself (contextlib costs an import).
        try:  # noqa: SIM105 - contextlib would cost an import
            report(function, error)
        except Exception:  # noqa: BLE001 - a failing report must not hide the error itself
            pass
        if log.IN_COMPONENT:
            os._exit(70)  # EX_SOFTWARE: see above
        raise


def _kind(kind: Kind) -> Any:
    _, wit = _bindings()
    return wit.KindInfo(
        group=kind.group, version=kind.version, kind=kind.kind, plural=kind.plural, namespaced=kind.namespaced
    )


class _Discard:
    """A standard stream that writes nothing."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def discard_stdio() -> None:
    """In a component: `print()` and other writes to standard output or
    error go nowhere instead of through WASI (see above). Under CPython: nothing."""
    if log.IN_COMPONENT:
        sys.stdout = sys.stderr = _Discard()


def reconciler(module: Module) -> type:
    """The `Reconciler` class componentize-py wants for the `reconciler`
    export, running `module`: in the app file, `Reconciler = reconciler(Echo())`.
    In a component it also discards standard output and error (`discard_stdio`)."""
    discard_stdio()

    class Reconciler:
        def manifest(self) -> Any:
            def run() -> Any:
                _, wit = _bindings()
                m = module.manifest
                return wit.ModuleManifest(
                    name=m.name,
                    version=m.version,
                    parent=_kind(m.parent),
                    crd=m.crd,
                    owned=[_kind(k) for k in m.owned],
                    reads=[_kind(k) for k in m.reads],
                    field_manager=m.field_manager_name,
                    event_reporter=m.event_reporter_name,
                )

            return call("manifest", run)

        def references(self, parent: str) -> list[Any]:
            def run() -> list[Any]:
                _, wit = _bindings()
                return [
                    wit.ObjectRef(group=r.group, version=r.version, kind=r.kind, namespace=r.namespace, name=r.name)
                    for r in run_references(module, parent)
                ]

            return call("references", run)

        def desired(self, parent: str, owned: list[str], related: list[str]) -> list[str]:
            return call("desired", lambda: run_desired(module, parent, owned, related))

        def status(self, parent: str, owned: list[str], related: list[str], now: str, problem: str | None) -> str:
            return call("status", lambda: run_status(module, parent, owned, related, now, problem))

    Reconciler.__qualname__ = "Reconciler"
    Reconciler.write_model = write_model(module)  # type: ignore[attr-defined]
    Reconciler.module = module  # type: ignore[attr-defined]
    return Reconciler


def writes(reconciler: type) -> type:
    """The `Writes` class componentize-py wants for the `writes` export
    (contract 1.2): the write model of the module that `reconciler()` made
    `reconciler` for (`replace` for any other class)."""
    model = getattr(reconciler, "write_model", WriteModel.REPLACE)

    class Writes:
        def model(self) -> Any:
            def run() -> Any:
                from wit_world.exports import writes as wit  # type: ignore[import-not-found, unused-ignore]

                return wit.WriteModel.APPLY if model is WriteModel.APPLY else wit.WriteModel.REPLACE

            return call("model", run)

    Writes.__qualname__ = "Writes"
    return Writes


def reach(reconciler: type) -> type:
    """The `Reach` class componentize-py wants for the `reach` export
    (contract 1.3): nothing asked beyond the parent's namespace; `answer` is
    the module's `desired`, told the time, with the timer it asked for
    (`ctx.reconcile_after`). For a class `reconciler()` did not make: its
    `desired`, and no timer."""
    module: Module | None = getattr(reconciler, "module", None)

    class Reach:
        def manifest(self) -> Any:
            def run() -> Any:
                from wit_world.exports import reach as wit  # type: ignore[import-not-found, unused-ignore]

                return wit.ReachManifest(
                    any_namespace=False,
                    selects=False,
                    finalizes=False,
                    parent_label_keys=[],
                    parent_annotation_keys=[],
                    decorates=None,
                )

            return call("manifest", run)

        def selections(self, parent: str) -> list[Any]:
            return []

        def answer(self, parent: str, owned: list[str], related: list[str], now: str) -> Any:
            def run() -> Any:
                from wit_world.exports import reach as wit  # type: ignore[import-not-found, unused-ignore]

                if module is None:
                    objects, again_after_ms = reconciler().desired(parent, owned, related), None
                else:
                    answer = run_answer(module, parent, owned, related, now)
                    objects, again_after_ms = answer.objects, answer.again_after_ms
                return wit.DesiredState(
                    objects=objects, again_after_ms=again_after_ms, parent_labels=[], parent_annotations=[]
                )

            return call("answer", run)

        def finalize(self, parent: str, owned: list[str], related: list[str], now: str) -> Any:
            return call("finalize", lambda: _refuse("does not finalize"))

    Reach.__qualname__ = "Reach"
    return Reach


def _refuse(what: str) -> Any:
    """Asked only of a module whose reach or admission says it takes part,
    which none on this SDK does."""
    raise Unsupported("this module " + what)


class Admission:
    """The class componentize-py wants for the `admission` export (contract
    1.3): a module on this SDK takes no part."""

    def takes_part(self) -> bool:
        return False

    def review(self, parent: str, old: str | None, operation: Any) -> list[str]:
        return call("review", lambda: _refuse("takes no part in admission"))
