"""Fine-tuning and publishing: the shared logic of ``finetune/*.py`` and ``hf-effattn demo``.

Modules: ``arguments`` (command-line options), ``data`` / ``text_data`` / ``image_data`` / ``masked_lm_data``
(datasets in their Hub schemas, tokenisation, torch-only augmentation, token blocks and their masks), ``metrics``
(GLUE's metrics, by the ``evaluate`` module of :mod:`hf_effattn.metrics`), ``models`` (checkpoints with the
attention swapped, or presets trained from scratch), ``lora`` (LoRA with PEFT, and adapter folders with their
base), ``loop`` (the Accelerate loop), ``checkpoints`` (save and exact resume), ``publishing`` (Hub-ready folders
and upload, with the card of :mod:`hf_effattn.model_cards`), ``run`` (a whole run, and the ``Recipe`` each script
is), ``text_classification`` / ``image_classification`` / ``masked_lm`` (the scripts' recipes, ``main`` and
``train``; ``masked_lm`` also its loss-and-perplexity loop), ``text_classification_trainer`` (the same with
``transformers.Trainer``), each also run with ``python -m``; ``synthetic`` (the demo's task, tokenizer and
checkpoint).

Submodules import their heavy dependencies (datasets, accelerate) when used, not on package import.
"""
