"""The pages' Jinja2 environment (autoescaped) and the filters that format numbers, times, lines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ragcanary import __version__

MINUS = "\u2212"  # a real minus sign: a hyphen before a delta reads as a dash


def number(value: Any, digits: int = 3) -> str:
    """A metric or score for a table cell; an em dash for none."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "\u2014"
    # "z": a value that rounds to zero is 0.000, never -0.000 (Chroma's distance of a vector
    # to itself comes back as about -6e-8).
    text = f"{value:z.{digits}f}"
    return text.replace("-", MINUS)


def signed(value: Any, digits: int = 3) -> str:
    """A delta with its sign always shown (+0.050, or a real minus sign); an em dash for none."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "\u2014"
    if abs(value) < 0.5 * 10**-digits:
        return f"{0:.{digits}f}"
    return (f"{value:+.{digits}f}").replace("-", MINUS)


def moved(value: Any, digits: int = 4) -> str:
    """A delta that moved, signed to ``digits`` decimals; one too small for them in scientific
    notation (+3.2e-06), so that a move never reads as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "\u2014"
    if value != 0 and abs(value) < 0.5 * 10**-digits:
        return f"{value:+.1e}".replace("-", MINUS)
    return signed(value, digits)


def percent(value: Any) -> str:
    """A share (coverage) as a percentage."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "\u2014"
    return f"{value * 100:.1f}%"


def when(value: Any) -> str:
    """An instant in UTC, to the second: what logs and Grafana's UTC setting show."""
    moment = instant(value)
    if moment is None:
        return "\u2014"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def instant(value: Any) -> datetime | None:
    """A datetime from a datetime or an ISO-8601 string; None for anything else."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def span(seconds: float | None) -> str:
    """A duration as a person says it: 45 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if seconds is None or not math.isfinite(seconds):
        return "\u2014"
    seconds = abs(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f} min"
    hours, rest = divmod(int(minutes), 60)
    if hours < 48:
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


SPARK_WIDTH = 120  # pixels of a sparkline: the fleet draws at most one run a pixel


def sparkline(
    values: Sequence[float | None],
    width: int = SPARK_WIDTH,
    height: int = 24,
    low: float = 0.0,
    high: float = 1.0,
    label: str = "",
) -> Markup:
    """An inline SVG line of ``values`` (None leaves a gap) on a fixed 0..1 scale.

    Drawn on the server, so it needs no JavaScript; only numbers go into it. The fixed scale
    keeps a drop from 0.91 to 0.90 from looking like a cliff.
    """
    points = list(values)
    if not points:
        return Markup("")
    step = width / max(len(points) - 1, 1)
    spread = (high - low) or 1.0
    segments: list[list[str]] = [[]]
    last: tuple[float, float] | None = None
    for i, value in enumerate(points):
        if value is None or not math.isfinite(value):
            if segments[-1]:
                segments.append([])
            continue
        x = i * step
        y = height - 2 - (min(max(value, low), high) - low) / spread * (height - 4)
        segments[-1].append(f"{x:.1f},{y:.1f}")
        last = (x, y)
    lines = "".join(
        f'<polyline points="{" ".join(s)}"/>' if len(s) > 1 else _dot(s[0]) for s in segments if s
    )
    end = f'<circle cx="{last[0]:.1f}" cy="{last[1]:.1f}" r="2"/>' if last else ""
    title = f"<title>{Markup.escape(label)}</title>" if label else ""
    return Markup(
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{Markup.escape(label)}" preserveAspectRatio="none">'
        f"{title}{lines}{end}</svg>"
    )


def _dot(point: str) -> str:
    x, y = point.split(",")
    return f'<circle cx="{x}" cy="{y}" r="1.5"/>'


def query_string(**params: Any) -> str:
    """``?a=1&b=2`` of the parameters that are set (for links that keep the page's filters);
    a trailing underscore is dropped from a name (``from_`` for ``from``)."""
    kept = {k.rstrip("_"): v for k, v in params.items() if v not in (None, "", False)}
    return "?" + urlencode(kept) if kept else ""


def environment() -> Environment:
    """The pages' templates: autoescaped always, so every value from a user or target is text."""
    env = Environment(
        loader=PackageLoader("ragcanary.serve.http.ui", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=StrictUndefined,  # a misspelt variable fails the test, not the page silently
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        number=number,
        signed=signed,
        moved=moved,
        percent=percent,
        when=when,
        span=span,
        sparkline=sparkline,
    )
    env.globals.update(version=__version__, query_string=query_string)
    return env
