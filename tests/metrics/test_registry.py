"""The registry: registration, entry points, bounds, aggregation and definition versions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from retrieval_gate.errors import SuiteError, UnknownMetricError
from retrieval_gate.metrics import (
    REGISTRY,
    Aggregation,
    Kernel,
    Metric,
    MetricFamily,
    MetricRegistryError,
    compute,
    compute_latency,
    evaluate,
    judge,
    latency_stats,
    metric_versions,
    parse_metric,
    register_metric,
    registry,
)
from retrieval_gate.suites.units import threshold

FloatArray = npt.NDArray[np.float64]


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Registrations made by a test vanish after it: the registry is process-wide."""
    families = registry._REGISTRY
    families.load()
    monkeypatch.setattr(families, "_things", dict(families._things))
    monkeypatch.setattr(families, "_sources", dict(families._sources))
    monkeypatch.setattr(registry, "_aliases", dict(registry._aliases))
    yield


def _retrieved_relevant(kernel: Kernel, k: int | None) -> FloatArray:
    return kernel.at(kernel.cum_relevant, k)


def _missed_relevant(kernel: Kernel, k: int | None) -> FloatArray:
    return kernel.n_rel - kernel.at(kernel.cum_relevant, k)


def _family(name: str, **overrides: Any) -> MetricFamily:
    fields: dict[str, Any] = {
        "name": name,
        "title": "test family",
        "description": "Relevant documents retrieved in the top k.",
        "compute": _retrieved_relevant,
        "bounds": (0.0, None),
    }
    return MetricFamily(**{**fields, **overrides})


def test_register_metric_makes_a_family_computable(scratch_registry: None) -> None:
    register_metric(_family("TPk", aliases=("true_positives",)))
    assert "TPk" in REGISTRY
    assert parse_metric("true_positives@2") == Metric("TPk", 2)
    # RUN ranks x, a, c, b: relevant a (rank 2) and b (rank 4) of the 3 relevant a, b, d.
    result = evaluate(
        {"q": {"a": 1, "b": 1, "d": 1}},
        {"q": {"x": 4.0, "a": 3.0, "c": 2.0, "b": 1.0}},
        ["TPk@2", "TPk"],
    )
    assert result == {"q": {"TPk@2": 1.0, "TPk": 2.0}}
    # Unknown-metric messages list the registry, now including the new family.
    with pytest.raises(UnknownMetricError, match=r"known: P@k, .*, TPk@k, TPk$"):
        parse_metric("nope")


@pytest.mark.parametrize("spelling", ["nDCG", "NDCG", "precision"])
def test_duplicate_names_are_an_error(scratch_registry: None, spelling: str) -> None:
    with pytest.raises(MetricRegistryError, match=f"'{spelling}' .* already taken"):
        register_metric(
            _family("Mine", aliases=(spelling,)) if spelling != "nDCG" else _family(spelling)
        )


def test_a_family_that_needs_but_takes_no_cutoff_is_refused(scratch_registry: None) -> None:
    with pytest.raises(MetricRegistryError, match="needs a cutoff but takes none"):
        register_metric(_family("Odd", needs_k=True, takes_k=False))


class _EntryPoint:
    def __init__(self, name: str, obj: object) -> None:
        self.name, self.value, self._obj = name, f"plugin:{name}", obj

    def load(self) -> object:
        if isinstance(self._obj, BaseException):
            raise self._obj
        return self._obj


def _reload_with(monkeypatch: pytest.MonkeyPatch, *points: _EntryPoint) -> list[str]:
    """Start the registry over, as in a fresh process, with these entry points installed."""
    families = registry._REGISTRY
    monkeypatch.setattr(families, "_things", {})
    monkeypatch.setattr(families, "_sources", {})
    monkeypatch.setattr(families, "_loaded", False)
    monkeypatch.setattr(registry, "_aliases", {})
    seen: list[str] = []

    def fake_entry_points(*, group: str) -> list[_EntryPoint]:
        seen.append(group)
        return list(points)

    # Every registry loads its entry points through usercode.plugins, which looks them up here.
    monkeypatch.setattr("importlib.metadata.entry_points", fake_entry_points)
    return seen


