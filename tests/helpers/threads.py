"""A fixture for tests that run the CLI commands with ``--threads 1`` (tiny tensors, and no spinning worker
threads on a busy machine): it gives the rest of the session its thread count back."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
