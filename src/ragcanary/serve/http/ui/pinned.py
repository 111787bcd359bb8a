"""The "Pinned run" notice after the pin form: shown only on the redirect of a pin that happened.

The form redirects to the baselines page (post/redirect/get), whose query names the pin and
carries a proof: an HMAC of it under the admin token, with the time of the pin. A link that
anyone can write (``?pinned=X``) carries no valid proof and shows nothing, while the proof
needs no state on the daemon, so the redirect may reach another replica of the same config.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping

# How long after the pin its redirect shows the notice: long enough to follow the redirect,
# short enough that an old link in the history does not announce it again.
SHOWN_S = 120
CLOCK_SKEW_S = 5  # a replica whose clock runs behind the one that signed


def proof(token: str, suite: str, target: str, run_id: str, at: int) -> str:
    """The HMAC-SHA256 of a pin of ``run_id`` at ``at`` (epoch seconds), keyed by ``token``."""
    message = json.dumps(["pinned", suite, target, run_id, at]).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def redirect_query(token: str, suite: str, target: str, run_id: str, now: float) -> dict[str, str]:
    """The query of the redirect after pinning ``run_id``: the pair, the run, when, the proof."""
    at = int(now)
    return {
        "suite": suite,
        "target": target,
        "pinned": run_id,
        "at": str(at),
        "proof": proof(token, suite, target, run_id, at),
    }


def notice(token: str | None, query: Mapping[str, str], now: float) -> str:
    """What the baselines page announces for ``query``: the pin it proves, else nothing."""
    suite, target = query.get("suite", ""), query.get("target", "")
    run_id, given, at = query.get("pinned", ""), query.get("proof", ""), query.get("at", "")
    # ASCII digits, and few: int() refuses others (and over 4,300 digits) with an error.
    if not (token and run_id and given and at.isascii() and at.isdigit() and len(at) <= 12):
        return ""
    if not -CLOCK_SKEW_S <= now - int(at) <= SHOWN_S:
        return ""
    expected = proof(token, suite, target, run_id, int(at))
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return ""
    return f"Pinned run {run_id} as the baseline of {suite} on {target}."
