"""The device lane's device: ``--device`` (tests/conftest.py), CUDA unless told otherwise."""

import pytest
import torch


@pytest.fixture(scope="session")
def device(pytestconfig):
    """``torch.device`` of ``--device``; every test that takes it is skipped where that is CUDA and no GPU is present.
    On CUDA, float32 products and convolutions run in float32, not TF32, as the lane's tolerances assume."""
    device = torch.device(pytestconfig.getoption("device"))
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device: the device lane runs on a GPU, or on this CPU with --device cpu")
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield device
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
