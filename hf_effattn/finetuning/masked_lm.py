"""Masked-LM continued pretraining (Transformers' ``run_mlm_no_trainer.py``, with this package's loop): what
``finetune/run_mlm.py`` runs, and the same without a clone of the repository: ``python -m
hf_effattn.finetuning.masked_lm`` (or ``accelerate launch -m hf_effattn.finetuning.masked_lm``) with the script's
options; from Python, :func:`main` (a command line) or :func:`train` (the options as keyword arguments), each
returning the run's ``TrainingOutcome``.

The model is ``EffAttnRobertaForMaskedLM`` from a RoBERTa/BERT checkpoint (its attention swapped for
``--attention_type``, its positions extended to ``--max_length`` tokens) or from one of this package's text folders.
A checkpoint without a masked-LM head (a bare encoder, such as a sentence-transformers model) is refused unless
``--new_mlm_head`` asks for a new one (initialised, its decoder tied to the word embeddings); ``--train_head_only``
freezes everything else, e.g. to fit a new head before the encoder trains. Evaluation reports the mean cross-entropy
over the masked tokens (``loss``) and its exponential (``perplexity``); the best model has the lowest perplexity.
The model loads before the data (its head refused or not at once); a training batch or an evaluation split in which
no token was masked, whose loss would be undefined, stops the run with the options to change.

Everything else is the fine-tuning scripts': checkpoints and exact resumption, the output folder's rules, tracking,
mixed precision through Accelerate, and the Hub-ready folder with its model card.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math

import torch
import torch.nn.functional as F

from ..options.argument_types import positive_int
from ..model_cards import CardKind
from ..modeling import load_checks
from ..modeling.modeling_effattn_roberta import EffAttnRobertaForMaskedLM
from ..modeling.tokenization_effattn import EffAttnBlockTokenizer
from ..options.user_errors import run_script
from ..options.window_options import local_part_options
from .arguments import check_against_model
from .loop import Finetuner
from .masked_lm_data import NO_LABELS, add_masked_lm_data_arguments, prepare_masked_lm_data
from .models import checkpoint_source, config_of_checkpoint, is_preset, load_tokenizer
from .run import Recipe

logger = logging.getLogger(__name__)

IGNORED = -100  # the label of a token that is not a target
HEAD_PREFIX = "lm_head."
MASKED_LM = CardKind(
    pipeline_tag="fill-mask",
    architecture_tag="roberta",
    processor_class="AutoTokenizer",
    model_class="AutoModelForMaskedLM",
    usage_example=(
        '```python\ninputs = processor(f"Paris is the {processor.mask_token} of France.", return_tensors="pt")\n'
        "position = (inputs.input_ids[0] == processor.mask_token_id).nonzero()[0, 0]\n"
        "print(processor.decode(model(**inputs).logits[0, position].argmax()))\n```"
    ),
    training_phrase="trained further by masked-language modelling (continued pretraining)",
)


def add_masked_lm_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``run_mlm.py`` beyond the shared ones: its data, positions, the head and memory."""
    add_masked_lm_data_arguments(parser)
    group = parser.add_argument_group("masked LM")
    group.add_argument("--max_length", type=positive_int, default=None,
                       help="Extend a RoBERTa/BERT checkpoint's positions to this many tokens (Longformer-style "
                            "copies of the learnt ones) as it is loaded; default: keep its own.")
    group.add_argument("--new_mlm_head", action="store_true",
                       help="Give a checkpoint without a masked-LM head (an encoder only, e.g. MiniLM) a new one, "
                            "initialised, its decoder tied to the word embeddings.")
    group.add_argument("--train_head_only", action="store_true",
                       help="Train the masked-LM head alone, the encoder and the word embeddings (the tied decoder) "
                            "frozen: e.g. first fit a new head at the checkpoint's own length.")
    group.add_argument("--gradient_checkpointing", action="store_true",
                       help="Recompute each layer's activations in the backward pass: less memory for long inputs, "
                            "about a third more compute.")


