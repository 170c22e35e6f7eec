"""RoBERTa-style text encoders with any registered attention mechanism, and their task heads.

Parameter names are RoBERTa's. A head's loss includes the mechanisms' auxiliary loss, also returned as ``aux_loss``.
"""

from __future__ import annotations

from .supported_versions import SUPPORTED_TRANSFORMERS  # noqa: F401, I001 - first: explains an old Transformers
import torch
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.models.roberta.modeling_roberta import RobertaClassificationHead, RobertaPooler
from transformers.utils.generic import can_return_tuple

from .configuration_effattn import EffAttnRobertaConfig
from .encoder import EffAttnEncoder, EffAttnRobertaLayer
from .masking import padding_mask_from
from .outputs import (
    EffAttnMaskedLMOutput,
    EffAttnModelOutput,
    EffAttnMultipleChoiceOutput,
    EffAttnQuestionAnsweringOutput,
    EffAttnSequenceClassifierOutput,
    EffAttnTokenClassifierOutput,
    head_output,
    model_output,
)
from .position_extension import learned_length, tile_position_rows
from .pretrained import EffAttnPreTrainedModel, register_auto_classes

# RoBERTa checkpoints load as they are, BERT's after this renaming, with roberta_positions=False (all but BERT's
# sequence-classification head, which differs from RoBERTa's).
BERT_KEY_MAPPING = {
    r"^bert\.": "roberta.",
    r"cls\.predictions\.transform\.dense": "lm_head.dense",
    r"cls\.predictions\.transform\.LayerNorm": "lm_head.layer_norm",
    r"cls\.predictions\.decoder": "lm_head.decoder",
    r"cls\.predictions\.bias": "lm_head.bias",
}


class EffAttnRobertaEmbeddings(nn.Module):
    """Word, position and token-type embeddings: ``[B, N] -> [B, N, C]``."""

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__()
        self.padding_idx = config.pad_token_id
        self.roberta_positions = config.roberta_positions
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=self.padding_idx)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, config.hidden_size,
            padding_idx=self.padding_idx if self.roberta_positions else None,
        )
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def position_ids(self, input_ids: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
        """``[B, N]``: RoBERTa's, from ``padding_idx + 1``, or BERT's ``0 .. N-1``."""
        if not self.roberta_positions:
            return torch.arange(length, device=device).expand(batch, length)
        if input_ids is None:
            first = self.padding_idx + 1
            return torch.arange(first, length + first, device=device).expand(batch, length)
        real = input_ids.ne(self.padding_idx).long()
        return torch.cumsum(real, dim=1) * real + self.padding_idx

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        batch, length = inputs_embeds.shape[:2]
        if position_ids is None:
            position_ids = self.position_ids(input_ids, batch, length, inputs_embeds.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros(batch, length, dtype=torch.long, device=inputs_embeds.device)
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class EffAttnLMHead(nn.Module):
    """Masked-LM head: ``[B, N, C] -> [B, N, vocab]``."""

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(self.activation(self.dense(features))))


class EffAttnRobertaPreTrainedModel(EffAttnPreTrainedModel):
    """Base of the text models."""

    config_class = EffAttnRobertaConfig
    config: EffAttnRobertaConfig
    base_model_prefix = "roberta"
    _no_split_modules = ["EffAttnRobertaEmbeddings", "EffAttnRobertaLayer"]
    _keys_to_ignore_on_load_unexpected = [r"embeddings\.position_ids", r"embeddings\.token_type_ids"]
    checkpoint_key_mappings = {"roberta": {}, "bert": BERT_KEY_MAPPING}
    source_config_overrides = {"bert": {"roberta_positions": False}}

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, EffAttnLMHead):
            init.zeros_(module.bias)

    def extend_position_embeddings(self, config) -> None:
        """Longformer's copy of the position rows (``position_extension``); RoBERTa's reserved rows
        ``0 .. pad_token_id`` are kept, BERT's positions have none."""
        tile_position_rows(self.base_model.embeddings.position_embeddings, config.max_position_embeddings,
                           self.first_position_row(config))

    def position_period(self) -> int | None:
        """The length of the learned block that the position table repeats after Longformer's copy (a table
        extended and not trained since), or None where it repeats nothing."""
        rows = self.base_model.embeddings.position_embeddings.weight[self.first_position_row(self.config):]
        period = learned_length(rows.detach())
        return period if period < len(rows) else None

    @classmethod
    def extension_period(cls, saved) -> int:
        """A RoBERTa or BERT checkpoint's positions are all learned: an extension copies them in blocks of its
        maximum length."""
        return saved.attention_max_length

    @staticmethod
    def first_position_row(config) -> int:
        """The first row a token uses: RoBERTa reserves rows ``0 .. pad_token_id``, BERT none."""
        return config.pad_token_id + 1 if config.roberta_positions else 0


