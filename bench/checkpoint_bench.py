"""Checkpoint throughput and training-step stall of router.checkpoint (docs/benchmarks.md).

    python bench/checkpoint_bench.py [--size-gb 1] [--backends file,s3]

For a model whose parameters total --size-gb (fp32 4096×4096 layers), per backend:
  save     Checkpointer.save(blocking=True): DCP write (io_threads(local=True) files) + checksums +
           rank files + manifest
  restore  Checkpointer.restore of the only checkpoint: every file's checksum (xxh3-64) checked,
           then DCP load into the model; restore_newest: the newest of two (file://: each file
           checked as it is read into the model, in one pass); the files at once, one thread each
  raw      fsspec writing / reading the same tensor bytes as one object (the ceiling): the write
           is fsync'ed on file:// (as a save is); the read comes from the page cache in 8 MiB
           blocks (raw_read), into the tensors of a model like the restored one (raw_read_into:
           the same bytes to the same place a restore puts them), and on file:// once more from
           the disk after dropping the file's cached pages (raw_read_cold)
Medians of --reps repetitions (minimum in brackets); and the stall of an asynchronous save
(time the training loop waited, over --stall-reps saves; saves after the first reuse the
staging copy) against a synchronous save of the same state. --contention N (file://): the
steps of a small CPU model during N background writes, against the same steps before. S3 is
moto's server mode on 127.0.0.1.

--series N (file://): N synchronous saves of a --series-mb model (201 MB: three 4096×4096 fp32
layers, or --series-tensors square layers of the same bytes) with the default retention (keep 3),
each against a raw copy + fsync of the same bytes into a new file just before it, with a few
steps of a small model trained between saves (its garbage is what triggers the collector):
per-save ratio, their median and p95, the p95 of the saves against the p95 of the raw copies, the
cyclic-GC collections that fell inside a save, and how long retention took after the commit.
--fresh N: a restart's restore in a fresh interpreter (import of the library, Checkpointer,
verified restore of the --series-mb model) against torch.load + load_state_dict of the same
state saved with torch.save, N alternated pairs of processes (torch itself imported first, untimed,
in both). --notice N: a child process saving nothing yet is sent SIGTERM N times: how long until
the checkpoint is complete (the interruption marker's saved_at), and from then until the process
is gone (its at-exit handlers and the interpreter's shutdown). --library DIR times that checkout's
router.checkpoint instead of this one (the code before a change, from a worktree of the base
commit, in the same run).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_early = argparse.ArgumentParser(add_help=False)
_early.add_argument("--library", type=Path, default=ROOT)
LIBRARY = _early.parse_known_args()[0].library.resolve()  # whose router.checkpoint is timed
sys.path[:0] = [str(LIBRARY), str(ROOT / "tests" / "checkpoint")]

import torch  # noqa: E402

from router.checkpoint import Checkpointer  # noqa: E402

LAYER = 4096


def build_model(size_gb: float) -> torch.nn.Module:
    layers = max(1, round(size_gb * (1 << 30) / (LAYER * LAYER * 4)))
    model = torch.nn.Sequential(*[torch.nn.Linear(LAYER, LAYER, bias=False) for _ in range(layers)])
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def nbytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def raw_write(fs: Any, path: str, model: torch.nn.Module, fsync: bool) -> float:
    t0 = time.perf_counter()
    with fs.open(path, "wb") as handle:
        for p in model.parameters():
            handle.write(p.detach().numpy().data.cast("B"))
        if fsync:
            handle.flush()
            os.fsync(handle.fileno())
    return time.perf_counter() - t0


def drop_from_page_cache(path: str) -> None:
    """Ask the kernel to forget the file's cached pages, so the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def raw_read(fs: Any, path: str, cold: bool = False) -> float:
    if cold:
        drop_from_page_cache(path)
    t0 = time.perf_counter()
    with fs.open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            zlib.adler32(block[:1])  # touch it; the bytes are read either way
    return time.perf_counter() - t0


def raw_read_into(fs: Any, path: str, target: torch.nn.Module) -> float:
    """Read the raw object straight into the parameters of `target`, as a restore must."""
    t0 = time.perf_counter()
    with fs.open(path, "rb") as handle:
        for p in target.parameters():
            view = p.detach().numpy().data.cast("B")
            done = 0
            while done < view.nbytes:
                count = handle.readinto(view[done:])
                assert count, "raw object ended early"
                done += count
    return time.perf_counter() - t0