def checkpoint_source_config(args: argparse.Namespace) -> dict:
    """The ``config.json`` of ``--model_name_or_path`` (:func:`~.models.checkpoint_source`), read before anything is
    loaded; refuses presets, vision checkpoints and other model types, and ``--lora_r``."""
    if is_preset(args.model_name_or_path):
        raise ValueError(f"{args.model_name_or_path!r} is a preset (random weights): masked-LM continued pretraining "
                         "starts from a pretrained checkpoint; convert one first, or give a RoBERTa/BERT checkpoint.")
    if args.lora_r is not None:
        raise ValueError("--lora_r: run_mlm.py trains the whole model (or, with --train_head_only, the head): drop "
                         "--lora_r.")
    return checkpoint_source(args, "text", "masked-LM pretraining")


def check_sequence_length(args: argparse.Namespace, limit: int) -> None:
    """``--max_seq_length`` fits the ``limit`` tokens the model embeds; else the error names the fixes."""
    if args.max_seq_length <= limit:
        return
    length = args.max_seq_length
    raise ValueError(f"--max_seq_length {length} is longer than the {limit} tokens {args.model_name_or_path} takes: "
                     f"extend its positions with --max_length {length} (or convert it first with hf-effattn convert "
                     f"... --max_length {length}), or use --max_seq_length {limit} or less.")


def check_extension(args: argparse.Namespace, limit: int) -> None:
    """``--max_length`` extends the ``limit`` tokens the checkpoint takes, never cuts them."""
    if args.max_length is None or args.max_length >= limit:
        return
    raise ValueError(f"--max_length {args.max_length} is below the {limit} tokens {args.model_name_or_path} takes "
                     "already: positions are extended, never cut. Drop --max_length; for shorter examples, use "
                     f"--max_seq_length {args.max_length}.")


def check_options(args: argparse.Namespace) -> None:
    """Refuse, before any data is read, what the checkpoint cannot honour: see :func:`checkpoint_source_config`,
    :func:`check_extension` (against its own length, read with softmax attention, whose settings refuse nothing),
    then every check of ``from_pretrained`` at the extended length (:func:`~.models.config_of_checkpoint`) and the
    options against that config (:func:`~.arguments.check_against_model`)."""
    source = checkpoint_source_config(args)
    saved = EffAttnRobertaForMaskedLM.config_from_checkpoint(source, "sdpa", None, {})[0]
    check_extension(args, saved.attention_max_length)
    extension = {"max_length": args.max_length} if args.max_length else {}
    with load_logs_deferred():
        config = config_of_checkpoint(args, "text", EffAttnRobertaForMaskedLM, "masked-LM pretraining", source,
                                      **extension)
    check_against_model(args, config)
    check_sequence_length(args, config.attention_max_length)
    check_block_special_tokens(args, config.local_block)
    check_shuffled_pieces(args)


@contextlib.contextmanager
def load_logs_deferred():
    """Inside, the load's pre-flight check (``plan_load``) logs nothing: what it logs, a conversion of the
    checkpoint's attention, is logged once, by the load itself (:func:`load_masked_lm`), which runs the same check."""
    level = load_checks.logger.level
    load_checks.logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        load_checks.logger.setLevel(level)


def check_shuffled_pieces(args: argparse.Namespace) -> None:
    """``--shuffled_pieces`` cuts texts that are then concatenated into blocks: refused with ``--line_by_line`` and
    above ``--max_seq_length`` (each block would read a part of one piece). Pieces of the block's length were
    measured (the long-document benchmark's chunks at 2,048 on pieces of 2,048)."""
    if not args.shuffled_pieces:
        return
    if args.line_by_line:
        raise ValueError("--shuffled_pieces cuts texts that are concatenated into blocks; --line_by_line reads each "
                         "text alone: drop one of them.")
    if args.shuffled_pieces > args.max_seq_length:
        raise ValueError(f"--shuffled_pieces {args.shuffled_pieces} is above --max_seq_length "
                         f"{args.max_seq_length}: each block would read a part of one piece. Give a piece the block's "
                         f"length or less (e.g. --shuffled_pieces {args.max_seq_length}), or drop the option.")


