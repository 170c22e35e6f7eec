"""Text classification fine-tuning (GLUE, IMDB, Amazon polarity, local files): what
``finetune/run_text_classification.py`` runs, and the same without a clone of the repository:
``python -m hf_effattn.finetuning.text_classification`` (or ``accelerate launch -m hf_effattn.finetuning.text_classification``) with the
script's options; from Python, :func:`main` (a command line) or :func:`train` (the options as keyword arguments)."""

from ..model_cards import TEXT_CLASSIFICATION
from ..options.user_errors import run_script
from .models import check_classifier_options, load_text_classifier, load_tokenizer
from .run import Recipe
from .text_data import add_text_data_arguments, prepare_text_data

RECIPE = Recipe(
    description="Fine-tune an efficient-attention RoBERTa-style encoder for text classification.",
    add_data_arguments=add_text_data_arguments,
    load_processor=load_tokenizer,
    prepare_data=prepare_text_data,
    load_model=load_text_classifier,
    processor_option="tokenizer_name",
    card_kind=TEXT_CLASSIFICATION,
    check_options=check_classifier_options("text"),
)
build_parser = RECIPE.build_parser
parse_args = RECIPE.parse_args
main = RECIPE.main
train = RECIPE.train

if __name__ == "__main__":  # python -m / accelerate launch -m hf_effattn.finetuning.text_classification
    run_script(main)
