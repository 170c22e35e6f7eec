"""Attention transfer: train a converted model's new attention to reproduce its source's softmax attention.

A pretrained RoBERTa, BERT or ViT whose self-attention is swapped for an efficient mechanism keeps every other
weight, but its attention starts from scratch (or from query/key/value projections made for softmax), and its
hidden states drift far from the original's. Attention transfer (as LoLCATs and Hedgehog do for decoders) closes
that gap before fine-tuning, with no labels, layer by layer:

* the *teacher* is the source checkpoint with its own softmax attention (``sdpa``), same weights
  (:mod:`.teacher`);
* each layer's *student* mechanism gets the teacher's input to that layer (teacher forcing: layers train in
  parallel and errors do not compound), the teacher's padding mask, and the state the previous student layer
  hands on (DBA's Z, Singularformer's residual scores), exactly as in the model;
* its loss is the mean-squared error between the two attention-block outputs after the output projection,
  ``W_o attention(x)`` ``[B, N, C]``, over real tokens only: pads never enter the loss (:mod:`.losses`).

The loss of the whole step is the sum of the layers' losses; what trains and the loop are :mod:`.training`, what a
transfer did and reached is :class:`TransferReport` (:mod:`.report`), its peak memory :mod:`.peak_memory`.

    teacher = EffAttnRobertaModel.from_pretrained(source, attention_type="sdpa")
    model = EffAttnRobertaForSequenceClassification.from_pretrained(source, attention_type="kerformer")
    report = transfer_attention(model, teacher, loader, steps=1000)   # loader yields tokenizer batches
    print(report.format())

``hf-effattn convert SRC --attention_type X --transfer_data FILE --transfer_steps N`` does the same from the
shell (see :mod:`.data` for the data and the length texts are truncated to), and the fine-tuning scripts do it
with ``--attention_transfer_steps N`` on the task's own training inputs.

Long inputs: the teacher of a model whose positions were extended is extended the same way, and computes its
softmax attention in chunks of queries, so that no ``[B, h, N, N]`` score tensor is ever held (:mod:`.teacher`).
"""

from .data import DEFAULT_LENGTH, MODEL_LENGTH, transfer_length
from .report import REPORT_FILE, LayerTransfer, TransferReport
from .teacher import SOFTMAX, check_softmax, load_teacher
from .training import PROJECTIONS, TRAINABLE, transfer_attention

__all__ = ["DEFAULT_LENGTH", "LayerTransfer", "MODEL_LENGTH", "PROJECTIONS", "REPORT_FILE", "SOFTMAX", "TRAINABLE",
           "TransferReport", "check_softmax", "load_teacher", "transfer_attention", "transfer_length"]
