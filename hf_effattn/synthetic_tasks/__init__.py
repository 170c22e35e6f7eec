"""The PSF paper's synthetic long-range tasks (adding problem, temporal order) and LRA ListOps: seeded
generators (:mod:`.generators`), a small encoder over any registered mechanism (:mod:`.model`) and its training
(:mod:`.training`); ``hf-effattn train-task`` (:mod:`hf_effattn.commands.train_task`) is its command line."""

from .generators import adding_problem, encode_listops, listops, temporal_order
from .training import TASKS, train_task

__all__ = ["TASKS", "adding_problem", "encode_listops", "listops", "temporal_order", "train_task"]
