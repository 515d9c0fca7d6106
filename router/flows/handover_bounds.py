"""The router's side of the bounds the job puts on a hand-over (router/checkpoint/handover.py).

A router that dies mid-move must not leave a paid job in limbo, so the job bounds it itself: the
old placement holds at most SPOTROUTE_HOLD_TIMEOUT, then records `handover-expired.json` and
trains on; a new placement started for a move (SPOTROUTE_HANDOVER_ID, set here) stops unless the
router writes `handover-complete.json` within SPOTROUTE_HANDOVER_TIMEOUT of its restore, and
records `handover-abandoned.json`. What the router does with them:

  - new-stack-up passes the journal id as SPOTROUTE_HANDOVER_ID (a move, not a re-placement:
    after an interruption there is no old placement to fall back on);
  - resume-confirmed, once the placement record names the new stack, writes
    `handover-complete.json` in the new placement's storage and the old one's: the new job
    stops waiting, the old one stops holding and exits (handed over) — so a router that dies
    during old-stack-down leaves exactly the new placement training;
  - before each step of a move that can still be undone, a record of either kind for this
    journal rolls the move back: the old placement is the job (it trains on, or still holds and
    is let go); the new stack is destroyed. Past resume-confirmed the move rolls forward as
    always; a new placement that stopped is then a lost placement, re-placed by the next pass.
"""

from __future__ import annotations

from datetime import datetime

from router.config import checkpoints as ckpt
from router.core.errors import OperationFailed
from router.core.journal import Journal

HANDOVER_ID_ENV = "SPOTROUTE_HANDOVER_ID"


def probation_env(journal: Journal) -> dict[str, str]:
    """The new stack's job env for this journal: the move's id, for a move only."""
    return {HANDOVER_ID_ENV: journal.id} if journal.kind == "migrate" else {}


def complete_probation(journal: Journal, now: datetime) -> None:
    """Tell both placements the move is done (idempotent); a refused write fails the step."""
    if journal.kind != "migrate":
        return
    outputs = journal.data("new-stack-up").get("outputs") or {}
    new_url = str(outputs.get("checkpointUrl", ""))
    old_url = str(journal.data("intent").get("checkpoint_url", ""))
    for url in dict.fromkeys(u for u in (new_url, old_url) if u):
        ckpt.complete_handover(ckpt.checkpoint_store(url), journal.id, journal.to_stack, now)


def job_gave_up(journal: Journal) -> str | None:
    """Why the job ended this move from its side while it can still be undone; None if not."""
    if journal.kind != "migrate" or not journal.can_roll_back():
        return None
    if not journal.done("checkpoint-requested"):
        return None
    old_url = str(journal.data("intent").get("checkpoint_url", ""))
    new_url = str((journal.data("new-stack-up").get("outputs") or {}).get("checkpointUrl", ""))
    try:
        abandoned = ckpt.handover_abandoned(new_url, journal.id) if new_url else None
        expired = ckpt.hold_expired(old_url, journal.id) if old_url else None
    except OperationFailed:  # unreadable here: the steps themselves fail and say why
        return None
    if abandoned is not None:
        waited_s = float(abandoned.get("waited_s") or 0)
        return (
            f"the new placement stopped at step {abandoned.get('step')} after waiting "
            f"{waited_s:.0f} s for the hand-over (SPOTROUTE_HANDOVER_TIMEOUT)"
        )
    if expired is not None:
        held_s = float(expired.get("held_s") or 0)
        return (
            f"the job stopped holding after {held_s:.0f} s (SPOTROUTE_HOLD_TIMEOUT) and trains "
            f"on at {journal.from_stack}"
        )
    return None