def check_block_special_tokens(args: argparse.Namespace, block: int | None) -> None:
    """``--block_special_tokens`` frames the model's aligned blocks (``block``, its ``local_block``): refused without
    blocks, with ``--line_by_line`` and with blocks too short to frame."""
    if not args.block_special_tokens:
        return
    if block is None:
        raise ValueError(f"--block_special_tokens frames the aligned blocks of a model with local_block, and "
                         f"{args.model_name_or_path} has none: add --local_block (e.g. --local_block 512), or drop "
                         "the option.")
    if args.line_by_line:
        raise ValueError("--block_special_tokens lays out concatenated texts in framed blocks; --line_by_line reads "
                         "each text alone: drop one of them.")
    if block < 3:
        raise ValueError(f"--block_special_tokens: blocks of local_block={block} tokens leave no room for text "
                         "between [CLS] and [SEP]: use larger blocks, or drop the option.")


def load_masked_lm(args: argparse.Namespace, labels=None) -> EffAttnRobertaForMaskedLM:
    """The masked-LM model of ``args``: loaded with the requested attention (and positions); a missing head refused
    or, with ``--new_mlm_head``, initialised; frozen but for the head with ``--train_head_only``."""
    extension = {"max_length": args.max_length} if args.max_length else {}
    model, info = EffAttnRobertaForMaskedLM.from_pretrained(
        args.model_name_or_path, attention_type=args.attention_type, attention_config=args.attention_config,
        convert_attention=args.convert_attention, ignore_mismatched_sizes=args.ignore_mismatched_sizes,
        output_loading_info=True, **extension, **local_part_options(args),
    )
    check_head(args, sorted(key for key in info["missing_keys"] if key.startswith(HEAD_PREFIX)))
    if info["position_extension"]:  # the model card says so (run.card_content)
        args.position_extension = {**info["position_extension"], "trained_length": args.max_seq_length}
    check_sequence_length(args, model.config.attention_max_length)
    if args.train_head_only:
        for name, parameter in model.named_parameters():
            parameter.requires_grad = name.startswith(HEAD_PREFIX)
        trained = sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
        logger.info(f"--train_head_only: training the masked-LM head's {trained:,} parameters; the encoder and the "
                    "word embeddings (the head's tied decoder) are frozen.")
    if args.gradient_checkpointing:  # Transformers >= 5.x: activation_checkpointing_enable, the older name before
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    return model


def check_head(args: argparse.Namespace, new_head_weights: list[str]) -> None:
    """A checkpoint that lacks (part of) a masked-LM head needs ``--new_mlm_head``; one that has it must not get it."""
    path = args.model_name_or_path
    if new_head_weights and not args.new_mlm_head:
        raise ValueError(f"{path} has no masked-LM head (it lacks {', '.join(new_head_weights)}): pass --new_mlm_head "
                         "to initialise one (its decoder tied to the word embeddings), best trained first alone with "
                         "--train_head_only.")
    if args.new_mlm_head and not new_head_weights:
        raise ValueError(f"--new_mlm_head: {path} has a masked-LM head already, which continued pretraining keeps: "
                         "drop --new_mlm_head.")
    if new_head_weights:
        logger.warning(f"--new_mlm_head: a new masked-LM head for {path} ({', '.join(new_head_weights)} initialised; "
                       "its decoder is tied to the word embeddings).")


