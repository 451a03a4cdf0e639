"""BFCL entries and their environments: the data files of `bfcl_eval`, fresh instances of an
entry's classes in its initial configuration, calls executed as BFCL executes them, and the
state BFCL's checker compares (every public attribute) as JSON.

Imported only when BFCL is used: `bfcl_eval` is the optional extra `tracecard[bfcl]`.
"""

from __future__ import annotations

import ast
import copy
import datetime
import decimal
import importlib
import inspect
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from tracecard.scorers.equality import MAP_TAG, SET_TAG, TUPLE_TAG

__all__ = [
    "MULTI_TURN",
    "SINGLE_TURN",
    "UNSUPPORTED",
    "BfclMissing",
    "Call",
    "Environment",
    "entries",
    "function_docs",
    "parse_calls",
    "possible_answers",
    "result_text",
]

# Categories and what tracecard does with them.
MULTI_TURN = (
    "multi_turn_base",
    "multi_turn_long_context",
    "multi_turn_miss_param",
    "multi_turn_miss_func",
)
SINGLE_TURN = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
)
UNSUPPORTED = {
    "simple_java": "arguments are Java source text checked by BFCL's Java type converter",
    "simple_javascript": "arguments are JavaScript source text checked by BFCL's JS converter",
    "live_relevance": "passes with any call at all: nothing for invocation matchers to check",
    "web_search": "needs a live search service (SerpAPI) and network access",
    "memory": "needs BFCL's memory backends (sentence-transformers, faiss) and a prior "
    "conversation",
    "format_sensitivity": "varies BFCL's prompt formats, not the agent's behaviour",
}


class BfclMissing(RuntimeError):
    """`bfcl_eval` is not installed."""


def _package() -> Any:
    try:
        return importlib.import_module("bfcl_eval")
    except ImportError as exc:
        raise BfclMissing(
            "BFCL support needs the optional extra: pip install 'tracecard[bfcl]'"
            " (or: pip install --no-deps bfcl-eval==2026.3.23 mpmath==1.3.0)"
        ) from exc


def _lines(relative: str) -> list[dict[str, Any]]:
    folder = resources.files(_package()) / "data"
    text = (folder / relative).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def entries(category: str) -> tuple[dict[str, Any], ...]:
    """The questions of one category, in file order."""
    return tuple(_lines(f"BFCL_v4_{category}.json"))


@cache
def possible_answers(category: str) -> dict[str, dict[str, Any]]:
    """Ground truth / possible answers by entry id (irrelevance categories have none)."""
    if "irrelevance" in category:
        return {}
    return {row["id"]: row for row in _lines(f"possible_answer/BFCL_v4_{category}.json")}


@cache
def function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """The function docs BFCL shows a model for one environment class."""
    config = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    file_name = config.MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(_lines(f"multi_turn_func_doc/{file_name}"))


@dataclass(frozen=True)
class Call:
    """One function call: the function's name and its arguments by parameter name."""

    name: str
    arguments: dict[str, Any]


def parse_calls(text: str) -> list[Call]:
    """BFCL's ground-truth call text (`"cd(folder='x')"`), positional arguments kept in order
    under `"$0"`, `"$1"`… until `Environment.bind` names them."""
    tree = ast.parse(text.strip(), mode="eval").body
    if not isinstance(tree, ast.Call):
        raise ValueError(f"not a function call: {text!r}")
    name = ast.unparse(tree.func)
    arguments: dict[str, Any] = {f"${i}": ast.literal_eval(a) for i, a in enumerate(tree.args)}
    arguments |= {k.arg: ast.literal_eval(k.value) for k in tree.keywords if k.arg}
    return [Call(name, arguments)]


