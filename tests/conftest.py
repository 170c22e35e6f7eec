"""Settings shared by the whole test suite."""

import logging
import os

import pytest
import torch

# Without a GPU, Triton's kernels (PSF's, modeling/chord_kernels.py) run in its interpreter on the CPU. Triton reads
# the switch when it is first imported, which importing the package does: here, before any test imports it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The test models are tiny: intra-op threads gain nothing, and on a busy 2-core machine OpenMP's waiting
# threads slow small operations down by up to two orders of magnitude (seen: 0.7 s -> 70 s for a Trainer run).
torch.set_num_threads(1)
# Tests compare runs bit for bit (a resumed run with an uninterrupted one, recomputed activations with stored ones):
# PyTorch's deterministic kernels, wherever a device has a choice (a warning, not an error, for an op without one).
torch.use_deterministic_algorithms(True, warn_only=True)


def pytest_addoption(parser):
    parser.addoption(
        "--device", default="cuda",
        help="the device of the device lane, tests/cuda: cuda (the default; its tests are skipped without a GPU) "
             "or cpu, to run the same lane on this machine's CPU")


def all_loggers() -> list[logging.Logger]:
    return [logging.getLogger()] + [
        logger for logger in logging.root.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]


@pytest.fixture(autouse=True)
def restore_logger_levels():
    """Command entry points (the demo, the fine-tuning loop) quiet library loggers for their process; tests run
    them in-process, so every test leaves the logger levels as it found them."""
    levels = {logger: logger.level for logger in all_loggers()}
    yield
    for logger in all_loggers():
        logger.setLevel(levels.get(logger, logging.NOTSET))
