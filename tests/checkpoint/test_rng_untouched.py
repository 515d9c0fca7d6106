"""The library leaves every global RNG (Python, NumPy, torch CPU) as it found it: constructing a
Checkpointer, saving and restoring draw nothing from them, on every storage — so a seeded run
follows the same trajectory on s3:// as on file://. Restore sets the checkpoint's states, and only
those. Each check runs in a fresh interpreter: the draw that broke this happened when a storage
driver was first imported (s3fs → aiobotocore → httpx → rich draws `random.getrandbits` at
import), which an already warmed-up test process would never see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from servers import Store

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, random, sys
import numpy, torch

def states():
    return {"python": random.getstate()[1][:8] + (random.getstate()[1][-1],),
            "numpy": [int(v) for v in numpy.random.get_state()[1][:8]],
            "torch": torch.get_rng_state()[:64].tolist()}

def draws():
    return [random.random(), float(numpy.random.rand()), float(torch.rand(1))]

random.seed(7); numpy.random.seed(7); torch.manual_seed(7)
report = {}
before = states()
from router.checkpoint import Checkpointer
ckpt = Checkpointer(sys.argv[1], storage_options=json.loads(sys.argv[2]), handle_sigterm=False,
                    asynchronous=False)
report["construct"] = states() == before
model = torch.nn.Linear(4, 4)
before = states()
ckpt.save(3, model=model, blocking=True)
report["save"] = states() == before
saved_draws = draws()  # what follows the saved states
random.seed(99); numpy.random.seed(99); torch.manual_seed(99)
before = states()
fresh = Checkpointer(sys.argv[1], storage_options=json.loads(sys.argv[2]), handle_sigterm=False)
report["construct again"] = states() == before
fresh.restore(model=torch.nn.Linear(4, 4))
report["restore sets the saved states"] = draws() == saved_draws
fresh.close(); ckpt.close()
print(json.dumps(report))
"""


def test_construct_save_and_restore_leave_the_global_rngs_as_they_were(store: Store) -> None:
    env = {**os.environ, **store.env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, store.url, json.dumps(store.storage_options)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert report == {"construct": True, "save": True, "construct again": True,
                      "restore sets the saved states": True}, (store.kind, report)
