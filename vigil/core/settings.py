"""What every section of the settings shares."""

from __future__ import annotations


class RuleBroken(ValueError):
    """A rule across settings is broken; ``setting`` names the variable to change (raised in model validators)."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting} {problem}")
        self.setting = setting
        self.problem = problem
