"""One registry of named things, loaded lazily once: the built-ins, then the plugins of an
entry-point group, then what a package registers itself.

Every registry of the plugin is one :class:`Registry`: metrics, suite kinds, system kinds and
stages, report writers, baseline stores, embedders and indexes. Each says what its things are
(``kind``), how a module holds its own (``attr``: ``KIND``, ``WRITER``, ``BACKEND`` ...), where
its built-ins live, how a thing is named, and its own check of a thing; the loading is here,
once: on the first look-up (so importing a registry's package loads nothing), built-ins first,
then each entry point of the group (loaded as the user's code, ``usercode.plugins``), and a
plugin that fails to load is one line in the registry's own error class.

An entry point may name a thing, a module with ``attr`` (one thing or a sequence of them), a
module that registers its things when imported, a class of things (constructed), or a function
that registers things itself or returns them.
"""

from __future__ import annotations

import importlib
import operator
import pkgutil
import threading
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextvars import ContextVar
from types import ModuleType
from typing import Any, Generic, Literal, TypeVar, overload

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.usercode import Plugin, PluginLoadError, plugins

__all__ = ["Registry", "package_modules"]

T = TypeVar("T")
D = TypeVar("D")

#: The registries this context is loading. The user's code runs in a thread of its own with
#: the caller's context (usercode.py), so a plugin that registers itself while its registry
#: loads is seen as part of that loading rather than waiting for it (which would never end).
_LOADING: ContextVar[frozenset[int]] = ContextVar("retrieval_gate_loading", default=frozenset())


def package_modules(package: str, attr: str) -> list[ModuleType]:
    """The modules of ``package`` (not those whose name starts with ``_``) that have ``attr``,
    ordered by their ``ORDER`` (default 50), then by name: a package's built-ins without a
    hand-kept list."""
    found = importlib.import_module(package)
    modules = [
        importlib.import_module(f"{package}.{info.name}")
        for info in pkgutil.iter_modules(found.__path__)
        if not info.name.startswith("_")
    ]
    return sorted(
        (m for m in modules if hasattr(m, attr)),
        key=lambda m: (getattr(m, "ORDER", 50), m.__name__),
    )


def _from(source: str, dist: str) -> str:
    return f"{source}, distribution {dist}" if dist else source


