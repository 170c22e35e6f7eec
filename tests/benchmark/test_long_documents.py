"""The long-document benchmark's own logic (benchmarks/long_documents): cleaning, masking and windows."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "long_documents"))

import build_corpus  # noqa: E402
import run_masked_lm  # noqa: E402


class Tokenizer:
    """What the masking reads of a tokenizer: its size and special ids."""

    mask_token_id, cls_token_id, sep_token_id = 3, 1, 2

    def __len__(self):
        return 100


def test_clean_drops_punctuation_lines_and_repeated_blank_lines():
    text = "Title\n=====\n\n\n\nSome text.   \n+----+----+\n| a  | b  |\n"
    assert build_corpus.clean(text) == "Title\n\nSome text.\n| a  | b  |"


def test_masking_is_bert_s_and_reproducible():
    ids = torch.arange(10, 4010)
    inputs, labels = run_masked_lm.mask_tokens(ids, Tokenizer(), torch.Generator().manual_seed(0))
    again = run_masked_lm.mask_tokens(ids, Tokenizer(), torch.Generator().manual_seed(0))
    assert torch.equal(inputs, again[0]) and torch.equal(labels, again[1])
    chosen = labels != -100
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    assert 0.12 < chosen.float().mean() < 0.18
    assert 0.75 < (inputs[chosen] == Tokenizer.mask_token_id).float().mean() < 0.85


@pytest.mark.parametrize("content", [510, 2040])
def test_windows_hold_the_same_masked_tokens_at_every_length(content):
    ids = torch.arange(10, 2050)
    inputs, labels = run_masked_lm.mask_tokens(ids, Tokenizer(), torch.Generator().manual_seed(1))
    windows = run_masked_lm.windows(inputs, labels, Tokenizer(), content)
    assert len(windows) == 2040 // content
    for window_ids, window_labels in windows:
        assert window_ids.shape == window_labels.shape == (1, content + 2)
        assert window_ids[0, 0] == Tokenizer.cls_token_id and window_ids[0, -1] == Tokenizer.sep_token_id
        assert window_labels[0, 0] == window_labels[0, -1] == -100
    assert torch.equal(torch.cat([w[0][0, 1:-1] for w in windows]), inputs)
    assert torch.equal(torch.cat([w[1][0, 1:-1] for w in windows]), labels)


def test_each_stage_runs_for_the_attentions_it_applies_to():
    everything = ["sdpa", "kerformer", "psf"]
    assert run_masked_lm.stage_attentions("head", ["kerformer"]) == ["sdpa"]
    assert run_masked_lm.stage_attentions("mlm_512", everything) == ["sdpa"]
    assert run_masked_lm.stage_attentions("extend", everything) == everything
    for stage in ("transfer", "mlm", "mlm_more"):  # sdpa is the teacher, and not pretrained at 2,048
        assert run_masked_lm.stage_attentions(stage, everything) == ["kerformer", "psf"]