def timed_restore(url: str, options: dict[str, Any], model: torch.nn.Module,
                  target: torch.nn.Module, step: int) -> float:
    """Seconds to restore `step` into `target` (zeroed first), checked equal to `model`."""
    for p in target.parameters():
        p.zero_()
    with Checkpointer(url, interval_s=None, handle_sigterm=False, storage_options=options) as ckpt:
        t0 = time.perf_counter()
        assert ckpt.restore(model=target).step == step
        seconds = time.perf_counter() - t0
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), target.parameters(),
                                                  strict=True))
    return seconds


def median_and_min(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} s ({min(values):.2f})"


def bench_backend(kind: str, url: str, options: dict[str, Any], model: torch.nn.Module,
                  reps: int) -> dict[str, float]:
    import fsspec.core

    size = nbytes(model)
    fs, root = fsspec.core.url_to_fs(url, **options)
    fs.makedirs(root, exist_ok=True)
    results: dict[str, list[float]] = {"save": [], "restore": [], "restore_newest": [],
                                       "raw_write": [], "raw_read": [], "raw_read_into": [],
                                       "raw_read_cold": []}
    target = build_model(size / (1 << 30))
    for rep in range(reps):
        results["raw_write"].append(raw_write(fs, f"{root}/raw-{rep}.bin", model, kind == "file"))
        results["raw_read"].append(raw_read(fs, f"{root}/raw-{rep}.bin"))
        results["raw_read_into"].append(raw_read_into(fs, f"{root}/raw-{rep}.bin", target))
        if kind == "file":  # the same bytes from the disk, not from memory
            results["raw_read_cold"].append(raw_read(fs, f"{root}/raw-{rep}.bin", cold=True))
        fs.rm(f"{root}/raw-{rep}.bin")
        ckpt_url = f"{url}/ckpt-{rep}"
        with Checkpointer(ckpt_url, interval_s=None, handle_sigterm=False,
                          storage_options=options) as ckpt:
            t0 = time.perf_counter()
            ckpt.save(1, blocking=True, model=model)
            results["save"].append(time.perf_counter() - t0)
        results["restore"].append(timed_restore(ckpt_url, options, model, target, 1))
        # The usual case of a job that kept several: the newest of two, checked while read
        # into the model on file:// (the only one, above, is checked before it is read).
        with Checkpointer(ckpt_url, interval_s=None, handle_sigterm=False,
                          storage_options=options) as ckpt:
            ckpt.save(2, blocking=True, model=model)
        results["restore_newest"].append(timed_restore(ckpt_url, options, model, target, 2))
        fs.rm(fs._strip_protocol(ckpt_url), recursive=True)
    del target
    mid = {name: statistics.median(values) for name, values in results.items() if values}
    mb = size / 1e6
    print(f"{kind}: {size / (1 << 30):.2f} GiB, median of {reps} (min)")
    for name in ("save", "raw_write", "restore", "restore_newest", "raw_read", "raw_read_into",
                 "raw_read_cold"):
        if name in mid:
            print(f"  {name:13s} {median_and_min(results[name])}  {mb / mid[name]:8.0f} MB/s")
    print(f"  save    = {100 * mid['raw_write'] / mid['save']:.0f} % of raw write throughput")
    print(f"  restore = {100 * mid['raw_read'] / mid['restore']:.0f} % of raw read throughput "
          f"(8 MiB blocks), {100 * mid['raw_read_into'] / mid['restore']:.0f} % of a raw read "
          "into the model's tensors")
    print(f"  restore of the newest of two = {100 * mid['raw_read'] / mid['restore_newest']:.0f}"
          f" % of raw read, {100 * mid['raw_read_into'] / mid['restore_newest']:.0f} % of a raw "
          "read into the model's tensors")
    if "raw_read_cold" in mid:
        print(f"  restore = {100 * mid['raw_read_cold'] / mid['restore']:.0f} % of a raw read "
              "from the disk (page cache dropped)")
    return mid


