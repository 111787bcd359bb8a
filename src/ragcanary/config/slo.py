"""A suite's quality SLO (``suites.NAME.slo``): objective, window and what a good answer is."""

from __future__ import annotations

from pydantic import Field, field_validator

from ragcanary.config.fields import Seconds, Strict
from ragcanary.config.problems import fix_error as _fix
from ragcanary.config.units import format_duration
from ragcanary.measure.slo import GOOD_HINT, GoodAnswer, Objective, parse_good

# The burn-rate alerts' longest window is 3 days (docs/slo.md): a shorter SLO window has
# no slow-burn alert that makes sense.
MIN_WINDOW_S = 3 * 86400.0


class SloConfig(Strict):
    """``slo: {objective: 0.99, window: 30d, good: "hit_rate@5"}`` (docs/slo.md)."""

    objective: float = Field(gt=0, lt=1)
    window: Seconds = 30 * 86400.0
    good: str

    @field_validator("window")
    @classmethod
    def _long_enough(cls, window: float) -> float:
        if window < MIN_WINDOW_S:
            raise _fix(
                f"a window of {format_duration(window)} is shorter than the slow-burn alert's"
                " 3 days",
                "write a window of 3d or more, like 28d or 30d",
            )
        return window

    @field_validator("good")
    @classmethod
    def _good_answer(cls, good: str) -> str:
        try:
            parse_good(good)
        except ValueError as exc:
            raise _fix(str(exc), GOOD_HINT) from None
        return good

    def answer(self) -> GoodAnswer:
        """The good answer ``good`` names."""
        return parse_good(self.good)

    def objective_of(self) -> Objective:
        """The SLO as measure's plain record."""
        return Objective(self.objective, self.window, self.answer())
