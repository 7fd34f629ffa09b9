"""How many gate sessions the test suite runs through pytester, and the CPU spent inside them
(this process and the children it waited for), in the tests' process and in processes of their
own. A pytest plugin; each process (xdist's workers too) writes its counts, and running this file
sums them:

    RG_COUNT_OUT=/tmp/rgcount PYTHONPATH=benchmarks pytest -n 2 -p count_sessions
    python benchmarks/count_sessions.py /tmp/rgcount
"""

from __future__ import annotations

import glob
import json
import os
import resource
import sys
from typing import Any

import pytest

_counts: dict[str, list[float]] = {"inprocess": [0, 0.0], "subprocess": [0, 0.0]}


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _counted(name: str, key: str) -> None:
    inner = getattr(pytest.Pytester, name)

    def wrapped(self: pytest.Pytester, *args: Any, **kwargs: Any) -> Any:
        start = _cpu()
        try:
            return inner(self, *args, **kwargs)
        finally:
            _counts[key][0] += 1
            _counts[key][1] += _cpu() - start

    setattr(pytest.Pytester, name, wrapped)


def pytest_configure(config: pytest.Config) -> None:
    # runpytest (in process) goes through inline_run; a session of its own through this one.
    _counted("inline_run", "inprocess")
    _counted("runpytest_subprocess", "subprocess")


def pytest_unconfigure(config: pytest.Config) -> None:
    out = os.environ.get("RG_COUNT_OUT")
    if out:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{out}.{worker}.{os.getpid()}", "w", encoding="utf-8") as handle:
            json.dump(_counts, handle)


def main() -> None:
    total = {"inprocess": [0, 0.0], "subprocess": [0, 0.0]}
    for path in glob.glob(f"{sys.argv[1]}.*"):
        with open(path, encoding="utf-8") as handle:
            for key, (n, cpu) in json.load(handle).items():
                total[key][0] += n
                total[key][1] += cpu
    for key, (n, cpu) in total.items():
        print(f"{key}: {int(n)} sessions, {cpu:.1f} s of CPU")


if __name__ == "__main__":
    main()