def test_entry_points_are_loaded_lazily_on_first_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _reload_with(
        monkeypatch,
        _EntryPoint("one", _family("EP1")),
        _EntryPoint("several", lambda: [_family("EP2"), _family("EP3", takes_k=False)]),
    )
    assert seen == []
    assert parse_metric("ep3") == Metric("EP3")
    assert seen == ["retrieval_gate.metrics"]
    names = list(REGISTRY)
    # Built-ins first (trec_eval families first, latency last), then the plugins.
    assert names[:7] == ["P", "R", "MRR", "nDCG", "MAP", "Hit", "R-Prec"]
    assert names[-3:] == ["EP1", "EP2", "EP3"]
    assert seen == ["retrieval_gate.metrics"]  # loaded once
    assert [f.name for f in registry.builtin_families()][-1] == "latency_mean_ms"


def test_entry_point_errors_name_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    _reload_with(monkeypatch, _EntryPoint("broken", ImportError("no module named 'x'")))
    with pytest.raises(MetricRegistryError, match=r"entry point 'broken' .* cannot be loaded"):
        parse_metric("P@1")
    _reload_with(monkeypatch, _EntryPoint("clash", _family("P")))
    with pytest.raises(MetricRegistryError, match="'P' of P is already taken by P"):
        parse_metric("P@1")
    _reload_with(monkeypatch, _EntryPoint("junk", 42))
    with pytest.raises(MetricRegistryError, match=r"entry point 'junk' .* gave 42"):
        parse_metric("P@1")


def test_bounds_and_floor_checks(scratch_registry: None) -> None:
    register_metric(_family("corr", takes_k=False, bounds=(-1.0, 1.0)))
    path = Path("suite.yaml")
    assert Metric("nDCG", 5).bounds == (0.0, 1.0)
    assert Metric("latency_p95_ms").bounds == (0.0, None)
    assert threshold(-0.5, Metric("corr"), path, "gates.corr") == -0.5
    with pytest.raises(SuiteError, match=r"corr floor must be within \[-1, 1\], got 1.5"):
        threshold(1.5, Metric("corr"), path, "gates.corr")
    with pytest.raises(SuiteError, match=r"nDCG@5 floor must be within \[0, 1\], got 1.5"):
        threshold(1.5, Metric("nDCG", 5), path, "gates.nDCG@5")
    register_metric(_family("count"))  # bounds (0, None): any floor >= 0
    assert threshold(12, Metric("count", 10), path, "gates.count@10") == 12.0
    with pytest.raises(SuiteError, match=r"count@10 floor must be within \[0, inf\), got -1"):
        threshold(-1, Metric("count", 10), path, "gates.count@10")
    with pytest.raises(SuiteError, match="latency_p95_ms ceiling must be > 0 ms, got 0"):
        threshold(0, Metric("latency_p95_ms"), path, "gates.latency_p95_ms")


def test_mean_aggregation() -> None:
    assert Metric("P", 5).aggregate(np.array([0.2, 0.4, 0.0])) == pytest.approx(0.6 / 3, abs=1e-15)
    assert Metric("P", 5).aggregate(np.array([])) == 0.0


def test_micro_aggregation_reads_component_series(scratch_registry: None) -> None:
    # Micro recall: sum of retrieved relevant over sum of (retrieved + missed) relevant, across
    # queries, not the mean of per-query recalls. Components are families of their own.
    register_metric(_family("TPx"))
    register_metric(_family("FNx", compute=_missed_relevant))
    register_metric(
        _family(
            "Rmicro",
            compute=_retrieved_relevant,
            bounds=(0.0, 1.0),
            aggregation=Aggregation(
                "micro", lambda _v, tp, fn: float(tp.sum() / (tp.sum() + fn.sum())), ("TPx", "FNx")
            ),
        )
    )
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1, "d": 1}}
    rankings = [["a"], ["b", "x"]]
    judged = judge(qrels, ["q1", "q2"], rankings)
    metrics = [Metric("Rmicro", 2), Metric("TPx", 2), Metric("FNx", 2)]
    values = compute(judged, metrics)
    assert values["TPx@2"].tolist() == [1.0, 1.0]
    assert values["FNx@2"].tolist() == [0.0, 2.0]
    parts = {"TPx": values["TPx@2"], "FNx": values["FNx@2"]}
    # (1 + 1) / (1 + 1 + 0 + 2) = 2/4, where the mean of per-query recalls is (1 + 1/3) / 2.
    assert Metric("Rmicro", 2).aggregate(values["Rmicro@2"], parts) == 2 / 4
    with pytest.raises(ValueError, match="aggregating Rmicro@2 needs the per-query values of TPx"):
        Metric("Rmicro", 2).aggregate(values["Rmicro@2"])


