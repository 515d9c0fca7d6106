"""A group's checkpoint counts for the router only when every rank's part is in it: a manifest of
world size 2 that lists rank 0's files alone is neither complete for `route watch`/`migrate` nor
copied to another storage by a hand-over, and the older whole-group checkpoint is used instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.config.checkpoint_copy import copy_checkpoint, latest_complete_step
from router.config.checkpoints import FORMAT, checksum, complete_checkpoints, missing_ranks
from router.core.errors import OperationFailed


def write_group_checkpoint(root: Path, step: int, ranks_written: int, world_size: int) -> None:
    """A DCP-mode step directory as the library lays it out, with `ranks_written` ranks' parts."""
    directory = root / f"step-{step:012d}"
    directory.mkdir(parents=True)
    files = {".metadata": b"dcp metadata"}
    for rank in range(ranks_written):
        files[f"__{rank}_0.distcp"] = bytes([rank]) * 64
        files[f"rank-{rank:05d}.json"] = json.dumps({"rank": rank, "step": step}).encode()
    entries = []
    for name, blob in sorted(files.items()):
        (directory / name).write_bytes(blob)
        entries.append({"path": name, "size": len(blob), "checksum": checksum(blob, "crc32")})
    manifest = {"format": FORMAT, "step": step, "time": "2026-12-01T10:00:00+00:00",
                "world_size": world_size, "job_id": "group", "mode": "torch", "files": entries,
                "checksum_algorithm": "crc32"}
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_a_manifest_missing_a_ranks_part_is_not_a_complete_checkpoint(tmp_path: Path) -> None:
    write_group_checkpoint(tmp_path, 10, ranks_written=2, world_size=2)
    write_group_checkpoint(tmp_path, 20, ranks_written=1, world_size=2)

    assert [info.step for info in complete_checkpoints(tmp_path)] == [10]
    assert latest_complete_step(f"file://{tmp_path}") == 10


def test_a_hand_over_refuses_to_copy_a_checkpoint_of_part_of_the_group(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    write_group_checkpoint(source, 20, ranks_written=1, world_size=2)

    with pytest.raises(OperationFailed, match="rank\\(s\\) 1 of 2"):
        copy_checkpoint(f"file://{source}", f"file://{target}", 20)
    assert not (target / "step-000000000020" / "manifest.json").exists()


def test_every_rank_of_the_world_is_required_and_plain_file_checkpoints_are_exempt() -> None:
    def manifest(world: int, ranks: list[int], mode: str = "torch") -> dict[str, object]:
        return {"mode": mode, "world_size": world,
                "files": [{"path": f"rank-{r:05d}.json"} for r in ranks]}

    assert missing_ranks(manifest(4, [0, 1, 3])) == [2]
    assert missing_ranks(manifest(2, [0, 1])) == []
    assert missing_ranks(manifest(1, [], mode="files")) == []  # save_files(): rank 0 only
