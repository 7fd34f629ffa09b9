"""Deciding on measured runs: floors and ceilings (:mod:`.floors`), regressions against the
baseline (:mod:`.regressions`, with the statistics in :mod:`.stats`), drift floors
(:mod:`.drift`), the decision score (:mod:`.decision`) and floor suggestions (:mod:`.suggest`).
Pure: each reads typed records and returns typed outcomes."""
