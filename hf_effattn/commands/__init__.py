"""The ``hf-effattn`` command (:mod:`.main`) and its subcommands, one module each, named as the subcommand:
:mod:`.list`, :mod:`.convert`, :mod:`.bench`, :mod:`.train_task` (``train-task``) and :mod:`.demo`.

Each subcommand module turns its options into a call of the package's Python API (``hf_effattn.conversion``,
``hf_effattn.benchmark``, ``hf_effattn.synthetic_tasks``, ``hf_effattn.finetuning``) and holds no other logic.
"""
