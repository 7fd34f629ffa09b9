"""The accepted baseline: its store (:mod:`.store`) and how a run lines up with it
(:mod:`.align`)."""
