#!/usr/bin/env python
"""Continue the masked-LM pretraining of an efficient-attention RoBERTa-style encoder on raw text, e.g. at a longer
length than its checkpoint was pretrained for.

A Hub dataset (``--dataset_name wikitext --dataset_config_name wikitext-103-raw-v1``) or local files
(``--train_file docs.txt``, or .json/.jsonl with a text column). Runs on one device or many::

    accelerate launch finetune/run_mlm.py --model_name_or_path FacebookAI/roberta-base --attention_type kerformer \\
        --max_length 4096 --max_seq_length 4096 --dataset_name wikitext \\
        --dataset_config_name wikitext-103-raw-v1 --output_dir outputs/roberta-kerformer-4096-mlm

``--help`` lists every option; the logic lives in ``hf_effattn.finetuning.masked_lm``.
"""

from hf_effattn.finetuning.masked_lm import main
from hf_effattn.options.user_errors import run_script

if __name__ == "__main__":
    run_script(main)  # a bad option or bad data: one line and exit status 2 (HF_EFFATTN_DEBUG=1: the traceback)
