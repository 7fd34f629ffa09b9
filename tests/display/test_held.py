"""Held-out units masked in any case and separator (display/held.py): the words of a text
against the words of each held-out string, escapes decoded, visible units shown whole."""

from __future__ import annotations

import pytest

from retrieval_gate.display import (
    HELD_OUT_NAME,
    HeldOut,
    distinctive,
    redact,
    scrub_held_out,
    seal_held_out,
    shown,
    unseal_held_out,
)

H = HELD_OUT_NAME
MASK = HeldOut(["ask zeta4x", "q04", "café crème", "it's here"], ["ask zeta4x again"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cannot search ask zeta4x", f"cannot search {H}"),
        ("ASK ZETA4X!", f"{H}!"),
        ("ask_zeta4x", H),
        ("ask-zeta4x", H),
        ("ask.zeta4x", H),
        ("askzeta4x", H),
        ("askZeta4x", H),
        ("myAskZeta4x", f"my{H}"),
        ("ask%20zeta4x", H),
        ("/q?text=ask+zeta4x&k=3", f"/q?text={H}&k=3"),
        ("ask\nzeta4x", H),
        ("ask\\nzeta4x", H),  # a repr()'d newline
        ("'ask zeta4x'", f"'{H}'"),
        ("\uff21\uff33\uff2b \uff5a\uff45\uff54\uff41\uff14\uff58", H),  # fullwidth (NFKC)
        ("ask\u200bzeta4x", H),  # a zero-width space between
        ("caf%C3%A9 cr%C3%A8me", H),
        ("caf\\u00e9 cr\\xe8me", H),
        ("CAFÉ_CRÈME", H),
        ("it\\'s here", H),
        ("it&#39;s HERE", H),
        ("it&apos;s here", H),
        ("Q04 failed", f"{H} failed"),
        # Not a held-out string: other words around the same letters.
        ("task zeta4x", "task zeta4x"),
        ("ask zeta4xl", "ask zeta4xl"),
        ("q045", "q045"),
        ("&unknown;ask zeta4x", f"&unknown;{H}"),
        ("100% ask zeta4x", f"100% {H}"),
        # A visible unit's text holding a held-out one is shown whole; the held-out one beside
        # it is not.
        ("ask zeta4x again", "ask zeta4x again"),
        ("ASK ZETA4X and ask zeta4x again", f"{H} and ask zeta4x again"),
        ("", ""),
    ],
)
def test_held_out_strings_are_masked_in_any_case_and_separator(text: str, expected: str) -> None:
    assert MASK.scrub(text) == expected


@pytest.mark.parametrize(
    ("text", "masked_everywhere"),
    [
        ("ask zeta4x", True),  # two words, 9 letters and digits
        ("join tables", True),
        ("postgres", True),  # one word of 8
        ("q04", False),  # one short word: masked only where a message is about its unit
        ("join", False),
        ("python", False),
        ("how to", False),  # two words, 5
        ("1234 5678", False),  # no letter: numbers are everywhere
        ("", False),
    ],
)
def test_only_distinctive_strings_are_sealed_everywhere(text: str, masked_everywhere: bool) -> None:
    assert distinctive(text) is masked_everywhere


def test_the_seal_is_applied_by_redact_and_shown_until_unsealed() -> None:
    seal_held_out(["ask zeta4x", "join"], ["ask zeta4x again"])
    try:
        assert redact("searching ASK_ZETA4X") == f"searching {H}"
        assert shown("ask zeta4x\x1b[2J") == f"{H}\\x1b[2J"
        assert scrub_held_out("join the ask zeta4x again") == "join the ask zeta4x again"
    finally:
        unseal_held_out()
    assert redact("searching ASK_ZETA4X") == "searching ASK_ZETA4X"


def test_a_long_text_is_scanned_once() -> None:
    # Many held-out strings and a long text: each word is tried against the strings that begin
    # with it (by bisection), not every string at every word.
    mask = HeldOut([f"query number {i} about things" for i in range(2000)])
    text = " ".join(["query number 7 about stuff"] * 2000) + " query number 7 about things"
    assert mask.scrub(text).endswith(f"stuff {H}")
