"""research/long_documents/psf_bfloat16.py: its emulation of PSF's kernels' bfloat16 arithmetic is the kernels'
(one factor against the Triton kernel, in Triton's interpreter), it runs inside its block only, and its losses are
paired token by token."""

from __future__ import annotations

import json
from functools import partial
from importlib.util import find_spec

import pytest
import torch

import psf_bfloat16

from hf_effattn.modeling.attention_psf import chord_offsets
from hf_effattn.modeling.chord_mixes import circular_rows, cyclic_chord_mix

from helpers.device_lane import PRECISIONS, relative_error
from helpers.mechanisms import build, mixed_batch


@pytest.mark.skipif(find_spec("triton") is None, reason="Triton is not installed (the test extra installs it)")
def test_one_factor_in_the_kernels_arithmetic_is_the_kernel_to_its_rounding():
    """The emulated factor and the Triton kernel sum the same float32 products and store bfloat16: within one unit in
    the last place (the interpreter truncates, the emulation rounds to the nearest), padded rows included."""
    from hf_effattn.modeling import chord_kernels

    generator = torch.Generator().manual_seed(0)
    values = torch.randn(2, 12, 150, generator=generator).to(torch.bfloat16)
    weights = torch.randn(2, 12, 6, generator=generator)
    lengths, offsets = torch.tensor([12, 7]), chord_offsets(6)
    factor = partial(cyclic_chord_mix, rows=circular_rows(lengths, 12, max(offsets)), offsets=offsets)
    emulated = psf_bfloat16.as_the_kernels(factor)(values, weights)
    kernel = chord_kernels.chord_mix(values, weights, lengths, pads=True)
    assert emulated.dtype == kernel.dtype == torch.bfloat16
    torch.testing.assert_close(kernel.float(), emulated.float(), rtol=2 ** -7, atol=1e-5)


def test_psf_runs_the_kernels_arithmetic_within_the_block_only(monkeypatch):
    """Inside ``kernels_arithmetic`` every factor gets bfloat16 values and the layer's output moves by bfloat16's
    rounding; after it, the layer gives its exact path's very output again."""
    stored, as_the_kernels = [], psf_bfloat16.as_the_kernels

    def recorded(factor):
        emulated = as_the_kernels(factor)

        def applied(values, weights):
            stored.append(values.dtype)
            return emulated(values, weights)
        return applied

    monkeypatch.setattr(psf_bfloat16, "as_the_kernels", recorded)
    attention = build("psf", dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        exact = attention(x, mask).context
        with psf_bfloat16.kernels_arithmetic():
            emulated = attention(x, mask).context
        again = attention(x, mask).context
    assert stored == [torch.bfloat16] * attention.num_factors
    assert torch.equal(again, exact) and not torch.equal(emulated, exact)
    assert relative_error(emulated, exact) <= PRECISIONS["bfloat16"].tolerance


def test_the_losses_are_paired_token_by_token_and_tabled(tmp_path, monkeypatch):
    import runs

    losses = {"float32": [1.0, 2.0, 3.0], "bfloat16": [1.1, 2.0, 3.2], "bfloat16_storage": [1.1, 2.1, 3.2]}
    summary = psf_bfloat16.summary(losses)
    assert summary["masked_tokens"] == 3 and summary["loss"]["bfloat16"] == pytest.approx(6.3 / 3)
    mean, error = summary["differences"]["bfloat16 - float32"]
    assert (mean, error) == (pytest.approx(0.1), pytest.approx(0.0577, abs=1e-4))  # 0.1, 0.0, 0.2: s.d. 0.1 / sqrt 3
    storage = summary["differences"]["bfloat16_storage - bfloat16"]  # 0.0, 0.1, 0.0
    assert tuple(storage) == (pytest.approx(0.1 / 3), pytest.approx(0.1 / 3))
    with pytest.raises(ValueError):  # another number of tokens is another set of tokens
        psf_bfloat16.summary({**losses, "bfloat16": [1.0, 2.0]})

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    row = psf_bfloat16.PSF_BLOCK_ROWS[0]
    (tmp_path / psf_bfloat16.KIND).mkdir()
    (tmp_path / psf_bfloat16.KIND / f"{row}.json").write_text(json.dumps({"both": summary}))
    table = psf_bfloat16.table()
    assert f"| `{row}` | both | 2.0000 | +0.1000 ± 0.0577 | +0.0333 ± 0.0333 | +0.1333 ± 0.0333 |" in table
    assert table.count("| `") == 1  # the rows and readings not measured are left out
