"""The PSF paper's synthetic long-range tasks (adding problem, temporal order) and LRA ListOps: seeded
generators (:mod:`.generators`), a small encoder over any registered mechanism (:mod:`.model`) and the
``hf-effattn train-task`` command (:mod:`.training`)."""

from .generators import adding_problem, encode_listops, listops, temporal_order
from .training import TASKS, add_arguments, run, train_task

__all__ = ["TASKS", "adding_problem", "add_arguments", "encode_listops", "listops", "run", "temporal_order",
           "train_task"]