class EffAttnRobertaModel(EffAttnRobertaPreTrainedModel):
    """The bare encoder; with ``add_pooling_layer``, RoBERTa's pooler."""

    def __init__(self, config: EffAttnRobertaConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = EffAttnRobertaEmbeddings(config)
        self.encoder = EffAttnEncoder(config, EffAttnRobertaLayer)
        self.pooler = RobertaPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def check_length(self, length: int) -> None:
        """Raise for inputs longer than ``attention_max_length``."""
        maximum = self.config.attention_max_length
        if length > maximum:
            positions = f"max_position_embeddings={self.config.max_position_embeddings}"
            if self.config.roberta_positions:
                positions += f" minus pad_token_id + 1 = {self.config.pad_token_id + 1}"
            raise ValueError(
                f"Input length {length} exceeds this model's maximum of {maximum} tokens ({positions}): truncate "
                f"it, e.g. tokenizer(..., truncation=True, max_length={maximum}), or extend the positions: "
                f"hf-effattn convert CHECKPOINT --max_length {length} ..., or "
                f"from_pretrained(CHECKPOINT, max_length={length})."
            )

    @can_return_tuple
    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.LongTensor | None = None, position_ids: torch.LongTensor | None = None,
                inputs_embeds: torch.FloatTensor | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None) -> EffAttnModelOutput:
        """``input_ids [B, N]`` or ``inputs_embeds [B, N, C]`` -> ``[B, N, C]``, pooled ``[B, C]``."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        batch, length = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
        self.check_length(length)
        if input_ids is not None:
            self.warn_if_padding_and_no_attention_mask(input_ids, attention_mask)
        padding_mask = padding_mask_from(attention_mask, batch, length)
        embeddings = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        encoded = self.encoder(embeddings, padding_mask, output_attentions, output_hidden_states)
        return model_output(encoded, encoded.last_hidden_state, self.pooler)


class EffAttnRobertaForMaskedLM(EffAttnRobertaPreTrainedModel):
    """Masked LM: logits ``[B, N, vocab]`` (``sparse_prediction``: ``[M, vocab]``, M labels); labels ``[B, N]``."""

    _tied_weights_keys = {
        "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    }

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__(config)
        self.roberta = EffAttnRobertaModel(config, add_pooling_layer=False)
        self.lm_head = EffAttnLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                labels: torch.LongTensor | None = None, output_attentions=None, output_hidden_states=None,
                sparse_prediction: bool = False) -> EffAttnMaskedLMOutput:
        outputs = self.roberta(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                               output_attentions, output_hidden_states, return_dict=True)
        hidden_states = outputs.last_hidden_state
        if sparse_prediction:
            if labels is None:
                raise ValueError("sparse_prediction=True computes the logits at the labelled tokens only: pass labels.")
            labels = labels.to(hidden_states.device)
            hidden_states, labels = hidden_states[labels != -100], labels[labels != -100]  # [M, C], [M]
        logits = self.lm_head(hidden_states)
        loss = None if labels is None else self.loss_function(logits, labels, vocab_size=self.config.vocab_size)
        return head_output(EffAttnMaskedLMOutput, outputs, loss, logits=logits)


class EffAttnRobertaForSequenceClassification(EffAttnRobertaPreTrainedModel):
    """Classification or regression from the first token: logits ``[B, num_labels]``."""

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.roberta = EffAttnRobertaModel(config, add_pooling_layer=False)
        self.classifier = RobertaClassificationHead(config)
        self.post_init()

    @can_return_tuple
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                labels: torch.Tensor | None = None, output_attentions=None,
                output_hidden_states=None) -> EffAttnSequenceClassifierOutput:
        outputs = self.roberta(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                               output_attentions, output_hidden_states, return_dict=True)
        logits = self.classifier(outputs.last_hidden_state)
        loss = None if labels is None else self.loss_function(labels, logits, self.config)
        return head_output(EffAttnSequenceClassifierOutput, outputs, loss, logits=logits)


class EffAttnRobertaForTokenClassification(EffAttnRobertaPreTrainedModel):
    """Token classification: logits ``[B, N, num_labels]``; labels ``[B, N]``."""

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.roberta = EffAttnRobertaModel(config, add_pooling_layer=False)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                labels: torch.LongTensor | None = None, output_attentions=None,
                output_hidden_states=None) -> EffAttnTokenClassifierOutput:
        outputs = self.roberta(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                               output_attentions, output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None if labels is None else self.loss_function(logits, labels, self.config)
        return head_output(EffAttnTokenClassifierOutput, outputs, loss, logits=logits)


class EffAttnRobertaForQuestionAnswering(EffAttnRobertaPreTrainedModel):
    """Extractive QA: start and end logits ``[B, N]``; ``start_positions``, ``end_positions`` ``[B]``."""

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__(config)
        self.roberta = EffAttnRobertaModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                start_positions: torch.LongTensor | None = None, end_positions: torch.LongTensor | None = None,
                output_attentions=None, output_hidden_states=None) -> EffAttnQuestionAnsweringOutput:
        outputs = self.roberta(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                               output_attentions, output_hidden_states, return_dict=True)
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).split(1, dim=-1)
        start_logits, end_logits = start_logits.squeeze(-1).contiguous(), end_logits.squeeze(-1).contiguous()
        loss = self.loss_function(start_logits, end_logits, start_positions, end_positions)
        return head_output(EffAttnQuestionAnsweringOutput, outputs, loss, start_logits=start_logits,
                           end_logits=end_logits)


class EffAttnRobertaForMultipleChoice(EffAttnRobertaPreTrainedModel):
    """Multiple choice: inputs ``[B, num_choices, N]``; logits ``[B, num_choices]``; labels ``[B]``."""

    def __init__(self, config: EffAttnRobertaConfig):
        super().__init__(config)
        self.roberta = EffAttnRobertaModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                labels: torch.LongTensor | None = None, output_attentions=None,
                output_hidden_states=None) -> EffAttnMultipleChoiceOutput:
        num_choices = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        inputs = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)  # [B, choices, N, ...]
        outputs = self.roberta(*(None if x is None else x.flatten(0, 1) for x in inputs), output_attentions,
                               output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels.to(logits.device))
        return head_output(EffAttnMultipleChoiceOutput, outputs, loss, logits=logits)


AUTO_CLASSES = {
    "AutoModel": EffAttnRobertaModel,
    "AutoModelForMaskedLM": EffAttnRobertaForMaskedLM,
    "AutoModelForSequenceClassification": EffAttnRobertaForSequenceClassification,
    "AutoModelForTokenClassification": EffAttnRobertaForTokenClassification,
    "AutoModelForQuestionAnswering": EffAttnRobertaForQuestionAnswering,
    "AutoModelForMultipleChoice": EffAttnRobertaForMultipleChoice,
}
register_auto_classes(EffAttnRobertaPreTrainedModel, AUTO_CLASSES)

__all__ = [
    "EffAttnRobertaPreTrainedModel", "EffAttnRobertaModel", "EffAttnRobertaForMaskedLM",
    "EffAttnRobertaForSequenceClassification", "EffAttnRobertaForTokenClassification",
    "EffAttnRobertaForQuestionAnswering", "EffAttnRobertaForMultipleChoice",
]
