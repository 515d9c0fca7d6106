"""Checkpointer: save and restore a training job's state where spotroute keeps its checkpoints.

    ckpt = Checkpointer.from_env()
    start = ckpt.restore(model=model, optimizer=optimizer)
    for step in range(start.step, total_steps):
        train_one_step()
        ckpt.maybe_save(step + 1)          # `step + 1` steps are done
    ckpt.save(total_steps, blocking=True)
    ckpt.close()

State dicts go through torch.distributed.checkpoint (DCP) and fsspec; torch is imported only when
a model, optimizer or other state-dict object is saved or restored, so the plain-directory mode
(`save_files` / `restore_files`) works without it.
"""

from __future__ import annotations

import json
import logging
import posixpath
import threading
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from router.checkpoint import light_restore, rng
from router.checkpoint.dcp import (
    DCP_METADATA,
    CheckpointDamaged,
    PartlyLoaded,
    damage_reason,
    is_damage,
    quiet_dcp,
    read_verified,
    state_dicts_for_load,
    verifying_reader,
)
from router.checkpoint.dcp import io_threads as default_io_threads
from router.checkpoint.environment import DEFAULT_INTERVAL_S, DEFAULT_KEEP, FromEnvMixin
from router.checkpoint.handover import RESTORE_WAIT_S, HandOverMixin
from router.checkpoint.manifest import MANIFEST_NAME, Manifest, default_algorithm
from router.checkpoint.notice_handling import NoticeHandlingMixin
from router.checkpoint.notices import Notice, NoticeSource, SigtermNotices
from router.checkpoint.plain import PlainDirectoryMixin
from router.checkpoint.ranks import Ranks, current_ranks
from router.checkpoint.results import CheckpointError, Resume, SaveReport, rank_file
from router.checkpoint.retention import Retention
from router.checkpoint.saving import SavingMixin
from router.checkpoint.storage import DAMAGED_DIR, Location, open_location
from router.checkpoint.watcher import NoticeWatcher

log = logging.getLogger("spotroute.checkpoint")
# DCP warns on every single-process save/load (also from async_save's thread, where a
# catch_warnings block cannot reach) that it assumes one process. That is what we asked for.
warnings.filterwarnings(
    "ignore", message="torch.distributed is disabled, unavailable or uninitialized",
    category=UserWarning,
)

STATE_DICT_KEYS = ("model", "optimizer", "scheduler", "scaler")