class Registry(MutableMapping[str, T], Generic[T]):
    """Things of one sort by name, in registration order, loaded on the first look-up.

    ``what`` names the sort in messages ("suite kind"); ``kind`` is the class of its things;
    ``attr`` the module attribute holding a module's thing or things; ``group`` the entry-point
    group (None: none), ``aliases`` its older names, whose entry points are read too; ``builtins`` returns the modules of the built-ins, in order (see
    :func:`package_modules`); ``name`` gives a thing's name; ``admit(thing, source)`` checks a
    thing before it is added and returns what is stored (raising the registry's error to refuse
    it; ``source`` says where it came from: a module's name, an entry point, ``register()``);
    ``replace``: whether a name taken again replaces the first thing (else refused, unless it is
    the same thing again); ``"builtins"``: only a built-in's name may be taken again (a plugin
    overrides a built-in; two plugins of one name are refused, naming both); ``error``: the registry's error class; ``from_plugin`` replaces the
    default reading of an entry point (the baseline stores' name is the entry point's);
    ``modules_register``: an entry point may name a module without ``attr`` that registers its
    things when imported (elsewhere such a module is an error: most likely a wrong name).
    """

    def __init__(
        self,
        what: str,
        *,
        kind: type[Any] | tuple[type[Any], ...],
        attr: str,
        group: str | None,
        aliases: tuple[str, ...] = (),
        builtins: Callable[[], Iterable[ModuleType]],
        name: Callable[[T], str] | None = None,
        error: type[RetrievalGateError] | Callable[[str], Exception],
        admit: Callable[[T, str], T] | None = None,
        replace: bool | Literal["builtins"] = False,
        from_plugin: Callable[[Registry[T], Plugin], None] | None = None,
        modules_register: bool = False,
    ) -> None:
        self.what = what
        self.kind = kind
        self.attr = attr
        self.group = group
        self.aliases = aliases  # older names of the group, whose entry points are read too
        self._builtins = builtins
        # Most things carry their name: ``thing.name`` unless a registry says otherwise.
        self._name: Callable[[T], str] = name or operator.attrgetter("name")
        self._error = error
        self._admit = admit
        self._replace = replace
        self._from_plugin = from_plugin
        self._modules_register = modules_register
        self._things: dict[str, T] = {}
        self._sources: dict[str, str] = {}
        self._dists: dict[str, str] = {}  # the distribution of an entry point's thing
        self._builtin: set[str] = set()  # names a built-in holds
        self._loaded = False
        self._load_lock = threading.RLock()  # held while loading: other threads wait
        self._lock = threading.Lock()  # held while the table changes, briefly

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Built-ins, then the entry points; once per process. A look-up from inside the
        loading (a plugin that asks the registry, or registers, while it loads) sees what is
        loaded so far; another thread waits for the loading to finish."""
        if self._loaded or id(self) in _LOADING.get():
            return
        with self._load_lock:
            if self._loaded:
                return
            token = _LOADING.set(_LOADING.get() | {id(self)})
            try:
                for module in self._builtins():
                    for thing in self._things_of(getattr(module, self.attr), module.__name__):
                        self._add(thing, module.__name__)
                        self._builtin.add(self._name(thing))
                if self.group is not None:
                    try:
                        for group in (self.group, *self.aliases):
                            for plugin in plugins(group):
                                self._load_plugin(plugin)
                    except PluginLoadError as exc:  # a broken third-party plugin: say which
                        raise self._error(exc.message) from None
            finally:
                # Loaded even when a plugin failed: its error is raised once, here.
                self._loaded = True
                _LOADING.reset(token)

    def _load_plugin(self, plugin: Plugin) -> None:
        if self._from_plugin is not None:
            self._from_plugin(self, plugin)
            return
        obj = plugin.obj
        if isinstance(obj, type) and issubclass(obj, self.kind):
            obj = plugin.call()  # a class of things: the plugin's own constructor
        if isinstance(obj, ModuleType):
            # A module holding its things, or one that registered them when imported.
            held = getattr(obj, self.attr, None)
            if held is None and self._modules_register:
                return
            for thing in self._things_of(held, plugin.source):
                self._add(thing, plugin.source, dist=plugin.dist)
            return
        if not isinstance(obj, self.kind) and callable(obj):
            obj = plugin.call()  # a function that registers its things itself or returns them
            if obj is None:
                return
        for thing in self._things_of(obj, plugin.source):
            self._add(thing, plugin.source, dist=plugin.dist)

    def _things_of(self, obj: Any, source: str) -> list[T]:
        if isinstance(obj, self.kind):
            return [obj]
        if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, type)):
            things = list(obj)
            if all(isinstance(thing, self.kind) for thing in things):
                return things
        raise self._error(
            f"{source} gave {obj!r}: neither a {self.what}, a sequence of them, a module with "
            f"{self.attr} nor a function"
        )

    # -- registering ---------------------------------------------------------------------------

    def register(self, thing: T, *, name: str | None = None, source: str = "register()") -> T:
        """Add ``thing`` after the built-ins and the entry points (loaded first); returns what
        was stored (the registry's ``admit`` may wrap it)."""
        self.load()
        return self._add(thing, source, name)

    def _add(self, thing: T, source: str, name: str | None = None, *, dist: str = "") -> T:
        with self._lock:
            return self._add_locked(thing, source, name, dist)

    def _add_locked(self, thing: T, source: str, name: str | None, dist: str) -> T:
        if not isinstance(thing, self.kind):
            raise self._error(f"{source} gave {thing!r}, not a {self.what}")
        key = self._name(thing) if name is None else name
        if not key:
            raise self._error(f"{source} gave {thing!r}, a {self.what} without a name")
        owner = self._things.get(key)
        replaces = self._replace is True or (self._replace == "builtins" and key in self._builtin)
        if owner is not None and not replaces:
            if owner is thing or owner == thing:
                return owner  # registered already (a module's KIND that an entry point names)
            raise self._error(
                f"{_from(source, dist)}: {self.what} {key!r} is already registered "
                f"({self.described(key)}); uninstall one of them"
                if self._replace == "builtins"
                else f"{source}: {self.what} {key!r} is already registered ({self._sources[key]})"
            )
        stored = self._admit(thing, source) if self._admit is not None else thing
        self._things[key] = stored
        self._sources[key] = source
        self._dists[key] = dist
        self._builtin.discard(key)  # a plugin's now: a second plugin may not take it again
        return stored

    def source_of(self, name: str) -> str:
        """Where the thing of ``name`` came from: its module, entry point or ``register()``."""
        self.load()
        return self._sources[name]

    def described(self, name: str) -> str:
        """:meth:`source_of`, with the distribution an entry point came from when known."""
        self.load()
        return _from(self._sources[name], self._dists.get(name, ""))

    def is_builtin(self, name: str) -> bool:
        """Whether the thing of ``name`` is a built-in (not replaced by a plugin)."""
        self.load()
        return name in self._builtin

    # -- the mapping -------------------------------------------------------------------------

    def __getitem__(self, name: str) -> T:
        self.load()
        return self._things[name]

    @overload
    def get(self, name: str, /) -> T | None: ...

    @overload
    def get(self, name: str, /, default: T | D) -> T | D: ...

    def get(self, name: str, /, default: Any = None) -> Any:
        """The thing of ``name``, else ``default``: one dictionary look-up (``Mapping.get``
        raised and caught a KeyError for every miss, and the ledger asks per stored value)."""
        self.load()
        return self._things.get(name, default)

    def __setitem__(self, name: str, thing: T) -> None:
        self.register(thing, name=name)

    def __delitem__(self, name: str) -> None:
        """Forget a thing (a test's own, when it is done)."""
        self.load()
        with self._lock:
            del self._things[name]
            del self._sources[name]
            self._dists.pop(name, None)
            self._builtin.discard(name)

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(list(self._things))

    def __len__(self) -> int:
        self.load()
        return len(self._things)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._things

    def __repr__(self) -> str:
        state = ", ".join(self._things) if self._loaded else "not loaded"
        return f"<{self.what} registry: {state}>"
