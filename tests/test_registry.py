"""The one registry helper every registry uses (registry.py): loaded on the first look-up and
once, built-ins before entry points before ``register``; each form an entry point may take; a
name taken twice; a look-up while loading."""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pytest

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.registry import Registry

GROUP = "retrieval_gate.tests"


@dataclass(frozen=True)
class Thing:
    name: str


class ThingError(RetrievalGateError):
    pass


class _EntryPoint:
    def __init__(self, name: str, obj: object) -> None:
        self.name, self.value, self._obj = name, f"plugin_{name}", obj

    def load(self) -> object:
        if isinstance(self._obj, BaseException):
            raise self._obj
        return self._obj


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """Install these entry points in GROUP; returns the groups looked up, in order."""
    seen: list[str] = []
    points: list[_EntryPoint] = []

    def fake_entry_points(*, group: str) -> list[_EntryPoint]:
        seen.append(group)
        return list(points) if group == GROUP else []

    monkeypatch.setattr("importlib.metadata.entry_points", fake_entry_points)

    def install(*found: _EntryPoint) -> list[str]:
        points.extend(found)
        return seen

    return install


def _module(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def _registry(
    builtins: Callable[[], Iterable[types.ModuleType]], **kwargs: object
) -> Registry[Thing]:
    options: dict[str, object] = {
        "kind": Thing,
        "attr": "THING",
        "group": GROUP,
        "builtins": builtins,
        "name": lambda thing: thing.name,
        "error": ThingError,
    }
    options.update(kwargs)
    return Registry("thing", **options)  # type: ignore[arg-type]


def test_loaded_on_the_first_look_up_once_built_ins_first(
    installed: Callable[..., list[str]],
) -> None:
    built: list[str] = []

    def builtins() -> list[types.ModuleType]:
        built.append("loaded")
        return [_module("pkg.one", THING=Thing("one")), _module("pkg.two", THING=Thing("two"))]

    seen = installed(_EntryPoint("three", Thing("three")))
    registry = _registry(builtins)
    assert (built, seen) == ([], [])  # nothing until asked
    registry.register(Thing("four"))
    assert list(registry) == ["one", "two", "three", "four"]
    assert "three" in registry and registry["three"] == Thing("three")
    assert (built, seen) == (["loaded"], [GROUP])  # once
    assert registry.source_of("one") == "pkg.one"
    assert registry.source_of("four") == "register()"
    del registry["four"]
    assert list(registry) == ["one", "two", "three"]


class Made(Thing):
    def __init__(self) -> None:
        super().__init__("made")


def test_every_form_an_entry_point_may_take(installed: Callable[..., list[str]]) -> None:
    registry = _registry(list)

    def registers_itself() -> None:
        registry.register(Thing("self-registered"))

    installed(
        _EntryPoint("thing", Thing("thing")),
        _EntryPoint("several", [Thing("a"), Thing("b")]),
        _EntryPoint("module", _module("plugin_module", THING=(Thing("c"),))),
        _EntryPoint("class", Made),
        _EntryPoint("returns", lambda: Thing("returned")),
        _EntryPoint("itself", registers_itself),
    )
    assert list(registry) == ["thing", "a", "b", "c", "made", "returned", "self-registered"]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (42, r"entry point 'junk' \(plugin_junk\) of group retrieval_gate.tests gave 42"),
        (ImportError("no module named 'x'"), r"entry point 'junk' .* cannot be loaded"),
        # A module without THING: most likely a wrong name in the entry point.
        (_module("plugin_junk"), r"entry point 'junk' .* gave None"),
    ],
)
def test_a_bad_entry_point_is_named_in_the_registry_s_error(
    installed: Callable[..., list[str]], obj: object, message: str
) -> None:
    installed(_EntryPoint("junk", obj))
    with pytest.raises(ThingError, match=message):
        list(_registry(list))


def test_a_module_may_register_itself_where_the_registry_says_so(
    installed: Callable[..., list[str]],
) -> None:
    installed(_EntryPoint("module", _module("plugin_module")))
    assert list(_registry(list, modules_register=True)) == []


def test_a_name_taken_twice_is_refused_or_replaced(installed: Callable[..., list[str]]) -> None:
    builtins = lambda: [_module("pkg.one", THING=Thing("one"))]  # noqa: E731
    strict = _registry(builtins)
    strict.register(Thing("one"), source="x")  # the same thing again: nothing to refuse
    with pytest.raises(ThingError, match=r"x: thing 'one' is already registered \(pkg.one\)"):
        strict.register(Made(), name="one", source="x")
    lenient = _registry(builtins, replace=True)
    lenient.register(Made(), name="one")
    assert lenient["one"] == Made()


def test_a_look_up_from_another_thread_waits_for_the_loading(
    installed: Callable[..., list[str]],
) -> None:
    started, release = threading.Event(), threading.Event()

    def builtins() -> Iterator[types.ModuleType]:
        yield _module("pkg.one", THING=Thing("one"))
        started.set()
        release.wait()
        yield _module("pkg.two", THING=Thing("two"))

    registry = _registry(builtins)
    seen: list[list[str]] = []
    loader = threading.Thread(target=lambda: registry.load())
    reader = threading.Thread(target=lambda: seen.append(list(registry)))
    loader.start()
    started.wait()
    reader.start()  # asks while "two" is not loaded yet: it must wait, not see "one" alone
    time.sleep(0.05)  # lets the reader reach the registry before the loading goes on
    release.set()
    loader.join()
    reader.join()
    assert seen == [["one", "two"]]
