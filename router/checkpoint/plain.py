"""The Checkpointer's plain-directory mode: save_files / restore_files, no torch needed.

Every file under a local directory becomes the checkpoint of a step (rank 0 uploads, blocking),
with the same manifest, retention and notice handling as the state-dict mode.
"""

from __future__ import annotations

import json
import posixpath
import time
from pathlib import Path
from typing import Any

from router.checkpoint import rng
from router.checkpoint.manifest import FileEntry, Manifest, checksum_bytes, checksum_stream
from router.checkpoint.results import EXIT_PREEMPTED, CheckpointError, Resume, now_iso, rank_file
from router.checkpoint.state import CheckpointerState


class PlainDirectoryMixin(CheckpointerState):
    """Checkpoints of a plain directory: due, save_files, restore_files."""

    def due(self, step: int) -> bool:
        """True when a save is due (interval passed or a notice arrived): for save_files users.

        A new placement whose move the router never completed within handover_timeout_s stops
        here, as maybe_save stops it (SystemExit(0); with exit_on_notice=False, stop_reason is
        set and this returns False). Rank 0 decides: no collective, so due() may be called on
        rank 0 alone; torchrun stops the other ranks when it exits."""
        if self._handover_given_up():
            return self._abandon_handover(step)
        if self._terminal_notice() is not None or self._save_request() is not None:
            return True
        if self.every_steps is not None and step > 0 and step % self.every_steps == 0:
            return True
        return self.interval_s is not None and self._clock() - self._last_save_at >= self.interval_s

    @rng.leaves_rng_alone
    def save_files(self, step: int, directory: str | Path, *,
                   epoch: int | None = None, user: dict[str, Any] | None = None) -> bool:
        """Upload every file under `directory` as the checkpoint of `step` (called on every rank;
        rank 0 uploads, blocking).

        After a terminal notice it also writes the marker and raises SystemExit(EXIT_PREEMPTED).
        """
        t0 = time.perf_counter()
        source = Path(directory)
        if not source.is_dir():
            raise CheckpointError(f"save_files: {source} is not a directory")
        saved = False
        # Every rank takes part: preparing the step broadcasts rank 0's answer.
        fresh = self._prepare_step_dir(step)
        if self._ranks.rank == 0 and fresh:
            try:
                self._upload_files(step, source, epoch, user, t0)
            except BaseException:
                self._release_step(step)
                raise
            self.last_saved_step = step
            saved = True
        self._last_save_at = self._clock()
        notice = self._terminal_notice()
        if notice is None and self._answer_request(step, self._request, lambda: None):
            return saved  # saved above for the router's request: marked, held, let go
        if notice is not None:
            self._write_marker(notice, step, exiting=True)
            self.watcher.acknowledge(notice)
            if self.exit_on_notice:
                self.close()
                raise SystemExit(EXIT_PREEMPTED)
        return saved

    def _upload_files(self, step: int, source: Path, epoch: int | None,
                      user: dict[str, Any] | None, t0: float) -> None:
        """Every file under `source`, its rank file, then the manifest (the commit)."""
        fs, step_dir = self.location.fs, self.location.step_path(step)
        entries = []
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            relative = path.relative_to(source).as_posix()
            with open(path, "rb") as handle:
                size, crc = checksum_stream(handle, self.checksum_algorithm)
            remote = posixpath.join(step_dir, relative)
            if self.location.is_local:
                fs.makedirs(posixpath.dirname(remote), exist_ok=True)
            fs.put_file(str(path), remote)
            entries.append(FileEntry(relative, size, crc))
        state = json.dumps({"user": dict(user or {}), "epoch": epoch}).encode()
        fs.pipe_file(posixpath.join(step_dir, rank_file(0)), state)
        entries.append(FileEntry(rank_file(0), len(state),
                                 checksum_bytes(state, self.checksum_algorithm)))
        self.location.write_manifest(Manifest(
            step=step, time=now_iso(), world_size=1, job_id=self.job_id, mode="files",
            files=tuple(entries), epoch=epoch, save_s=round(time.perf_counter() - t0, 4),
            blocked_s=round(time.perf_counter() - t0, 4),
            checksum_algorithm=self.checksum_algorithm))
        self._committed(step)

    @rng.leaves_rng_alone
    def restore_files(self, directory: str | Path) -> Resume:
        """Download the newest verified `save_files` checkpoint into `directory`."""
        self._await_handover()
        self._retention.wait()  # never read a checkpoint it is deleting
        resume = Resume()
        manifest = self._choose_checkpoint(resume.messages)
        if manifest is None:
            return self._resumed(self._say(resume))
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        fs, step_dir = self.location.fs, self.location.step_path(manifest.step)
        for entry in manifest.files:
            if entry.path == rank_file(0):
                continue
            local = target / entry.path
            local.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(posixpath.join(step_dir, entry.path), str(local))
        state = json.loads(fs.cat_file(posixpath.join(step_dir, rank_file(0))))
        resume.step, resume.epoch = manifest.step, manifest.epoch
        resume.user = dict(state.get("user") or {})
        resume.path = target
        resume.checkpoint_url = self.location.url_of(posixpath.basename(step_dir))
        resume.messages.append(f"restored step {manifest.step} from {resume.checkpoint_url} "
                               f"into {target}")
        self.last_saved_step = manifest.step
        self._last_save_at = self._clock()
        return self._resumed(self._say(resume))

    def _choose_checkpoint(self, messages: list[str]) -> Manifest | None:
        """The newest checkpoint whose manifest and stored files check out (restore_files)."""
        rejected: list[tuple[int, str, bool]] = []  # (step, why, whether it is damage)
        for step, manifest, problem in self._candidates():
            if manifest is None:
                rejected.append((step, str(problem), str(problem).startswith("damaged")))
                continue
            # Each rank checks every world_size-th file, so verification reads everything once.
            mine = [e.path for i, e in enumerate(manifest.files)
                    if i % self._ranks.world_size == self._ranks.rank]
            problems = [p for ps in self._ranks.all_gather(
                self.location.verify_files(manifest, mine)) for p in ps]
            if problems:
                rejected.append((step, f"damaged ({'; '.join(problems)})", True))
                continue
            messages.extend(self._passed_over(rejected, using=step))
            return manifest
        messages.extend(self._passed_over(rejected, using=None))
        messages.append(f"no complete checkpoint under {self.url} — starting from scratch")
        return None
