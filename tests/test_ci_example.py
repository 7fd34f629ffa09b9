"""The GitHub Actions workflow users copy (examples/github-actions) keeps the steps that make it
work: CPU torch before the plugin, a cache with restore-keys, the gate on both events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

WORKFLOW = Path(__file__).parents[1] / "examples" / "github-actions" / "retrieval-gate.yml"


def _steps() -> list[dict[str, Any]]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps: list[dict[str, Any]] = data["jobs"]["gate"]["steps"]
    return steps


def test_cpu_torch_is_installed_before_the_plugin() -> None:
    runs = [step.get("run", "") for step in _steps()]
    torch = next(
        i for i, r in enumerate(runs) if "torch" in r and "download.pytorch.org/whl/cpu" in r
    )
    plugin = next(i for i, r in enumerate(runs) if "pytest-retrieval-gate[all]" in r)
    assert torch < plugin


def test_the_cache_restores_older_entries() -> None:
    (cache,) = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/cache")]
    assert cache["with"]["path"] == ".retrieval-gate-cache"
    assert cache["with"]["restore-keys"].strip() == "rg-${{ runner.os }}-"
    assert cache["with"]["key"].startswith("rg-${{ runner.os }}-")


def test_the_gate_runs_on_pull_requests_and_saves_on_main() -> None:
    gated = {s.get("if"): s["run"] for s in _steps() if "--retrieval-gate" in s.get("run", "")}
    assert "pytest --retrieval-gate -n 2" in gated["github.event_name == 'pull_request'"]
    assert "--rg-save-baseline" in gated["github.event_name == 'push'"]


def completion_check() -> str:
    """The workflow's step that checks the JSON report's completion marker."""
    (check,) = [s["run"] for s in _steps() if "retrieval_gate.report.complete" in s.get("run", "")]
    return str(check)


def test_the_completion_check_follows_every_gate_run_on_a_fresh_report() -> None:
    runs = [str(s.get("run", "")) for s in _steps()]
    check = runs.index(completion_check())
    gates = [i for i, r in enumerate(runs) if "--retrieval-gate" in r]
    assert gates and all(i < check for i in gates)
    # A report left from an earlier run would pass the check for a run that wrote none.
    assert all(runs[i].startswith("rm -f retrieval-gate-report.json && pytest") for i in gates)
    assert completion_check().endswith("retrieval-gate-report.json")


def test_main_uploads_the_history_with_the_baseline_from_a_full_clone() -> None:
    # docs/ci.md: on main, commit retrieval-baseline.json and .retrieval-gate/history/ together
    # (the artifact downloaded and committed), so the artifact must hold both; the baseline-age
    # check counts commits, which a shallow clone does not have.
    (upload,) = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/upload-art")]
    paths = upload["with"]["path"].split()
    assert "retrieval-baseline.json" in paths and ".retrieval-gate/history/" in paths
    assert upload["with"]["include-hidden-files"] is True  # else .retrieval-gate/ is left out
    (checkout,) = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/checkout")]
    assert checkout["with"]["fetch-depth"] == 0


def test_a_pull_request_accepts_its_drop_itself_against_its_target_branch() -> None:
    # docs/ci.md, "Accepting a drop in its pull request": the check reads origin/$GITHUB_BASE_REF
    # (GitHub sets it on pull requests: the gate there names no --rg-base), which a full clone
    # has; the workflow says how a pull request saves its acceptance.
    gated = {s.get("if"): s["run"] for s in _steps() if "--retrieval-gate" in s.get("run", "")}
    assert "--rg-base" not in gated["github.event_name == 'pull_request'"]
    (checkout,) = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/checkout")]
    assert checkout["with"]["fetch-depth"] == 0
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "pytest --retrieval-gate --rg-save-baseline --rg-base origin/main" in text
    assert "required check" in text
