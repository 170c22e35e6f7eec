"""What an attention transfer did and reached: :class:`TransferReport` (per layer, :class:`LayerTransfer`), its
plain-text table and its JSON file, ``attention_transfer.json``, saved beside the model."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPORT_FILE = "attention_transfer.json"
REPORT_NUMBERS = ("steps", "learning_rate", "examples_seen", "hidden_cosine_before", "hidden_cosine_after",
                  "window_dropout")
LAYER_NUMBERS = ("layer", "mse_before", "mse_after", "cosine_before", "cosine_after")


@dataclass
class LayerTransfer:
    """One layer's attention-block error before and after the transfer: the MSE the transfer minimises and
    the mean cosine similarity of student and teacher outputs, over the real tokens of the report batches; with a
    local window beside the mechanism, the learned weight of the mechanism's part per head (``sigma(mechanism_logit)``)
    and the MSE after with the mechanism's part switched off (what the mechanism adds to the window)."""

    layer: int
    mse_before: float
    mse_after: float
    cosine_before: float
    cosine_after: float
    mechanism_weight: list[float] | None = None
    mse_after_window_alone: float | None = None


@dataclass
class TransferReport:
    """What a transfer did and reached. ``hidden_cosine_*`` compares the whole model's last hidden state with
    the teacher's, token by token (real tokens), without teacher forcing. ``longest_input`` is the most tokens
    (or patches) of a training batch, ``peak_memory_bytes`` the transfer's peak memory as
    ``peak_memory_method`` measured it (both ``None`` in reports written before they existed);
    ``mechanism_weight_learning_rate``: the gates' own learning rate, beside a local window or blocks (else None)."""

    attention_type: str
    train: str
    steps: int
    learning_rate: float
    examples_seen: int
    hidden_cosine_before: float
    hidden_cosine_after: float
    layers: list[LayerTransfer]
    data: str | None = None
    window_dropout: float = 0.0
    losses: list[float] = field(default_factory=list)
    longest_input: int | None = None
    peak_memory_bytes: int | None = None
    peak_memory_method: str | None = None
    mechanism_weight_learning_rate: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TransferReport":
        return cls(**{**values, "layers": [LayerTransfer(**layer) for layer in values["layers"]]})

    def save(self, folder) -> Path:
        """Write the report to ``folder/attention_transfer.json`` and return its path."""
        path = Path(folder) / REPORT_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def read(cls, folder) -> "TransferReport":
        """The report saved in ``folder``; ``ValueError`` naming the file when it is unreadable or no such report."""
        path = Path(folder) / REPORT_FILE
        try:
            report = cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"{path} is not an attention-transfer report ({type(error).__name__}: {error}): remove "
                             "it, or write the folder anew.") from None
        numbers = [getattr(report, name) for name in REPORT_NUMBERS]
        for layer in report.layers:  # the window's numbers may be absent (no window), the others may not
            numbers += [getattr(layer, name) for name in LAYER_NUMBERS]
            numbers += [*(layer.mechanism_weight or []), *([layer.mse_after_window_alone] if layer.mechanism_weight
                                                           else [])]
        if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in numbers):
            raise ValueError(f"{path} is not an attention-transfer report (a number is missing or not a number): "
                             "remove it, or write the folder anew.")
        return report

    def format(self) -> str:
        """A plain-text table: per layer, MSE and cosine before -> after, then the last hidden state's cosine."""
        lines = [f"Attention transfer to {self.attention_type!r}: {self.steps} steps, {self.examples_seen} examples, "
                 f"training {self.train!r} at lr {self.learning_rate:g}",
                 f"{'layer':>5}  {'MSE before':>10}  {'MSE after':>10}  {'cosine before':>13}  {'cosine after':>12}"]
        lines += [f"{r.layer:>5}  {r.mse_before:>10.4g}  {r.mse_after:>10.4g}  {r.cosine_before:>13.4f}  "
                  f"{r.cosine_after:>12.4f}" for r in self.layers]
        if any(r.mechanism_weight for r in self.layers):
            rate = "" if self.mechanism_weight_learning_rate is None else \
                f", the weights at lr {self.mechanism_weight_learning_rate:g}"
            lines.append(f"beside the local part (window dropout {self.window_dropout:g}{rate}): per layer, the MSE "
                         "after with the mechanism's part switched off, and its weight per head")
            lines += [f"{r.layer:>5}  {r.mse_after_window_alone:>10.4g}  "
                      + " ".join(f"{w:.3g}" for w in r.mechanism_weight) for r in self.layers if r.mechanism_weight]
        lines.append(f"last hidden state, token cosine to the teacher: {self.hidden_cosine_before:.4f} -> "
                     f"{self.hidden_cosine_after:.4f}")
        if self.longest_input is not None:
            lines.append(f"longest input: {self.longest_input} tokens")
        if self.peak_memory_bytes is not None:
            lines.append(f"peak memory: {self.peak_memory_bytes / 2**30:.2f} GiB ({self.peak_memory_method})")
        return "\n".join(lines)


def layer_reports(before: list[tuple[float, float]], after: list[tuple[float, float]],
                  weights: list | None = None, window_alone: list | None = None) -> list[LayerTransfer]:
    """Per layer, the ``(MSE, cosine)`` measured before and after the transfer, as the report's rows; with a local
    window, each layer's mechanism weights per head and its MSE after with the window alone (None for a layer without
    a window)."""
    weights, window_alone = weights or [None] * len(after), window_alone or [None] * len(after)
    return [LayerTransfer(i, b[0], a[0], b[1], a[1], w, alone if w is not None else None)
            for i, (b, a, w, alone) in enumerate(zip(before, after, weights, window_alone))]
