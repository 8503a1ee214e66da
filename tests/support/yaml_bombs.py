"""YAML files that expand without bound through aliases (issue 32 item 4)."""

from __future__ import annotations

from typing import Final

__all__ = ["LAUGHS"]

LAUGHS: Final = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
"""Nine levels of nine aliases each: 9**9 (387 million) strings once expanded, about 400 bytes."""
