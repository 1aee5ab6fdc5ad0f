"""What every section of the settings shares."""

from __future__ import annotations

from collections.abc import Callable


class RuleBroken(ValueError):
    """A rule across settings is broken; ``setting`` names the variable to change (raised in model validators)."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting} {problem}")
        self.setting = setting
        self.problem = problem


def checked(problem: Callable[[str], str | None]) -> Callable[[str | None], str | None]:
    """A field validator made of a ``*_problem`` function (what is wrong with a value, or None): the value as it is,
    or a ``ValueError`` that says the problem. None (a field left unset) is not checked."""

    def check(value: str | None) -> str | None:
        found = problem(value) if value is not None else None
        if found:
            raise ValueError(found)
        return value

    return check