def masked_token_losses(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per example, the summed cross-entropy over its masked tokens and their count: logits ``[B, N, V]``, labels
    ``[B, N]`` (``-100`` where not a target) -> ``([B]`` float32, ``[B]`` int64``)``. Only the masked positions'
    logits are cast to float32."""
    masked = labels != IGNORED
    losses = F.cross_entropy(logits[masked].float(), labels[masked], reduction="none")  # [M]
    sums = torch.zeros(labels.shape[0], device=logits.device).index_add_(0, masked.nonzero()[:, 0], losses)
    return sums, masked.sum(dim=1)


def loss_metrics(loss_sum: float, tokens: int) -> dict[str, float]:
    """The mean loss over ``tokens`` (at least one) masked tokens and the perplexity, its exponential (infinite past
    a float's range)."""
    loss = loss_sum / tokens
    try:
        perplexity = math.exp(loss)
    except OverflowError:
        perplexity = math.inf
    return {"loss": loss, "perplexity": perplexity}


def masking_advice(args: argparse.Namespace) -> str:
    """What to change when too few tokens are masked for a loss."""
    return (f"--mlm_probability {args.mlm_probability:g} of blocks of --max_seq_length {args.max_seq_length} tokens "
            "masks too few: raise --mlm_probability (BERT's is 0.15) or --max_seq_length")


class MaskedLMFinetuner(Finetuner):
    """The loop of the fine-tuning scripts, training with sparse prediction (the head only at the masked tokens) and
    evaluating a masked-LM model by its loss and perplexity."""

    def training_loss(self, batch: dict) -> torch.Tensor:
        return self.model(**batch, sparse_prediction=True).loss

    def non_finite_loss(self, loss: float, batch: dict) -> str:
        """A batch without a masked token has no loss (nan): name the masking options; else the loop's message."""
        if (batch["labels"] != IGNORED).any():
            return super().non_finite_loss(loss, batch)
        return (f"No token of the training batch at step {self.state.completed_steps + 1} was masked, so its loss is "
                f"undefined ({loss}): {masking_advice(self.args)}, or the batch size. The checkpoints saved so far "
                "are kept.")

    def evaluate_split(self, loader) -> dict[str, float]:
        """The mean cross-entropy over every masked token of the split (all processes), and its exponential; a split
        without a masked token is refused (its loss would be nan)."""
        loss_sum, tokens = torch.zeros((), dtype=torch.float64), 0
        for batch in loader:
            labels = batch.pop("labels")
            sums, counts = masked_token_losses(self.model(**batch).logits, labels)
            sums, counts = self.accelerator.gather_for_metrics((sums, counts))
            loss_sum += sums.double().sum().cpu()
            tokens += int(counts.sum())
        if not tokens:
            raise ValueError(f"No token of the evaluation data was masked, so its loss is undefined: "
                             f"{masking_advice(self.args)}, or give more evaluation text.")
        return loss_metrics(loss_sum.item(), tokens)


def framing_tokenizer(args: argparse.Namespace, tokenizer, config):
    """What the output folder saves: with ``--block_special_tokens``, the tokenizer that frames every block as the
    run framed its examples (``EffAttnBlockTokenizer``, remote code), so that Transformers alone reads the model as
    it was trained; else ``tokenizer``. Used only to save: the data was framed before."""
    if not args.block_special_tokens:
        return tokenizer
    return EffAttnBlockTokenizer.from_tokenizer(tokenizer, config.local_block)


RECIPE = Recipe(
    description="Continue the masked-LM pretraining of an efficient-attention RoBERTa-style encoder on raw text.",
    add_data_arguments=add_masked_lm_arguments,
    load_processor=load_tokenizer,
    prepare_data=prepare_masked_lm_data,
    load_model=load_masked_lm,
    card_kind=MASKED_LM,
    processor_option="tokenizer_name",
    finetuner=MaskedLMFinetuner,
    check_options=check_options,
    labels=NO_LABELS,
    saved_processor=framing_tokenizer,
)
build_parser = RECIPE.build_parser
parse_args = RECIPE.parse_args


train = RECIPE.train


def main(argv: list[str] | None = None):
    """Run ``run_mlm.py`` with the options ``argv`` (default: the command line); returns the ``TrainingOutcome``:
    ``outcome.final_metrics["validation"]`` holds ``loss`` and ``perplexity``, ``outcome.finished`` says whether
    the run reached its last step (else it paused at ``--stop_after_steps``)."""
    return RECIPE.main(argv)


if __name__ == "__main__":  # python -m / accelerate launch -m hf_effattn.finetuning.masked_lm
    run_script(main)
