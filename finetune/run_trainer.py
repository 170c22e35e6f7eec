#!/usr/bin/env python
"""Fine-tune an efficient-attention RoBERTa-style encoder for text classification with ``transformers.Trainer``.

The same data options as ``run_text_classification.py`` (GLUE, IMDB, Amazon polarity, local files) and the model
options (``--attention_type``, ``--attention_config``, ``--attention_transfer_steps``), plus every
``TrainingArguments`` option::

    python finetune/run_trainer.py --model_name_or_path FacebookAI/roberta-base --attention_type kerformer \\
        --task_name sst2 --output_dir outputs/roberta-kerformer-sst2-trainer --eval_strategy epoch

``--help`` lists every option; the logic lives in ``hf_effattn.finetuning.text_classification_trainer``.
"""

from hf_effattn.finetuning.text_classification_trainer import main
from hf_effattn.options.user_errors import run_script

if __name__ == "__main__":
    run_script(main)  # a bad option or bad data: one line and exit status 2 (HF_EFFATTN_DEBUG=1: the traceback)
