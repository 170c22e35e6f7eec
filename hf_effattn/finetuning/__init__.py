"""Fine-tuning and publishing: the shared logic of ``finetune/*.py`` and ``hf-effattn demo``.

Modules: ``arguments`` (command-line options), ``data`` / ``text_data`` / ``image_data`` (datasets in their
Hub schemas, tokenisation, torch-only augmentation), ``metrics`` (GLUE's metrics, by the ``evaluate`` module of
:mod:`hf_effattn.metrics`), ``models`` (checkpoints with the attention swapped, or presets trained from scratch),
``lora`` (LoRA with PEFT, and adapter folders with their base), ``loop`` (the Accelerate loop), ``checkpoints``
(save and exact resume), ``model_card`` and ``publishing`` (Hub-ready folders and upload), ``run`` (a whole run, and the
``Recipe`` each script is), ``text_classification`` / ``image_classification`` (the scripts' recipes and
``main``), ``synthetic`` (the demo's task, tokenizer and checkpoint).

Submodules import their heavy dependencies (datasets, accelerate) when used, not on package import.
"""
