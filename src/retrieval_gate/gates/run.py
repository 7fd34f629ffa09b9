"""The ``run`` rule: a suite x system with no floor and no query expectation still runs, so its
numbers reach the report; its one item, ``...::<system>::run``, passes when the run completes."""

from __future__ import annotations

from collections.abc import Iterator

from retrieval_gate.gates.rule import Check, Context, Rule

ORDER = 90


class RunRule(Rule):
    name = "run"

    def checks(self, context: Context) -> Iterator[Check]:
        suite = context.suite
        if not suite.gates_for(context.system) and not any(q.expect for q in suite.queries):
            yield Check(self.name, "run", wide=True)

    def decide(self, check: Check, context: Context) -> None:
        context.record()


RULE = RunRule()
