"""errors.py: whose code raised (errors.origin_of) decides whether a failure is a library's one
line (LibraryError) or the plugin's own bug; the user's errors are said as they are."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retrieval_gate.errors import LibraryError, Origin, RunError, library_error, origin_of

from .conftest import raising_in


def _raised(function: Any, *args: Any) -> BaseException:
    try:
        function(*args)
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def _via(module: str, inner: Any) -> Any:
    """A function of ``module`` (its frame's globals name it) that calls ``inner``."""
    namespace: dict[str, Any] = {"__name__": module, "inner": inner}
    exec("def call(*args, **kwargs):\n    return inner(*args, **kwargs)\n", namespace)
    return namespace["call"]


def test_raised_in_the_plugins_own_code_is_the_plugins() -> None:
    bug = raising_in("retrieval_gate.runs.evaluate", KeyError("P@1"))
    assert origin_of(_raised(bug)) is None
    assert library_error(_raised(bug), "running s x m") is None


def test_raised_in_a_library_the_plugin_called_is_that_librarys() -> None:
    library = raising_in("model2vec.model", IndexError("token id 70000 out of range"))
    plugin = _via("retrieval_gate.embed.model2vec", library)
    assert origin_of(_raised(plugin)) == Origin(library="model2vec", raised_in="model2vec")


def test_the_library_called_is_named_and_the_one_that_raised_beside_it() -> None:
    # sentence-transformers' encode runs torch, which raises: the user configured the first.
    torch = raising_in("torch.nn.functional", IndexError("index out of range in self"))
    plugin = _via(
        "retrieval_gate.embed.sentence_transformers", _via("sentence_transformers", torch)
    )
    error = library_error(
        _raised(plugin), "embedding document 'd7'", path="pyproject.toml", entry="system.minilm"
    )
    assert isinstance(error, LibraryError) and isinstance(error, RunError)
    assert str(error) == (
        "pyproject.toml [system.minilm]: sentence-transformers failed while embedding document "
        "'d7' (raised in torch): IndexError: index out of range in self"
    )
    assert isinstance(error.__cause__, IndexError)
    assert error.traceback is not None and "torch.nn" not in error.traceback.splitlines()[0]
    assert error.traceback.endswith("IndexError: index out of range in self\n")


def _wrapping(module: str, inner: Any) -> Any:
    """A decorator's wrapper defined in ``module``, around ``inner`` (held in its closure)."""
    namespace: dict[str, Any] = {"__name__": module}
    exec(
        "def decorate(inner):\n"
        "    def wrapper(*args, **kwargs):\n"
        "        return inner(*args, **kwargs)\n"
        "    return wrapper\n",
        namespace,
    )
    return namespace["decorate"](inner)


def test_a_decorator_of_another_package_is_not_the_library_called() -> None:
    # torch's no_grad wraps sentence-transformers' encode: the first frame below the plugin is
    # torch's, handing straight on to sentence-transformers.
    inner = raising_in("transformers.models.bert", ValueError("bad input"))
    st = _via("sentence_transformers.model", inner)
    plugin = _via("retrieval_gate.embed.sentence_transformers", _wrapping("torch.utils", st))
    assert origin_of(_raised(plugin)) == Origin("sentence-transformers", "transformers")


def test_the_standard_library_and_numpy_under_the_plugin_are_the_plugins() -> None:
    # The plugin calling json or numpy wrongly is its own bug, whatever frame raised last.
    plugin = _via("retrieval_gate.files.structured", json.loads)
    assert origin_of(_raised(plugin, "{")) is None
    import numpy as np

    plugin = _via("retrieval_gate.index.exact", np.stack)
    assert origin_of(_raised(plugin, [])) is None


def test_an_extension_called_straight_from_the_plugin_is_known_by_its_exception_class() -> None:
    # No frame of its own (a C or Rust function): its library's exception class names it.
    fail = type("Fail", (Exception,), {"__module__": "onnxruntime.capi.state"})
    plugin = _via("retrieval_gate.embed.onnx", raising_in("builtins", fail("INVALID_ARGUMENT")))
    assert origin_of(_raised(plugin)) == Origin("onnxruntime", "onnxruntime")


def test_an_extension_raising_a_plain_exception_is_its_library_inside_extension_call() -> None:
    # tokenizers' Rust raises builtins' Exception: no frame, no class of its own to name it.
    from retrieval_gate.errors import extension_call

    # The plugin's frame (embed/onnx.py) calling the extension inside extension_call.
    rust = raising_in("builtins", Exception("WordLevel error: Missing [UNK] token"))
    namespace: dict[str, Any] = {"__name__": "retrieval_gate.embed.onnx", "rust": rust}
    namespace["extension_call"] = extension_call
    exec("def run():\n    with extension_call('tokenizers'):\n        rust()\n", namespace)
    assert origin_of(_raised(namespace["run"])) == Origin("tokenizers", "tokenizers")
    bare = _via("retrieval_gate.embed.onnx", raising_in("builtins", Exception("WordLevel")))
    assert origin_of(_raised(bare)) is None  # outside it: the plugin's, as before


def test_the_users_errors_and_warnings_made_errors_are_never_a_librarys() -> None:
    user = raising_in("chromadb.api", RunError("already one line"))
    assert library_error(_raised(_via("retrieval_gate.index.chroma", user)), "x") is None
    warned = raising_in("chromadb.api", DeprecationWarning("old"))
    assert library_error(_raised(_via("retrieval_gate.index.chroma", warned)), "x") is None


def test_the_teams_own_module_is_named_by_itself() -> None:
    # A plug-in embedder in the team's own module (no installed package holds it).
    team = raising_in("team_embedder_module", ValueError("no vector for you"))
    error = library_error(
        _raised(_via("retrieval_gate.embed.checks", team)), "embedding query 'q1'"
    )
    assert str(error) == (
        "team_embedder_module failed while embedding query 'q1': ValueError: no vector for you"
    )


class _ContextBound:
    """A proxy that raises on any attribute it lacks outside its context (werkzeug's
    ``LocalProxy``, a lazily connected client) rather than an AttributeError."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("working outside of application context")


def test_a_library_frame_holding_an_object_that_raises_on_any_attribute_is_still_named() -> None:
    # Telling a decorator from the library called reads each frame's locals; one of them
    # raising on a lookup must not replace the library's error with its own.
    namespace: dict[str, Any] = {
        "__name__": "flask_search.client",
        "inner": raising_in("flask_search.model", ValueError("empty query")),
        "_ContextBound": _ContextBound,
    }
    exec(
        "def call(*args, **kwargs):\n"
        "    proxy = _ContextBound()\n"
        "    return inner(*args, **kwargs)\n",
        namespace,
    )
    plugin = _via("retrieval_gate.embed.checks", namespace["call"])
    error = library_error(_raised(plugin), "embedding query 'q1'")
    assert str(error) == ("flask_search failed while embedding query 'q1': ValueError: empty query")


def test_a_namespace_package_is_named_by_the_distribution_that_holds_the_module() -> None:
    # google.* is shared by protobuf and googleapis-common-protos (opentelemetry's, beside
    # chromadb): the one holding google.protobuf is named, not the first listed.
    pytest.importorskip("google.protobuf")
    library = raising_in("google.protobuf.message", ValueError("Error parsing message"))
    plugin = _via("retrieval_gate.embed.onnx", library)
    assert origin_of(_raised(plugin)) == Origin(library="protobuf", raised_in="protobuf")
