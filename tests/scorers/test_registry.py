from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from tracecard.scorers import (
    ComponentScore,
    RegistryError,
    ScorerRegistry,
    default_registry,
    load_scorer_module,
    scorer,
)
from tracecard.scorers.registry import BUILTIN_MODULES, check_component

ROOT = Path(__file__).resolve().parents[2]


def test_default_registry_has_every_builtin() -> None:
    registry = default_registry()
    assert registry.names()[:6] == [
        "invocation",
        "completion",
        "outcome",
        "safety",
        "efficiency",
        "composite",
    ]
    assert all(info.version for info in registry)
    assert [i.name for i in registry if i.derived] == ["composite"]


def test_every_registered_scorer_is_documented_with_its_version() -> None:
    docs = (ROOT / "docs" / "scorers.md").read_text()
    for info in default_registry():
        heading = re.search(
            rf"^## `{info.name}` \(component `{info.component}`, version "
            rf"`{re.escape(info.version)}`\)$",
            docs,
            re.M,
        )
        assert heading, f"docs/scorers.md does not document scorer {info.name} v{info.version}"


def test_every_registered_scorer_has_a_test_module() -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests" / "scorers").glob("test_*.py"))
    for info in default_registry():
        assert re.search(rf"\b{info.fn.__name__}\(", tests), f"no test calls {info.fn.__name__}"


def test_builtins_are_declared_as_entry_points_in_the_docs_snippet() -> None:
    docs = (ROOT / "docs" / "scorers.md").read_text()
    assert '[project.entry-points."tracecard.scorers"]' in docs
    builtins = [i for i in default_registry() if i.fn.__module__ in BUILTIN_MODULES]
    assert len(builtins) == len(BUILTIN_MODULES)
    for info in builtins:
        assert f'{info.name} = "{info.fn.__module__}:{info.fn.__name__}"' in docs


def test_third_party_module_registers_like_a_builtin(tmp_path: Path) -> None:
    (tmp_path / "my_scorers.py").write_text(
        textwrap.dedent("""
        from tracecard.scorers import ComponentScore, scorer

        @scorer(name="tone", component="tone", version="2")
        def score_tone(task, spans, facts):
            return ComponentScore(component="tone", value=1.0, passed=True,
                                  scorer="tone", version="2")
    """)
    )
    sys.path.insert(0, str(tmp_path))
    try:
        registry = load_scorer_module("my_scorers", default_registry())
    finally:
        sys.path.remove(str(tmp_path))
    assert registry.get("tone").version == "2"


def test_a_name_cannot_be_taken_twice() -> None:
    @scorer(name="invocation", component="invocation", version="9")
    def impostor(task: object, spans: object, facts: object) -> ComponentScore:
        raise AssertionError

    with pytest.raises(RegistryError, match="already registered"):
        default_registry().register(impostor)


def test_bad_module_paths_are_clear_errors() -> None:
    with pytest.raises(RegistryError, match="cannot import"):
        load_scorer_module("no_such_module_xyz")
    with pytest.raises(RegistryError, match="defines no @scorer"):
        load_scorer_module("json")


def test_registry_get_unknown() -> None:
    with pytest.raises(RegistryError, match="no scorer named"):
        ScorerRegistry().get("nope")



def test_scorers_never_import_the_layers_above() -> None:
    for path in (ROOT / "scorers").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import) (litestar|server|viewer)\b", text, re.M), path


def test_the_registry_is_the_one_list_of_components() -> None:
    registry = default_registry()
    builtins = ["invocation", "completion", "outcome", "safety", "efficiency", "composite"]
    assert registry.components()[: len(builtins)] == builtins
    # Registered components in registry order, then anything else by name.
    names = ["zeta", "composite", "alpha", "invocation", "outcome"]
    assert sorted(names, key=registry.component_key) == [
        "invocation",
        "outcome",
        "composite",
        "alpha",
        "zeta",
    ]
    assert check_component("outcome") == "outcome"
    with pytest.raises(ValueError, match="unknown component 'vibes'.*invocation, completion"):
        check_component("vibes")


def test_a_component_name_longer_than_the_database_holds_is_refused() -> None:
    def make(component: str) -> ComponentScore:
        return ComponentScore(component=component, value=None, passed=None, scorer="x", version="1")

    longest = "c" * 128
    registry = ScorerRegistry()

    @scorer(name="fits", component=longest, version="1")
    def fits(task: object, spans: object, facts: object) -> ComponentScore:
        return make(longest)

    @scorer(name="too-long", component=longest + "c", version="1")
    def too_long(task: object, spans: object, facts: object) -> ComponentScore:
        return make(longest + "c")

    registry.register(fits)
    with pytest.raises(RegistryError, match="is 129 characters; component names are 1 to 128"):
        registry.register(too_long)
    assert registry.components() == [longest]
