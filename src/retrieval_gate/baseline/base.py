"""The baseline of a pull request's target branch, read from git (docs/ci.md, "Accepting a drop
in its pull request").

A pull request that saves the baseline carries its acceptance, as a snapshot tool's update is a
diff the reviewer approves. To say what it accepts, the gate reads the target branch's baseline
file as git holds it (``git show REF:path``, through :func:`~.provenance.show_file`: bounded in
time and size) and parses its bytes with the baseline's own reader (:func:`~.head.parse_baseline`).
The ref is ``--rg-base REF``, else ``origin/$GITHUB_BASE_REF`` in a GitHub pull-request run.
What keeps it from being read (a shallow clone, a ref this clone lacks, no git, a corrupt file)
is one line saying what to do; the gate goes on without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retrieval_gate.baseline.head import Baseline, BaselineError, parse_baseline
from retrieval_gate.baseline.provenance import GitFileError, show_file

#: The CI variable naming a GitHub pull request's target branch (set in pull-request runs only).
BASE_VARIABLE = "GITHUB_BASE_REF"


@dataclass(frozen=True)
class BaseHead:
    """The target branch's baseline: ``ref`` as compared (``origin/main``), ``given`` how it was
    named (``--rg-base origin/main``, ``GITHUB_BASE_REF=main``), the ``commit`` it names, the
    ``baseline`` found there (None when there is none, or it could not be read) and
    ``problem``: the one line that says why not, and what to fetch."""

    ref: str
    given: str
    commit: str | None = None
    baseline: Baseline | None = None
    problem: str | None = None

    @property
    def short(self) -> str:
        return f"{self.ref} ({self.commit[:7]})" if self.commit else self.ref


def base_ref(
    option: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """(the ref to compare with, how it was named): ``--rg-base`` as given, else
    ``origin/<GITHUB_BASE_REF>``; None when neither names one."""
    if option:
        return option, f"--rg-base {option}"
    branch = (os.environ if environ is None else environ).get(BASE_VARIABLE, "").strip()
    if branch:
        return f"origin/{branch}", f"{BASE_VARIABLE}={branch}"
    return None


def read_base(root: Path, head: Path, ref: str, given: str, *, max_bytes: int | None) -> BaseHead:
    """The baseline file ``head`` (this checkout's) as ``ref`` holds it; every failure is the
    returned :class:`BaseHead`'s one ``problem`` line."""
    top = _top(root)
    if top is None:
        return BaseHead(
            ref, given, problem=_cannot(ref, given, f"{root} is not in a git repository")
        )
    try:
        # The file as git tracks it: a link is its own entry (git gives its text, not its
        # target's), so only its folder is resolved.
        relative = (head.parent.resolve() / head.name).relative_to(top).as_posix()
    except ValueError:
        return BaseHead(
            ref,
            given,
            problem=_cannot(ref, given, f"the baseline {head} is outside the repository"),
        )
    try:
        commit, raw = show_file(top, ref, relative, max_bytes=max_bytes)
    except GitFileError as exc:
        if exc.kind == "missing":
            # A target branch without a baseline yet: every run of this one is new there.
            said = (
                f"{ref} ({(exc.commit or '')[:7]}) has no {relative}: no baseline to compare with"
            )
            return BaseHead(ref, given, commit=exc.commit, problem=said)
        return BaseHead(ref, given, commit=exc.commit, problem=_cannot(ref, given, _why(exc, ref)))
    where = f"{ref}:{relative}"
    try:
        found = parse_baseline(raw, where, advice=f"the baseline of {ref} is {ref}'s to mend")
    except BaselineError as exc:
        return BaseHead(ref, given, commit=commit, problem=_cannot(ref, given, exc.format()))
    return BaseHead(ref, given, commit=commit, baseline=found)


def _cannot(ref: str, given: str, why: str) -> str:
    return (
        f"cannot read the baseline of {ref} ({given}): {why}; what this baseline accepts against "
        "it is not named"
    )


def _why(exc: GitFileError, ref: str) -> str:
    """What keeps git from giving the file, and what to fetch."""
    remote, _, branch = ref.partition("/") if ref.startswith("origin/") else ("origin", "", ref)
    if exc.kind == "shallow":
        return (
            f"this clone is shallow and does not have it: fetch it (git fetch --depth=1 {remote} "
            f"{branch}) or set fetch-depth: 0 in actions/checkout"
        )
    if exc.kind == "ref":
        return f"{exc.message}: fetch it (git fetch {remote} {branch}) or name a ref git has"
    return exc.message


def _top(root: Path) -> Path | None:
    """The top of the git repository around ``root``, None outside one (or without git)."""
    from retrieval_gate.baseline.provenance import _git

    found = _git(root, "rev-parse", "--show-toplevel")
    return None if found is None else Path(found).resolve()