def test_latency_through_the_registry() -> None:
    times = [4.0, 1.0, 3.0, 2.0]
    p95 = Metric("latency_p95_ms")
    assert compute_latency(p95, times).tolist() == times
    # sorted 1 2 3 4; position 0.95 * 3 = 2.85 -> 3 + 0.85 * (4 - 3)
    assert p95.aggregate(compute_latency(p95, times)) == pytest.approx(3.85, abs=1e-12)
    assert latency_stats(times)["p95"] == p95.aggregate(compute_latency(p95, times))
    with pytest.raises(ValueError, match="P@5 is not a latency metric"):
        compute_latency(Metric("P", 5), times)


def test_metric_versions() -> None:
    versions = metric_versions(["ndcg@10", "P@5", Metric("R-Prec"), "latency_p95_ms", "nDCG@10"])
    assert versions == {
        "P@5": "P/trec_eval-10/1",
        "R-Prec": "R-Prec/trec_eval-10/1",
        "latency_p95_ms": "latency_p95_ms/numpy-linear/1",
        "nDCG@10": "nDCG/trec_eval-10/1",
    }
    assert list(versions) == sorted(versions)
    with pytest.raises(UnknownMetricError, match="unknown metric 'bogus'"):
        metric_versions(["bogus"])


def test_metric_pickles_as_family_and_cutoff() -> None:
    import pickle

    metric = Metric("nDCG", 10)
    assert pickle.loads(pickle.dumps(metric)) == metric
    assert pickle.loads(pickle.dumps(metric)).spec is REGISTRY["nDCG"]


class _Halt(BaseException):
    """What a plugin might raise that is no Exception (as KeyboardInterrupt is not)."""


def test_a_plugin_that_exits_or_raises_a_base_exception_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _reload_with(monkeypatch, _EntryPoint("exits", SystemExit(2)))
    with pytest.raises(
        MetricRegistryError, match=r"entry point 'exits' .* cannot be loaded: SystemExit: 2$"
    ):
        parse_metric("P@1")


def _compute_raising(kernel: Kernel, k: int | None) -> FloatArray:
    raise _Halt("plugin gave up")


def _compute_strings(kernel: Kernel, k: int | None) -> Any:
    return ["1.0"] * len(kernel.n_rel)


def _compute_nan(kernel: Kernel, k: int | None) -> FloatArray:
    return np.full(len(kernel.n_rel), np.nan)


@pytest.mark.parametrize(
    ("compute", "line"),
    [
        (_compute_raising, r"metric Bad \(register_metric\(\)\) raised _Halt: plugin gave up"),
        (
            _compute_nan,
            r"metric Bad \(register_metric\(\)\) returned ndarray .*; expected one finite",
        ),
    ],
    ids=["base-exception", "nan"],
)
def test_a_plugin_metric_failing_is_the_users_one_line(
    scratch_registry: None, compute: Any, line: str
) -> None:
    from retrieval_gate.errors import RunError

    register_metric(_family("Bad", compute=compute))
    with pytest.raises(RunError, match=line):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["Bad@1"])


def test_a_plugin_metric_returning_text_is_refused(scratch_registry: None) -> None:
    from retrieval_gate.errors import RunError

    # numpy would read "1.0" as 1.0 when asked for floats: text is refused where it enters.
    register_metric(_family("Text", compute=_compute_strings))
    with pytest.raises(RunError, match=r"metric Text .* returned list .*expected one finite"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["Text@1"])