def result_text(value: Any) -> str:
    """A method's return value as BFCL records it: str as is, dict as JSON, else str()."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def jsonable(value: Any, path: tuple[int, ...] = ()) -> Any:
    """A Python value as JSON: objects as their public attributes (a back-reference to an
    enclosing object, such as a directory's parent, is left out: BFCL's equality ignores it).
    What JSON cannot hold is tagged so that a `normalize = "python"` predicate compares it as
    BFCL's `==` does: a dict with a key that is not a string as `{"$map": [[key, value], ...]}`
    (keys stay numbers: `2.0` equals `2`, not `"2"`), a set as `{"$set": [...]}`, a tuple as
    `{"$tuple": [...]}`."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if id(value) in path:
        return None
    inner = (*path, id(value))
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: jsonable(v, inner) for k, v in value.items()}
        return {MAP_TAG: [[jsonable(k, inner), jsonable(v, inner)] for k, v in value.items()]}
    if isinstance(value, list):
        return [jsonable(v, inner) for v in value]
    if isinstance(value, tuple):
        return {TUPLE_TAG: [jsonable(v, inner) for v in value]}
    if isinstance(value, set | frozenset):
        return {SET_TAG: sorted((jsonable(v, inner) for v in value), key=repr)}
    if hasattr(value, "__dict__"):
        return {
            k: jsonable(v, inner)
            for k, v in vars(value).items()
            if not k.startswith("_") and id(v) not in inner
        }
    return str(value)


# Each environment class's methods' default arguments as first seen (see `_fresh_defaults`)
_PRISTINE_DEFAULTS: dict[type, dict[str, tuple[Any, ...]]] = {}


def _fresh_defaults(cls: type) -> None:
    """Give `cls`'s methods their default arguments as first seen. Some are mutable and BFCL's
    methods mutate them (`TwitterAPI.post_tweet(mentions=[])`, then `mention()` extends that
    list): within one process, one environment's calls would change the next one's tweets. A
    per-run server is a fresh process; the importer and the agreement measurement, which run
    many environments in one, restore the defaults before each."""
    saved = _PRISTINE_DEFAULTS.get(cls)
    if saved is None:
        _PRISTINE_DEFAULTS[cls] = {
            name: copy.deepcopy(function.__defaults__)
            for name, function in vars(cls).items()
            if inspect.isfunction(function) and function.__defaults__
        }
        return
    for name, defaults in saved.items():
        getattr(cls, name).__defaults__ = copy.deepcopy(defaults)


class Environment:
    """Fresh instances of an entry's classes, in its initial configuration."""

    def __init__(self, entry: dict[str, Any]) -> None:
        config = importlib.import_module("bfcl_eval.constants.executable_backend_config")
        long_context = "long_context" in entry["id"]
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        for class_name in entry["involved_classes"]:
            module = importlib.import_module(config.CLASS_FILE_PATH_MAPPING[class_name])
            _fresh_defaults(getattr(module, class_name))
            instance = getattr(module, class_name)()
            if class_name not in config.STATELESS_CLASSES:
                initial = copy.deepcopy(entry.get("initial_config", {}).get(class_name, {}))
                instance._load_scenario(initial, long_context=long_context)
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method

    def bind(self, call: Call) -> Call:
        """Positional arguments (`$0`…) named after the method's parameters."""
        method = self.methods.get(call.name)
        if method is None or not any(k.startswith("$") for k in call.arguments):
            return call
        names = list(inspect.signature(method).parameters)
        arguments = {
            (names[int(k[1:])] if k.startswith("$") else k): v for k, v in call.arguments.items()
        }
        return Call(call.name, arguments)

    def execute(self, name: str, arguments: dict[str, Any]) -> str:
        """Call one method as BFCL's executor does; an exception becomes its error text."""
        method = self.methods.get(name)
        try:
            if method is None:
                raise NameError(f"name '{name}' is not defined")
            # the environment keeps (and later mutates) what it is given: a copy, so that a
            # caller's trajectory or ground truth stays as it was
            return result_text(method(**copy.deepcopy(arguments)))
        except Exception as exc:  # noqa: BLE001 - BFCL records any failure as its message
            return f"Error during execution: {exc}"

    def state(self) -> dict[str, Any]:
        """Every class's public attributes, as JSON (what BFCL's state checker compares)."""
        return {name: jsonable(instance) for name, instance in self.instances.items()}
