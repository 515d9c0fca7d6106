"""A tiny trainer for the local market: checkpoints in the checkpoint library's format.

Standard library only, so the local target runs it anywhere. It follows the files the router
reads (router/config/checkpoints.py): complete checkpoints `step-<12 digits>/` with the manifest
written last, `resumed.json` on start, `save-request.json` answered and held, the interruption
marker on SIGTERM, `finished.json` at the end. Its "parameters" are a deterministic function of
the steps done, so a run that was moved or preempted ends with the same value as one that
was not.

It bounds a hand-over as the checkpoint library does (router/checkpoint/handover.py): a hold
ends after SPOTROUTE_HOLD_TIMEOUT (handover-expired.json, then it trains on and ignores that
request), and a new placement started for a move (SPOTROUTE_HANDOVER_ID) stops unless the
router's handover-complete.json names the move within SPOTROUTE_HANDOVER_TIMEOUT of its start
(handover-abandoned.json, exit 0); a holding job that sees that record exits 0 (handed over).

Environment: SPOTROUTE_CHECKPOINT_DIR (set by the target), STEPS (0 = forever), STEP_S
(seconds per step), CHECKPOINT_EVERY (steps), the two timeouts (seconds, or 90s / 30m / 1h).
"""

import json
import os
import signal
import sys
import time
import zlib
from datetime import datetime, timezone

DIR = os.environ["SPOTROUTE_CHECKPOINT_DIR"]
ME = os.environ.get("SPOTROUTE_PLACEMENT_ID", "")
JOB = os.environ.get("SPOTROUTE_JOB_ID", "")
STEPS = int(os.environ.get("STEPS", "0"))
STEP_S = float(os.environ.get("STEP_S", "0.5"))
EVERY = int(os.environ.get("CHECKPOINT_EVERY", "4"))
KEEP = 3
FORMAT = "spotroute-checkpoint/1"
HANDOVER_ID = os.environ.get("SPOTROUTE_HANDOVER_ID", "")


def seconds(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1])
    return float(text[:-1]) * scale if scale else float(text)


HOLD_TIMEOUT_S = seconds("SPOTROUTE_HOLD_TIMEOUT", 3600.0)
HANDOVER_TIMEOUT_S = seconds("SPOTROUTE_HANDOVER_TIMEOUT", 1800.0)


def now():
    return datetime.now(timezone.utc).isoformat()


def write(path, data):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def complete(name):
    manifest = read_json(os.path.join(DIR, name, "manifest.json"))
    if not manifest or manifest.get("format") != FORMAT:
        return None
    for entry in manifest["files"]:
        try:
            with open(os.path.join(DIR, name, entry["path"]), "rb") as f:
                blob = f.read()
        except OSError:
            return None
        if len(blob) != entry["size"] or "%08x" % zlib.crc32(blob) != entry["crc32"]:
            return None
    return manifest


def restore():
    names = sorted((n for n in os.listdir(DIR) if n.startswith("step-")), reverse=True)
    for name in names:
        manifest = complete(name)
        if manifest is not None:
            state = read_json(os.path.join(DIR, name, "state.json"))
            return manifest["step"], state
        print("checkpoint %s is incomplete or damaged; trying an older one" % name, flush=True)
    return 0, {"w": 1}


def save(step, state, request=None):
    name = "step-%012d" % step
    path = os.path.join(DIR, name)
    os.makedirs(path, exist_ok=True)
    blob = json.dumps(state, sort_keys=True).encode()
    write(os.path.join(path, "state.json"), blob)
    manifest = {
        "format": FORMAT, "step": step, "time": now(), "world_size": 1, "job_id": JOB,
        "mode": "files",
        "files": [{"path": "state.json", "size": len(blob), "crc32": "%08x" % zlib.crc32(blob)}],
        "extra": {"placement": ME, "request": request},
    }
    write(os.path.join(path, "manifest.json"), json.dumps(manifest, indent=1).encode())
    done = sorted(n for n in os.listdir(DIR) if n.startswith("step-") and complete(n))
    for old in done[:-KEEP]:  # keep the newest KEEP complete ones, never the only one
        # The old and the new placement share this directory during a hand-over, so the other
        # one may be pruning the same step: what it removed first is simply gone.
        try:
            for f in os.listdir(os.path.join(DIR, old)):
                os.unlink(os.path.join(DIR, old, f))
            os.rmdir(os.path.join(DIR, old))
        except FileNotFoundError:
            pass


def main():
    os.makedirs(DIR, exist_ok=True)
    step, state = restore()
    write(os.path.join(DIR, "resumed.json"),
          json.dumps({"step": step, "placement": ME, "time": now()}).encode())
    print("placement %s resumed at step %d" % (ME, step), flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    answered, held_since, restored_at = None, None, time.monotonic()
    expired = read_json(os.path.join(DIR, "handover-expired.json")) or {}
    stale = {expired.get("id")}  # requests whose hold ran out: never answered again
    handed_over = not HANDOVER_ID
    while not STEPS or step < STEPS:
        if stop and answered is not None:
            # Handed over: the checkpoint for the new placement is written; stop quietly.
            print("stopping after the hand-over at step %d" % step, flush=True)
            sys.exit(0)
        if stop:
            save(step, state)
            write(os.path.join(DIR, "interruption.json"), json.dumps(
                {"cloud": "local", "kind": "sigterm", "notice_time": now(), "last_step": step,
                 "placement": ME}).encode())
            print("notice: saved step %d and stopping" % step, flush=True)
            sys.exit(143)
        if not handed_over:
            complete = read_json(os.path.join(DIR, "handover-complete.json")) or {}
            handed_over = complete.get("id") == HANDOVER_ID
            if not handed_over and time.monotonic() - restored_at > HANDOVER_TIMEOUT_S:
                write(os.path.join(DIR, "handover-abandoned.json"), json.dumps(
                    {"id": HANDOVER_ID, "placement": ME, "step": step, "time": now(),
                     "waited_s": round(time.monotonic() - restored_at, 3)}).encode())
                print("hand-over %s never completed; stopping at step %d" % (HANDOVER_ID, step),
                      flush=True)
                sys.exit(0)
        request = read_json(os.path.join(DIR, "save-request.json"))
        if request and request.get("placement") == ME and request.get("id") not in stale:
            done = read_json(os.path.join(DIR, "handover-complete.json")) or {}
            if answered is not None and done.get("id") == answered:
                print("handed over at step %d; the new placement goes on" % step, flush=True)
                sys.exit(0)
            if answered != request.get("id"):
                save(step, state, request.get("id"))
                answered, held_since = request.get("id"), time.monotonic()
                print("saved step %d for hand-over %s; holding" % (step, answered), flush=True)
            if time.monotonic() - held_since > HOLD_TIMEOUT_S:
                write(os.path.join(DIR, "handover-expired.json"), json.dumps(
                    {"id": answered, "placement": ME, "step": step, "time": now(),
                     "held_s": round(time.monotonic() - held_since, 3)}).encode())
                print("held for hand-over %s too long; training goes on" % answered, flush=True)
                stale.add(answered)
            time.sleep(0.1)
            continue
        answered = None
        state["w"] = (state["w"] * 31 + step) % 1000003
        step += 1
        if step % EVERY == 0:
            save(step, state)
        time.sleep(STEP_S)
    save(step, state)
    write(os.path.join(DIR, "finished.json"),
          json.dumps({"step": step, "w": state["w"], "time": now()}).encode())
    print("finished at step %d: w=%d" % (step, state["w"]), flush=True)


if __name__ == "__main__":
    main()
