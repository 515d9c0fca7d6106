"""The staging copy of an asynchronous save (router.checkpoint.staging.ParallelStager)."""

from __future__ import annotations

from typing import Any

import torch

from router.checkpoint import staging
from router.checkpoint.staging import ParallelStager


def state() -> dict[str, Any]:
    shared = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    big = torch.randn(staging.CHUNK_BYTES // 4 * 2 + 7)  # three pieces, the last one short
    return {
        "model": {"w": shared, "tied": shared, "big": big, "strided": torch.randn(5, 6).t(),
                  "half": torch.randn(9).to(torch.bfloat16)},
        "optimizer": {"state": {"w": {"step": torch.tensor(3.0)}},
                      "param_groups": [{"lr": 0.1, "params": ["w"]}]},
    }


def test_the_staged_copy_is_untouched_by_later_training() -> None:
    original = state()
    with_stager = ParallelStager(threads=2)
    staged = with_stager.stage(original)
    expected = {name: value.clone() for name, value in original["model"].items()}
    for value in original["model"].values():
        value.add_(1)
    original["optimizer"]["param_groups"][0]["lr"] = 0.2
    for name, value in staged["model"].items():
        assert torch.equal(value, expected[name])
        assert value.data_ptr() != original["model"][name].data_ptr()
    assert staged["model"]["w"] is staged["model"]["tied"]  # tied weights stay one tensor
    assert staged["optimizer"]["param_groups"][0]["lr"] == 0.1
    assert torch.equal(staged["optimizer"]["state"]["w"]["step"], torch.tensor(3.0))
    with_stager.close()


def test_later_saves_copy_into_the_memory_of_the_first() -> None:
    stager = ParallelStager(threads=2)
    first = stager.stage(state())
    pointers = {name: value.data_ptr() for name, value in first["model"].items()}
    fresh = state()
    second = stager.stage(fresh)
    assert {name: value.data_ptr() for name, value in second["model"].items()} == pointers
    for name, value in second["model"].items():
        assert torch.equal(value, fresh["model"][name])
    stager.close()


def test_parameters_are_staged_as_plain_tensors_without_autograd_history() -> None:
    layer = torch.nn.Linear(3, 2)
    for threads in (1, 2):
        staged = ParallelStager(threads=threads).stage({"extra": {"weight": layer.weight}})
        copy = staged["extra"]["weight"]
        assert torch.equal(copy, layer.weight.detach())
        assert not copy.requires_grad and copy.grad_fn is None


def test_buffers_of_tensors_the_state_no_longer_has_are_dropped() -> None:
    stager = ParallelStager(threads=1)
    stager.stage({"a": torch.zeros(4), "b": torch.zeros(8)})
    stager.stage({"a": torch.zeros(4), "b": torch.zeros(16)})  # b reshaped
    assert sorted(key[0] for key in stager._buffers) == [("a",), ("b",)]
    assert {tuple(b.shape) for b in stager._buffers.values()} == {(4,), (16,)}
