"""The device lane's device (``--device``, tests/conftest.py: CUDA unless told otherwise), and the dtype and path
(``fast_paths`` mode) that every test of the lane is run in."""

import pytest
import torch

from helpers.device_lane import PATHS, PRECISIONS, skip_where_fast_paths_cannot_run

# Each case, dtype and mask compiles its mechanism's fast path anew, in one process: past Dynamo's default limit of
# 8 graphs per function it would run the rest uncompiled without failing, and the lane would test the exact path
# under the fast path's name.
COMPILED_GRAPHS_LIMIT = 4096


@pytest.fixture(scope="session")
def device(pytestconfig):
    """``torch.device`` of ``--device``; every test that takes it is skipped where that is CUDA and no GPU is present.
    On CUDA, float32 products and convolutions run in float32, not TF32, as the lane's tolerances assume; every
    fast path the lane runs is compiled (:data:`COMPILED_GRAPHS_LIMIT`)."""
    device = torch.device(pytestconfig.getoption("device"))
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device: the device lane runs on a GPU, or on this CPU with --device cpu")
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    with torch._dynamo.config.patch(cache_size_limit=COMPILED_GRAPHS_LIMIT,
                                    accumulated_cache_size_limit=COMPILED_GRAPHS_LIMIT):
        yield device
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


@pytest.fixture(params=list(PRECISIONS))
def dtype(request) -> str:
    """Each of the lane's precisions, by name: ``"float32"``, ``"bfloat16"``."""
    return request.param


@pytest.fixture(params=PATHS)
def path(request, device, dtype) -> str:
    """Each ``fast_paths`` mode compared: ``"exact"``, and ``"fast"`` where a fast path can run (skipped elsewhere)."""
    skip_where_fast_paths_cannot_run(request.param, device, PRECISIONS[dtype])
    return request.param