def bench_stall(kind: str, url: str, options: dict[str, Any], model: torch.nn.Module,
                reps: int) -> None:
    """Blocked time of an async save vs the whole time of a sync save of the same state."""
    sync_s, blocked_s, total_s = [], [], []
    with Checkpointer(f"{url}/stall-sync", interval_s=None, handle_sigterm=False,
                      keep=1, storage_options=options) as ckpt:
        for step in range(1, reps + 1):
            t0 = time.perf_counter()
            ckpt.save(step, blocking=True, model=model)
            sync_s.append(time.perf_counter() - t0)
    with Checkpointer(f"{url}/stall-async", interval_s=None, handle_sigterm=False,
                      keep=1, storage_options=options) as ckpt:
        for step in range(1, reps + 1):
            ckpt.save(step, model=model)
            report = ckpt.wait()
            assert report is not None and report.error is None, report
            blocked_s.append(report.blocked_s)
            total_s.append(report.save_s or 0.0)
    later = blocked_s[1:] or blocked_s  # the first save also allocates the staging copy
    sync, blocked = statistics.median(sync_s), statistics.median(later)
    print(f"{kind} stall: sync save {median_and_min(sync_s)}; async save blocks "
          f"{median_and_min(later)} = {100 * blocked / sync:.1f} % of sync (medians; the first "
          f"save {blocked_s[0]:.3f} s), finishes in {statistics.median(total_s):.2f} s in the "
          "background")


