"""Scorer registry: scorers are registered by name and version, built-ins like plug-ins.

Built-in scorers are declared in the `tracecard.scorers` entry-point group exactly as a third
party would declare theirs; when the package is not installed (a source checkout) the same
modules are loaded by module path.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from .types import ComponentScore, RunFacts, Span

if TYPE_CHECKING:
    from .suite import Task

__all__ = [
    "BUILTIN_MODULES",
    "ENTRY_POINT_GROUP",
    "MAX_COMPONENT_LENGTH",
    "RegistryError",
    "ScorerInfo",
    "ScorerRegistry",
    "check_component",
    "component_key",
    "component_names",
    "default_registry",
    "load_entry_points",
    "load_scorer_module",
    "scorer",
]

ENTRY_POINT_GROUP = "tracecard.scorers"
BUILTIN_MODULES: tuple[str, ...] = (
    "tracecard.scorers.invocation",
    "tracecard.scorers.completion",
    "tracecard.scorers.outcome",
    "tracecard.scorers.safety",
    "tracecard.scorers.efficiency",
    "tracecard.scorers.composite",
)
_ATTR = "__tracecard_scorer__"
# The longest component name the database stores (the scores and verdicts columns; equal to
# tracecard.traces.models.COMPONENT_MAX_LENGTH, not imported: this layer loads no SQLAlchemy).
MAX_COMPONENT_LENGTH = 128

TraceScorer = Callable[["Task", Sequence[Span], RunFacts], ComponentScore]
DerivedScorer = Callable[[Sequence[ComponentScore]], ComponentScore]
F = TypeVar("F", bound=Callable[..., ComponentScore])


class RegistryError(RuntimeError):
    """A scorer that cannot be registered or found."""


@dataclass(frozen=True)
class ScorerInfo:
    """A registered scorer. `derived` scorers read other components' scores, not the trace."""

    name: str
    component: str
    version: str
    fn: Callable[..., ComponentScore]
    derived: bool = False


def scorer(*, name: str, component: str, version: str, derived: bool = False) -> Callable[[F], F]:
    """Mark a function as a scorer; registries pick it up from its module or entry point."""

    def mark(fn: F) -> F:
        setattr(fn, _ATTR, ScorerInfo(name, component, version, fn, derived))
        return fn

    return mark


def scorers_in(obj: Any) -> list[ScorerInfo]:
    """Scorers declared by a marked function, or by every marked function of a module."""
    info = getattr(obj, _ATTR, None)
    if isinstance(info, ScorerInfo):
        return [info]
    if isinstance(obj, ModuleType):
        members = (getattr(m, _ATTR, None) for m in vars(obj).values() if callable(m))
        return [i for i in members if isinstance(i, ScorerInfo) and i.fn.__module__ == obj.__name__]
    raise RegistryError(f"{obj!r} is neither a @scorer function nor a module of them")


class ScorerRegistry:
    """Scorers by name; trace scorers run first, then derived ones (e.g. composite)."""

    def __init__(self, scorers: Iterable[ScorerInfo] = ()) -> None:
        self._by_name: dict[str, ScorerInfo] = {}
        for info in scorers:
            self.register(info)

    def register(self, item: ScorerInfo | Callable[..., ComponentScore]) -> ScorerInfo:
        """Add a scorer; the same name with a different function is an error."""
        info = item if isinstance(item, ScorerInfo) else scorers_in(item)[0]
        if not info.component or len(info.component) > MAX_COMPONENT_LENGTH:
            raise RegistryError(
                f"scorer {info.name!r} ({info.fn.__module__}): component name "
                f"{info.component[:40]!r}{'…' if len(info.component) > 40 else ''} is "
                f"{len(info.component)} characters; component names are 1 to "
                f"{MAX_COMPONENT_LENGTH} characters (the longest the database stores)"
            )
        known = self._by_name.get(info.name)
        if known is not None and known.fn is not info.fn:
            raise RegistryError(f"scorer name {info.name!r} is already registered by {known.fn}")
        self._by_name[info.name] = info
        return info

    def get(self, name: str) -> ScorerInfo:
        """The scorer registered under `name`."""
        try:
            return self._by_name[name]
        except KeyError:
            raise RegistryError(f"no scorer named {name!r}") from None

    def names(self) -> list[str]:
        """Registered names in registration order."""
        return list(self._by_name)

    def components(self) -> list[str]:
        """The components the registry scores, in registration order (built-ins first): the
        one list the API, the viewer, the CLI and the exports show and accept."""
        return list(dict.fromkeys(info.component for info in self._by_name.values()))

    def component_key(self, component: str) -> tuple[int, str]:
        """Sort key: registered components in registry order, then any other by name."""
        order = self.components()
        return (order.index(component), "") if component in order else (len(order), component)

    def __iter__(self) -> Iterator[ScorerInfo]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


def load_scorer_module(module_path: str, registry: ScorerRegistry | None = None) -> ScorerRegistry:
    """Import `pkg.mod` and register every @scorer function defined in it."""
    target = registry if registry is not None else ScorerRegistry()
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise RegistryError(f"cannot import scorer module {module_path!r}: {exc}") from exc
    found = scorers_in(module)
    if not found:
        raise RegistryError(f"module {module_path!r} defines no @scorer function")
    for info in found:
        target.register(info)
    return target


def load_entry_points(
    group: str = ENTRY_POINT_GROUP, registry: ScorerRegistry | None = None
) -> ScorerRegistry:
    """Register the scorers declared in an entry-point group (functions or modules)."""
    target = registry if registry is not None else ScorerRegistry()
    for point in entry_points(group=group):
        for info in scorers_in(point.load()):
            target.register(info)
    return target


@functools.lru_cache(maxsize=1)
def _default_scorers() -> tuple[ScorerInfo, ...]:
    # Built-ins first, in component order, then third-party entry points; read once per process.
    registry = ScorerRegistry()
    for module_path in BUILTIN_MODULES:
        load_scorer_module(module_path, registry)
    load_entry_points(registry=registry)
    return tuple(registry)


def default_registry() -> ScorerRegistry:
    """The built-in scorers (in component order) plus every `tracecard.scorers` entry point."""
    return ScorerRegistry(_default_scorers())


def component_names() -> list[str]:
    """The components of the default registry (built-ins, then entry-point scorers)."""
    return default_registry().components()


def component_key(component: str) -> tuple[int, str]:
    """Sort key of a component in the default registry's order (unknown ones last, by name)."""
    return default_registry().component_key(component)


def check_component(component: str) -> str:
    """`component` if a registered scorer scores it; else a ValueError that lists those that do."""
    known = component_names()
    if component not in known:
        raise ValueError(
            f"unknown component {component!r}: registered scorers score {', '.join(known)}"
        )
    return component
