"""Served prompt ids against the reference's: the first differing token and the text around it."""
from __future__ import annotations

from dataclasses import dataclass


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where `a` and `b` differ (the shorter one's length when one is a prefix
    of the other); None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def around(pieces: list[str], at: int, context: int) -> str:
    """The decoded text of `context` tokens before position `at`, the token at `at` in ⟦ ⟧
    (⟦⟧ past the end: the sequence ends there), and `context` tokens after; newlines shown as ⏎
    so a table row stays one line."""
    before = "".join(pieces[max(0, at - context):at])
    here = pieces[at] if at < len(pieces) else ""
    after = "".join(pieces[at + 1:at + 1 + context])
    lead = "…" if at - context > 0 else ""
    tail = "…" if at + 1 + context < len(pieces) else ""
    return (lead + before + "⟦" + here + "⟧" + after + tail).replace("\n", "⏎")


@dataclass
class Difference:
    """Where one conversation's served ids leave the reference's."""

    position: int
    reference_id: int | None        # None: the reference ends here
    served_id: int | None           # None: the served prompt ends here
    reference_text: str             # decoded text around the position, reference side
    served_text: str                # the same, served side
    reference_len: int
    served_len: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)