class Checkpointer(SavingMixin, FromEnvMixin, NoticeHandlingMixin, PlainDirectoryMixin,
                   HandOverMixin):
    """Saves and restores checkpoints under one URL; acts on preemption notices and on the
    router's save requests (handover.py)."""

    @rng.leaves_rng_alone
    def __init__(
        self,
        url: str,
        *,
        interval_s: float | None = DEFAULT_INTERVAL_S,
        every_steps: int | None = None,
        keep: int = DEFAULT_KEEP,
        job_id: str = "",
        notice_sources: list[NoticeSource] | None = None,
        handle_sigterm: bool = True,
        asynchronous: bool = True,
        storage_options: dict[str, Any] | None = None,
        exit_on_notice: bool = True,
        reuse_staging_memory: bool = True,
        placement: str = "",
        request_poll_s: float | None = None,
        restore_step: int | None = None,
        restore_wait_s: float = RESTORE_WAIT_S,
        hold_timeout_s: float | None = None,
        handover_id: str = "",
        handover_timeout_s: float | None = None,
        io_threads: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1: the newest complete checkpoint stays")
        if io_threads is not None and io_threads < 1:
            raise ValueError("io_threads must be at least 1 (files a rank writes at once)")
        self.location: Location = open_location(url, storage_options)
        # files per rank and save
        self.io_threads = io_threads or default_io_threads(local=self.location.is_local)
        self._retention = Retention(self.location, keep)  # rank 0's, after each commit
        self.url = url
        self.interval_s = interval_s
        self.every_steps = every_steps
        self.keep = keep
        self.job_id = job_id
        self.placement = placement  # the stack this process runs as (save requests name it)
        self.request_poll_s = request_poll_s
        self.restore_step, self.restore_wait_s = restore_step, restore_wait_s  # handover.py
        self._bound_handover(hold_timeout_s, handover_id, handover_timeout_s)  # handover.py
        self.asynchronous = asynchronous
        self.exit_on_notice = exit_on_notice
        # Asynchronous saves keep their CPU staging copy between saves (see _async_stager).
        self.reuse_staging_memory = reuse_staging_memory
        self._stager: Any = None
        self._clock = clock
        self._last_save_at = clock()
        self._ranks: Ranks = current_ranks()
        self._objects: dict[str, Any] = {}
        self._pending: threading.Thread | None = None
        self._pending_report: SaveReport | None = None
        self.reports: list[SaveReport] = []
        self.last_error: str | None = None
        self.last_saved_step: int | None = None
        self.checksum_algorithm = default_algorithm()
        sources = list(notice_sources or [])
        # Metadata endpoints are per machine: one poller per node is enough.
        if self._ranks.local_rank != 0:
            sources = []
        self._sigterm: SigtermNotices | None = None
        if handle_sigterm:
            self._sigterm = SigtermNotices()
            sources.append(self._sigterm)
        self.watcher = NoticeWatcher(sources).start()

    # --- restore ------------------------------------------------------------------------------

    @rng.leaves_rng_alone
    def restore(self, **objects: Any) -> Resume:
        """Load the newest complete, verified checkpoint into `objects`; Resume(step=0) if none.

        `objects` are what has state: model=, optimizer=, scheduler=, scaler= and any other
        object with state_dict() / load_state_dict(). They are remembered for later saves.
        Every file is checked against the manifest's size and checksum; a damaged newest
        checkpoint is skipped, with a message, for the one before it. While an older one is
        left, a local file is checked as it is read into the objects (one pass); of the oldest,
        every file of the rank is checked before any is read, so with no complete checkpoint
        the objects are left as they were.
        """
        self._remember(objects)
        self._await_handover()
        self._retention.wait()  # never read a checkpoint it is deleting
        resume = Resume()
        rejected: list[tuple[int, str, bool]] = []  # (step, why, whether it is damage)
        touched: set[str] = set()  # objects a checkpoint was (maybe partly) read into
        candidates = self._candidates()
        loadable = [i for i, (_, m, _) in enumerate(candidates) if m and m.mode != "files"]
        for index, (step, manifest, problem) in enumerate(candidates):
            if manifest is None:
                rejected.append((step, str(problem), str(problem).startswith("damaged")))
                continue
            if manifest.mode == "files":
                rejected.append((step, "saved with save_files(); use restore_files()", False))
                continue
            try:
                states = self._read_rank_states(manifest)
                saved = set(states["rank0"].get("components", []))
                to_load = {k: v for k, v in self._objects.items() if k in saved}
                if to_load:
                    # Checked while read into the objects, unless no older checkpoint is left
                    # to load over a damaged one: then checked first.
                    self._load_state_dicts(manifest, to_load, fused=index != loadable[-1])
            except BaseException as error:  # DCP raises CheckpointException, a BaseException
                if isinstance(error, KeyboardInterrupt | SystemExit):
                    raise
                if isinstance(error, PartlyLoaded):
                    touched.update(error.objects if error.objects is not None else to_load)
                    error = error.cause
                rejected.append((step, f"damaged ({damage_reason(error)})", is_damage(error)))
                continue
            if touched - set(to_load):
                raise CheckpointError(
                    f"{', '.join(sorted(touched - set(to_load)))}: partly loaded from a damaged "
                    f"checkpoint and not in step {step} — restart the process to resume from "
                    f"step {step}, or delete the damaged step-* directories")
            resume.messages.extend(self._passed_over(rejected, using=step))
            for name in sorted(set(self._objects) - saved):
                resume.messages.append(f"{name}: not in the checkpoint of step {step}; "
                                       "left as it is")
            own = states["own"]
            resume.messages.extend(rng.restore(own.get("rng", {})))
            resume.step = manifest.step
            resume.epoch = manifest.epoch
            resume.data_position = own.get("data_position")
            resume.user = dict(states["rank0"].get("user") or {})
            resume.checkpoint_url = self.location.url_of(posixpath.basename(
                self.location.step_path(manifest.step)))
            resume.messages.append(
                f"restored step {manifest.step} from {resume.checkpoint_url} "
                f"(saved {manifest.time}, {manifest.world_size} rank(s))"
            )
            self.last_saved_step = manifest.step
            self._last_save_at = self._clock()
            return self._resumed(self._say(resume))
        resume.messages.extend(self._passed_over(rejected, using=None))
        if touched:
            # Damage found after some tensors were copied in (a local file read in one pass):
            # the objects are not fresh either. The damaged checkpoints are set aside, so the
            # next start finds none and starts from scratch, as object storage does at once.
            self._say(resume)
            raise CheckpointError(
                f"every checkpoint under {self.url} is damaged and the model was partly loaded "
                f"from one — they are set aside under {self.location.url_of(DAMAGED_DIR)}/; "
                "start the process again: it starts from scratch"
            )
        resume.messages.append(f"no complete checkpoint under {self.url} — starting from scratch")
        return self._resumed(self._say(resume))

    def _passed_over(self, rejected: list[tuple[int, str, bool]], *,
                     using: int | None) -> list[str]:
        """One line per checkpoint passed over: why, and for damage where it was set aside.

        Damage of any file of a step (manifest, rank file, DCP's .metadata, a data file) sets
        the step aside, so it never holds a retention slot and that step is saved again.
        """
        outcome = self._set_aside([step for step, _, damage in rejected if damage])
        tail = f"; using step {using}" if using is not None else ""
        return [f"step {step}: {why} — {outcome.get(step, 'skipped')}{tail}"
                for step, why, _ in rejected]

    def _set_aside(self, steps: list[int]) -> dict[int, str]:
        """Move the damaged checkpoints of `steps` aside (rank 0; all ranks wait): what became
        of each. Set aside, they are never restored, counted or deleted again."""
        outcome: dict[int, str] = {}
        if steps and self._ranks.rank == 0:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            for step in steps:
                try:
                    outcome[step] = f"set aside as {self.location.set_aside(step, stamp)}"
                except OSError as error:
                    outcome[step] = f"could not be set aside ({error}); left in place"
        if steps:
            outcome = self._ranks.broadcast(outcome)
        return outcome

    def _candidates(self) -> list[tuple[int, Manifest | None, str | None]]:
        """Every step directory, newest first, with its manifest or why it has none (all ranks)."""
        found: list[tuple[int, str | None, str | None]] = []
        if self._ranks.rank == 0:
            for step in self.location.steps():
                try:
                    text = self.location.fs.cat_file(self.location.step_path(step, MANIFEST_NAME))
                    Manifest.from_json(text)
                    found.append((step, text.decode(), None))
                except FileNotFoundError:
                    found.append((step, None, "incomplete (no manifest: the save did not finish)"))
                except ValueError as error:
                    found.append((step, None, f"damaged ({error})"))
        found = self._ranks.broadcast(found)
        return [(s, Manifest.from_json(t) if t is not None else None, p) for s, t, p in found]

    def _say(self, resume: Resume) -> Resume:
        if self._ranks.rank == 0:
            for message in resume.messages:
                level = logging.WARNING if ("damaged" in message or "scratch" in message
                                            or "incomplete" in message) else logging.INFO
                log.log(level, "spotroute: %s", message)
        return resume

    def _read_rank_states(self, manifest: Manifest) -> dict[str, dict[str, Any]]:
        rank = self._ranks.rank
        own_rank = rank if rank < manifest.world_size else rank % manifest.world_size
        if manifest.world_size != self._ranks.world_size and rank == 0:
            log.warning(
                "spotroute: step %d was saved by %d rank(s), resuming with %d: per-rank RNG "
                "states and data positions are taken from rank %% %d", manifest.step,
                manifest.world_size, self._ranks.world_size, manifest.world_size)
        problem: tuple[str, bool] = ("", False)  # (what, whether it is damage)
        states: dict[str, dict[str, Any]] = {}
        try:
            # DCP's index of the checkpoint, checked here: DCP itself would take a damaged one
            # for a missing one ("metadata is None"), which is no damage to tell apart.
            read_verified(self.location, manifest, DCP_METADATA)
            rank0 = json.loads(read_verified(self.location, manifest, rank_file(0)))
            own = rank0 if own_rank == 0 else json.loads(
                read_verified(self.location, manifest, rank_file(own_rank)))
            states = {"rank0": rank0, "own": own}
        except (OSError, ValueError) as error:
            # Verified bytes that are no JSON are damage too; an unreachable store is not.
            problem = (str(error), isinstance(error, CheckpointDamaged | ValueError))
        # Every rank must take the same decision, whichever rank found the damage.
        problems = [p for p in self._ranks.all_gather(problem) if p[0]]
        if problems:
            text = "; ".join(p[0] for p in problems)
            raise CheckpointDamaged(text) if all(p[1] for p in problems) else CheckpointError(text)
        return states

    def _load_state_dicts(self, manifest: Manifest, objects: dict[str, Any], *,
                          fused: bool = False) -> None:
        """Load through DCP, each file checked: before DCP reads it, or (`fused`, local files)
        while it is read into `objects`. A failure after a data file was read into `objects`
        raises PartlyLoaded (they are no longer as they were). A one-rank checkpoint of plain
        state is read without importing DCP (light_restore): a restart's restore skipped a
        second of imports."""
        if light_restore.eligible(manifest, objects, self._ranks.distributed) \
                and light_restore.load(self.location, manifest, objects, fused=fused):
            return
        from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
        from torch.distributed.checkpoint.state_dict_loader import load

        state, apply = state_dicts_for_load(objects)
        reader = verifying_reader(self.location, manifest, fused=fused)
        try:
            with quiet_dcp():
                load(
                    state,
                    storage_reader=reader,
                    planner=DefaultLoadPlanner(allow_partial_load=False),
                    process_group=self._ranks.control_group,
                    no_dist=not self._ranks.distributed,
                )
        except BaseException as error:
            if reader.fs.served and not isinstance(error, KeyboardInterrupt | SystemExit):
                raise PartlyLoaded(error) from error
            raise
        apply(state)

    # --- save ---------------------------------------------------------------------------------

    @rng.leaves_rng_alone
    def maybe_save(
        self,
        step: int,
        *,
        epoch: int | None = None,
        data_position: Any = None,
        user: dict[str, Any] | None = None,
        **objects: Any,
    ) -> bool:
        """Save if the interval has passed (asynchronously), or now and exit on a notice.

        Call once per training step, on every rank, with the number of steps completed. On a
        preemption notice it saves synchronously, writes the interruption marker and raises
        SystemExit(EXIT_PREEMPTED). On the router's save request it saves synchronously and
        holds while the request stands (handover.py). Returns True when a save started.
        """
        self._remember(objects)
        terminal = self._terminal_notice()
        request = self._save_request()
        rebalance = self.watcher.take_rebalance()
        due = (
            (self.every_steps is not None and step > 0 and step % self.every_steps == 0)
            or (self.interval_s is not None and self._clock() - self._last_save_at
                >= self.interval_s)
        )
        flags = [int(terminal is not None), int(rebalance is not None), int(due), step, -step,
                 int(request is not None), int(self._handover_given_up())]
        if self._ranks.distributed:
            flags = self._ranks.all_max(flags)
            if flags[3] != -flags[4]:
                raise CheckpointError(
                    f"ranks disagree on the step ({-flags[4]}..{flags[3]}): call maybe_save with "
                    "the same step on every rank"
                )
        if flags[0]:
            self._save_on_notice(step, terminal, epoch=epoch, data_position=data_position,
                                 user=user)
            return True
        if flags[6]:  # a new placement whose move the router never completed stops
            return self._abandon_handover(step)
        if flags[5]:
            return self._answer_request(step, request, lambda: self.save(
                step, blocking=True, epoch=epoch, data_position=data_position, user=user))
        if flags[1]:
            notice = rebalance or Notice(cloud="unknown", kind="rebalance",
                                         notice_time=datetime.now(UTC))
            started = self.save(step, epoch=epoch, data_position=data_position, user=user)
            self._write_marker(notice, step, exiting=False)
            return started
        if flags[2]:
            return self.save(step, epoch=epoch, data_position=data_position, user=user)
        return False

    # --- lifecycle ----------------------------------------------------------------------------

    def _remember(self, objects: dict[str, Any]) -> None:
        for name, obj in objects.items():
            if obj is not None:
                self._objects[name] = obj

    def close(self) -> None:
        """Wait for the save in flight and its retention, and stop watching for notices."""
        self.wait()
        self._retention.wait()
        self.watcher.stop()
        if self._stager is not None:
            self._stager.close()
            self._stager = None

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