def bench_contention(kind: str, url: str, options: dict[str, Any], model: torch.nn.Module,
                     saves: int) -> None:
    """Training steps of a small CPU model while an asynchronous save writes in the background.

    What `blocked_s` does not show: the writer thread (DCP's torch.save, checksums, fsync)
    shares the cores and the GIL with the steps that follow save().
    """
    small = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512))
    optimizer = torch.optim.SGD(small.parameters(), lr=1e-3)

    def step_s() -> float:
        t0 = time.perf_counter()
        loss = small(torch.randn(64, 512)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return time.perf_counter() - t0

    with Checkpointer(f"{url}/contention", interval_s=None, handle_sigterm=False, keep=1,
                      storage_options=options) as ckpt:
        ckpt.save(1, model=model)
        ckpt.wait()  # the staging copy exists from here on
        for step in range(2, saves + 2):
            end = time.perf_counter() + 2.0
            idle = []
            while time.perf_counter() < end:
                idle.append(step_s())
            ckpt.save(step, model=model)
            busy = []
            while ckpt._pending is not None and ckpt._pending.is_alive():
                busy.append(step_s())
            report = ckpt.wait()
            assert report is not None and report.error is None, report
            usual = statistics.mean(idle)
            print(f"{kind} contention, save {step}: blocked {report.blocked_s:.2f} s, written in "
                  f"{report.save_s:.2f} s; mean step {1e3 * usual:.2f} ms before, "
                  f"{1e3 * statistics.mean(busy):.2f} ms during the write ({len(busy)} steps): "
                  f"{sum(busy) - len(busy) * usual:.2f} s of steps lost")


def series_model(megabytes: float, tensors: int = 0) -> torch.nn.Module:
    """4096×4096 fp32 layers of `megabytes` in all, or that many bytes as `tensors` square
    layers (a model of many small tensors: DCP's per-entry objects, the collector's work)."""
    if not tensors:
        return build_model(megabytes * 1e6 / (1 << 30))
    side = int((megabytes * 1e6 / 4 / tensors) ** 0.5)
    model = torch.nn.Sequential(*[torch.nn.Linear(side, side, bias=False) for _ in range(tensors)])
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def bench_series(url: str, model: torch.nn.Module, saves: int) -> dict[str, float]:
    """Synchronous saves with retention, each against a raw copy + fsync just before it."""
    import fsspec.core

    fs, root = fsspec.core.url_to_fs(url)
    fs.makedirs(root, exist_ok=True)
    small = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    optimizer = torch.optim.SGD(small.parameters(), lr=1e-3)
    collections: list[tuple[float, float, int]] = []  # (start, seconds, generation)
    started: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        else:
            collections.append((started["t"], time.perf_counter() - started["t"],
                                int(info["generation"])))

    saves_s, raw_s, retention_s, in_save = [], [], [], []
    gc.callbacks.append(on_gc)
    try:
        with Checkpointer(f"{url}/series", interval_s=None, handle_sigterm=False) as ckpt:
            ckpt.save(0, blocking=True, model=model)  # untimed: a process's first save imports DCP
            for step in range(1, saves + 1):
                for _ in range(20):  # a little training: autograd's garbage, as between saves
                    loss = small(torch.randn(32, 256)).square().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                # Each timed write starts with the file system's journal committed: saves minutes
                # apart find it so (ext4 commits every 5 s), and otherwise each side pays for the
                # other's deleted 200 MB (a discard on this disk) in its fsync.
                os.sync()
                raw_s.append(raw_write(fs, f"{root}/raw.bin", model, fsync=True))
                fs.rm(f"{root}/raw.bin")
                os.sync()
                t0 = time.perf_counter()
                ckpt.save(step, blocking=True, model=model)
                t1 = time.perf_counter()
                saves_s.append(t1 - t0)
                in_save.append(sum(s for start, s, _ in collections if t0 <= start <= t1))
                retention = getattr(ckpt, "_retention", None)  # absent before it left the save
                if retention is not None:
                    retention.wait()  # off the save path; finished before the next raw copy
                retention_s.append(time.perf_counter() - t1)
    finally:
        gc.callbacks.remove(on_gc)
        fs.rm(f"{root}/series", recursive=True)
    ratios = [a / b for a, b in zip(saves_s, raw_s, strict=True)]
    p95 = statistics.quantiles(ratios, n=20, method="inclusive")[18]
    hit = [s for s in in_save if s > 0.005]
    mb = nbytes(model) / 1e6
    print(f"series: {saves} synchronous saves of {mb:.0f} MB in {len(list(model.parameters()))} "
          f"tensors (file://, keep 3, {ckpt.io_threads} file(s) a save) against a raw copy + "
          "fsync of the same bytes before each")
    print("  save / raw per save: " + " ".join(f"{r:.2f}" for r in ratios))
    save_p95 = statistics.quantiles(saves_s, n=20, method="inclusive")[18]
    raw_p95 = statistics.quantiles(raw_s, n=20, method="inclusive")[18]
    print(f"  p95 of the saves / p95 of the raw copies: {save_p95 / raw_p95:.2f} "
          f"({save_p95:.3f} / {raw_p95:.3f} s)")
    print(f"  save {statistics.median(saves_s):.3f} s median, raw "
          f"{statistics.median(raw_s):.3f} s; ratio median {statistics.median(ratios):.2f}, "
          f"p95 {p95:.2f}, max {max(ratios):.2f}")
    print(f"  GC pauses > 5 ms inside a save: {len(hit)} of {saves}"
          + (f" ({', '.join(f'{1e3 * s:.0f} ms' for s in hit)})" if hit else "")
          + f"; after the commit until retention was done: {statistics.median(retention_s):.3f} s "
          "median (0 where retention is part of the save)")
    return {"ratio": statistics.median(ratios), "p95": p95}


FRESH_CHILD = """
import json, sys, time
import torch
layers, url, plain, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
model = torch.nn.Sequential(*[torch.nn.utils.skip_init(torch.nn.Linear, 4096, 4096, bias=False)
                              for _ in range(layers)])
t0 = time.perf_counter()
if mode == "restore":
    from router.checkpoint import Checkpointer
    ckpt = Checkpointer(url, interval_s=None, handle_sigterm=False)
    step = ckpt.restore(model=model).step
else:
    model.load_state_dict(torch.load(plain, weights_only=True))
    step = 1
seconds = time.perf_counter() - t0
total = float(sum(p.double().sum() for p in model.parameters()))
print(json.dumps({"seconds": seconds, "step": step, "sum": total}))
"""


def bench_fresh(url: str, work: str, model: torch.nn.Module, reps: int) -> dict[str, float]:
    """A restart's verified restore in a fresh process against torch.load in one."""
    plain = f"{work}/plain.pt"
    torch.save(model.state_dict(), plain)
    with Checkpointer(f"{url}/fresh", interval_s=None, handle_sigterm=False) as ckpt:
        ckpt.save(1, blocking=True, model=model)
    env = {**os.environ, "PYTHONPATH": str(LIBRARY)}
    layers = len(list(model.parameters()))
    want = float(sum(p.double().sum() for p in model.parameters()))
    times: dict[str, list[float]] = {"restore": [], "load": []}
    for _ in range(reps):
        for mode in ("restore", "load"):
            out = subprocess.run([sys.executable, "-c", FRESH_CHILD, str(layers), f"{url}/fresh",
                                  plain, mode], env=env, capture_output=True, text=True,
                                 check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            assert result["step"] == 1 and result["sum"] == want, (mode, result, out.stderr)
            times[mode].append(result["seconds"])
    restore, load = statistics.median(times["restore"]), statistics.median(times["load"])
    print(f"fresh process, {nbytes(model) / 1e6:.0f} MB on file:// ({reps} alternated pairs): "
          f"import + Checkpointer + verified restore {median_and_min(times['restore'])}, "
          f"torch.load + load_state_dict {median_and_min(times['load'])}: "
          f"{restore / load:.1f}× (medians)")
    return {"restore": restore, "load": load}


NOTICE_CHILD = """
import sys, time
import torch
from router.checkpoint import Checkpointer
model = torch.nn.Sequential(*[torch.nn.utils.skip_init(torch.nn.Linear, 4096, 4096, bias=False)
                              for _ in range(int(sys.argv[1]))])
ckpt = Checkpointer(sys.argv[2], interval_s=None)  # SIGTERM is a notice (the local target's)
step = ckpt.restore(model=model).step
print("ready", flush=True)
while True:
    time.sleep(0.01)  # a step
    step += 1
    ckpt.maybe_save(step)
"""


def bench_notice(url: str, work: str, model: torch.nn.Module, reps: int) -> None:
    """SIGTERM → checkpoint complete (the marker's saved_at) → process gone, in a child."""
    import signal
    from datetime import datetime

    layers = len(list(model.parameters()))
    env = {**os.environ, "PYTHONPATH": str(LIBRARY)}
    to_saved, to_exit = [], []
    for rep in range(reps):
        child = subprocess.Popen([sys.executable, "-c", NOTICE_CHILD, str(layers),
                                  f"{url}/notice-{rep}"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        sent = time.time()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == 75
        gone = time.time()
        marker = json.loads(Path(f"{work}/notice-{rep}/interruption.json").read_text())
        # saved_at is new; the code before it only has written_at (just after the save).
        saved = datetime.fromisoformat(marker.get("saved_at") or marker["written_at"])
        to_saved.append(saved.timestamp() - sent)
        to_exit.append(gone - saved.timestamp())
    print(f"notice, {nbytes(model) / 1e6:.0f} MB on file:// ({reps} SIGTERMs): signal → checkpoint "
          f"complete {median_and_min(to_saved)}, then → process exited {median_and_min(to_exit)}")


def warm_up() -> None:
    """Import DCP and what get_model_state_dict pulls in (seconds, once) outside the timings."""
    work = tempfile.mkdtemp(prefix="ckpt-warm-")
    small = torch.nn.Sequential(torch.nn.Linear(4, 4))
    try:
        with Checkpointer(f"file://{work}", interval_s=None, handle_sigterm=False) as ckpt:
            ckpt.save(1, blocking=True, model=small)
            ckpt.restore(model=small)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--backends", default="file,s3")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--stall-reps", type=int, default=5)
    parser.add_argument("--contention", type=int, default=0, metavar="SAVES",
                        help="file:// only: also time training steps during SAVES background saves")
    parser.add_argument("--series", type=int, default=0, metavar="SAVES",
                        help="file://: SAVES synchronous saves, each against a raw copy + fsync")
    parser.add_argument("--fresh", type=int, default=0, metavar="PAIRS",
                        help="file://: restore in a fresh process against torch.load, PAIRS times")
    parser.add_argument("--notice", type=int, default=0, metavar="SIGNALS",
                        help="file://: SIGTERM a training child SIGNALS times: to saved, to exit")
    parser.add_argument("--series-mb", type=float, default=201.3)
    parser.add_argument("--series-tensors", type=int, default=0,
                        help="the --series-mb model as this many square layers (default: 4096²)")
    parser.add_argument("--library", type=Path, default=ROOT,
                        help="the checkout whose router.checkpoint is timed (default: this one)")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"router.checkpoint from {LIBRARY}")
    if args.series or args.fresh or args.notice:
        model = series_model(args.series_mb)
        work = tempfile.mkdtemp(prefix="ckpt-bench-")
        try:
            if args.fresh:
                bench_fresh(f"file://{work}", work, model, args.fresh)
            if args.notice:
                bench_notice(f"file://{work}", work, model, args.notice)
            if args.series:
                if args.series_tensors:
                    model = series_model(args.series_mb, args.series_tensors)
                warm_up()
                bench_series(f"file://{work}", model, args.series)
                bench_stall("file", f"file://{work}", {}, model, args.stall_reps)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if not args.backends:
            return
    warm_up()
    model = build_model(args.size_gb)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, state {nbytes(model) / 1e9:.2f} GB")
    for kind in args.backends.split(","):
        if kind == "file":
            work = tempfile.mkdtemp(prefix="ckpt-bench-")
            try:
                bench_backend("file", f"file://{work}", {}, model, args.reps)
                bench_stall("file", f"file://{work}", {}, model, args.stall_reps)
                if args.contention:
                    bench_contention("file", f"file://{work}", {}, model, args.contention)
            finally:
                shutil.rmtree(work, ignore_errors=True)  # gigabytes: never leave them behind
        else:
            from servers import STARTERS

            server = STARTERS[kind]()
            options = dict(server.storage_options)  # moto: a long read timeout (servers.py)
            try:
                bench_backend(kind, f"{server.url}/bench", options, model, args.reps)
                bench_stall(kind, f"{server.url}/bench", options, model, 2)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
