"""The Checkpointer's save path: DCP write, rank files, the manifest (the commit), retention.

A synchronous save holds the training thread from the call until its manifest is written; an
asynchronous one only while DCP stages the state to CPU memory, then finishes on a thread. Neither
deletes old checkpoints itself: the commit hands that to the retention thread (retention.py).
"""

from __future__ import annotations

import json
import logging
import posixpath
import threading
import time
from dataclasses import dataclass
from typing import Any

from router.checkpoint import light_restore, rng
from router.checkpoint.dcp import (
    ZIP_CRC,
    gc_held,
    quiet_dcp,
    recording_writer,
    state_dicts_for_save,
    without_zip_crc,
)
from router.checkpoint.manifest import FileEntry, Manifest, checksum_bytes
from router.checkpoint.results import CheckpointError, SaveReport, now_iso, rank_file
from router.checkpoint.state import CheckpointerState

log = logging.getLogger("spotroute.checkpoint")


@dataclass(frozen=True)
class SaveInFlight:
    """What finishing a save needs once DCP has written its files (`t0`: perf_counter at the
    call, seconds)."""

    step: int
    epoch: int | None
    writer: Any
    rank_state: dict[str, Any]
    report: SaveReport
    t0: float


class SavingMixin(CheckpointerState):
    """save(), wait() and what finishes a save."""

    @gc_held  # outermost: no cyclic-GC pause anywhere in the call (see dcp.GC_HOLD)
    @rng.leaves_rng_alone
    def save(
        self,
        step: int,
        *,
        blocking: bool | None = None,
        epoch: int | None = None,
        data_position: Any = None,
        user: dict[str, Any] | None = None,
        **objects: Any,
    ) -> bool:
        """Save now (on every rank); asynchronous unless `blocking` or the Checkpointer says so.

        Returns False when a complete checkpoint of this step already exists.
        """
        self._remember(objects)
        if not self._objects:
            raise CheckpointError(
                "nothing to save: pass model=/optimizer=/... to restore() or save(), or use "
                "save_files() for a plain directory"
            )
        blocking = (not self.asynchronous) if blocking is None else blocking
        t0 = time.perf_counter()
        self.wait()  # one save in flight at a time; its collectives must finish first
        if not self._prepare_step_dir(step):
            return False
        try:
            self._save_claimed(step, blocking, epoch, data_position, user, t0)
        except BaseException:
            self._release_step(step)
            raise
        self._last_save_at = self._clock()
        return True

    def _save_claimed(
        self,
        step: int,
        blocking: bool,
        epoch: int | None,
        data_position: Any,
        user: dict[str, Any] | None,
        t0: float,
    ) -> None:
        import torch

        state, components = state_dicts_for_save(self._objects)
        rank_state = {
            "rank": self._ranks.rank,
            "world_size": self._ranks.world_size,
            "step": step,
            "epoch": epoch,
            "data_position": data_position,
            "rng": rng.capture(),
            "components": components,
            "torch_version": torch.__version__,
        }
        if self._ranks.rank == 0:
            rank_state["user"] = dict(user or {})
        try:
            json.dumps(rank_state)
        except TypeError as error:
            raise CheckpointError(
                f"data_position and user must be JSON-serialisable ({error}); put tensors in an "
                "object with state_dict() and pass it as a keyword instead"
            ) from error
        writer = recording_writer(
            self.location.url_of(posixpath.basename(self.location.step_path(step))),
            self.location.storage_options,
            # fsync on a local disk; an object store has the object once the upload closes.
            sync_files=self.location.is_local,
            algorithm=self.checksum_algorithm,
            files=self.io_threads,
        )
        report = SaveReport(step=step, blocked_s=0.0)
        if blocking:
            with without_zip_crc():
                self._write_dcp(state, writer, blocking=True)
            self._finish_save(SaveInFlight(step, epoch, writer, rank_state, report, t0))
            report.blocked_s = time.perf_counter() - t0
        else:
            ZIP_CRC.disable()  # until the background upload is done
            try:
                future = self._write_dcp(state, writer, blocking=False)
            except BaseException:
                ZIP_CRC.restore()
                raise
            report.blocked_s = time.perf_counter() - t0
            thread = threading.Thread(
                target=self._finish_in_background,
                args=(future, SaveInFlight(step, epoch, writer, rank_state, report, t0)),
                name=f"spotroute-save-{step}",
                daemon=True,
            )
            self._pending, self._pending_report = thread, report
            thread.start()
        self.reports.append(report)

    def wait(self) -> SaveReport | None:
        """Wait for the save in flight, if any; returns its report (error set if it failed)."""
        thread, report = self._pending, self._pending_report
        if thread is None:
            return None
        thread.join()
        self._pending = self._pending_report = None
        return report

    def _prepare_step_dir(self, step: int) -> bool:
        """False if `step` is already complete; removes what a killed writer left there. Rank 0
        claims the step from retention until the save is committed or failed."""
        fresh = True
        if self._ranks.rank == 0:
            self._retention.claim_for_save(step)
            if self.location.has_manifest(step):
                fresh = False
                self._retention.release(step)
            elif step in self.location.steps():
                self.location.remove_step(step)
        return bool(self._ranks.broadcast(fresh))

    def _committed(self, step: int) -> None:
        """The manifest of `step` is written: retention may run (on its thread), and touch it."""
        if self._ranks.rank == 0:
            self._retention.release(step)
            self._retention.request()

    def _release_step(self, step: int) -> None:
        if self._ranks.rank == 0:
            self._retention.release(step)

    def _write_dcp(self, state: dict[str, Any], writer: Any, *, blocking: bool) -> Any:
        from torch.distributed.checkpoint.state_dict_saver import async_save, save

        group = self._ranks.save_group
        no_dist = not self._ranks.distributed
        with quiet_dcp():
            if blocking:
                save(state, storage_writer=writer, process_group=group, no_dist=no_dist)
                return None
            return async_save(
                state,
                storage_writer=writer,
                process_group=group,
                no_dist=no_dist,
                async_stager=self._async_stager(),
            )

    def _async_stager(self) -> Any:
        """The stager, one per Checkpointer so its CPU copy of the state is reused.

        A fresh stager (DCP's default) allocates the whole staging copy on every save; keeping
        it turns every save after the first into a plain copy into memory already mapped, made
        by several threads (staging.ParallelStager). Safe because a save waits for the one
        before it. Costs one resident copy of the state.
        """
        if not self.reuse_staging_memory:
            return None
        if self._stager is None:
            from router.checkpoint.staging import ParallelStager

            self._stager = ParallelStager()
        return self._stager

    def _finish_in_background(self, future: Any, save: SaveInFlight) -> None:
        try:
            try:
                if hasattr(future, "upload_completion"):
                    future.upload_completion.result()
                else:
                    future.result()
            finally:
                ZIP_CRC.restore()
            self._finish_save(save)
        except BaseException as error:  # DCP's CheckpointException is a BaseException
            # The previous complete checkpoint is untouched; training goes on.
            save.report.error = f"{type(error).__name__}: {error}"
            self.last_error = save.report.error
            log.error("spotroute: saving step %d failed: %s", save.step, save.report.error)
        finally:
            self._release_step(save.step)

    def _finish_save(self, save: SaveInFlight) -> None:
        """Rank files, the gather of every rank's checksums, then the manifest (rank 0), last."""
        step_dir = self.location.step_path(save.step)
        records = dict(save.writer.fs.records)
        index = None if self._ranks.distributed else light_restore.index_of(save.writer.metadata)
        if index is not None:  # where each entry lies, for a restore without DCP
            text = json.dumps(index, separators=(",", ":")).encode()
            self.location.fs.pipe_file(posixpath.join(step_dir, light_restore.INDEX_NAME), text)
            records[light_restore.INDEX_NAME] = (
                len(text),
                checksum_bytes(text, self.checksum_algorithm),
            )
        data = (json.dumps(save.rank_state, sort_keys=True) + "\n").encode()
        self.location.fs.pipe_file(posixpath.join(step_dir, rank_file(self._ranks.rank)), data)
        records[rank_file(self._ranks.rank)] = (
            len(data),
            checksum_bytes(data, self.checksum_algorithm),
        )
        gathered = self._ranks.all_gather(records, save=True)  # also the barrier before it
        if self._ranks.rank == 0:
            files: dict[str, tuple[int, str]] = {}
            for rank_records in gathered:
                files.update(rank_records)
            save_s = time.perf_counter() - save.t0
            manifest = Manifest(
                step=save.step,
                time=now_iso(),
                world_size=self._ranks.world_size,
                job_id=self.job_id,
                mode="torch",
                files=tuple(FileEntry(p, s, c) for p, (s, c) in sorted(files.items())),
                epoch=save.epoch,
                save_s=round(save_s, 4),
                blocked_s=round(save.report.blocked_s, 4),
                torch_version=str(save.rank_state.get("torch_version")),
                checksum_algorithm=self.checksum_algorithm,
            )
            self.location.write_manifest(manifest)
            save.report.bytes = manifest.total_bytes
            self._committed(save.step)
        save.report.save_s = time.perf_counter() - save.t0
        self._ranks.barrier(save=True)  # nobody exits before the manifest is written
        self.last_saved_step = save.step
