#!/usr/bin/env python
"""Fine-tune an efficient-attention RoBERTa-style encoder for text classification.

GLUE (``--task_name sst2``, ... from ``nyu-mll/glue``), IMDB (``--dataset_name stanfordnlp/imdb``), Amazon
polarity (``--dataset_name fancyzhx/amazon_polarity``) or local csv/json/parquet files (``--train_file``).
Runs on one device or many::

    accelerate launch finetune/run_text_classification.py --model_name_or_path FacebookAI/roberta-base \\
        --attention_type kerformer --task_name sst2 --output_dir outputs/roberta-kerformer-sst2

``--help`` lists every option; the logic lives in ``hf_effattn.finetuning``.
"""

from hf_effattn.finetuning.text_classification import main
from hf_effattn.options.user_errors import run_script

if __name__ == "__main__":
    run_script(main)  # a bad option or bad data: one line and exit status 2 (HF_EFFATTN_DEBUG=1: the traceback)
