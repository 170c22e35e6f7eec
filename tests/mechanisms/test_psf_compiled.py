"""PSF's fast path on a CPU (``PSFAttention.mix_compiled``: each factor's product compiled by ``torch.compile``)
against the exact path, and a fast path that fails: ``"auto"`` falls back, ``"fast"`` raises."""

from __future__ import annotations

import pytest
import torch

from hf_effattn.modeling import attention_psf, chord_mixes, fast_paths

from helpers.mechanisms import assert_paths_agree, build, mixed_batch, run_in_mode


@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("settings", [{}, {"residual": True}, {"local_block": 4}], ids=["plain", "residual", "blocks"])
def test_the_compiled_factors_equal_the_exact_path(settings, padded, monkeypatch):
    """On CPU tensors with ``fast_paths("fast")``: the compiled factor runs (counted where it is compiled, so the test
    cannot pass on the exact path), and the output and every gradient agree with the exact path's."""
    compiled = []

    def counted(function):
        compiled.append(function)
        return fast_paths.compiled(function)

    monkeypatch.setattr(attention_psf, "compiled", counted)
    attention = build("psf", settings, dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)  # full, right-padded, left-padded, one real token; N = 10
    mask = mask if padded else None
    exact = run_in_mode(attention, x, mask, "exact")
    assert not compiled
    fast = run_in_mode(attention, x, mask, "fast")
    assert compiled == [chord_mixes.plain_window_mix]
    assert_paths_agree(fast, exact)


def test_other_mechanisms_have_no_fast_path_on_a_cpu():
    """The CPU's fast path is PSF's alone: another mechanism's layer says so in ``"fast"`` mode."""
    attention = build("singularformer", dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    with fast_paths.fast_paths("fast"), pytest.raises(RuntimeError, match="on cpu, this fast path is for cuda"):
        attention(x, mask)


@pytest.mark.parametrize("fast_mix", ["mix_compiled", "mix_with_kernels"])
def test_a_fast_path_that_fails_falls_back_to_the_exact_path_in_auto_mode(fast_mix, monkeypatch, caplog):
    """Where the fast path fails (no C++ compiler for ``torch.compile``, a Triton that cannot compile the kernels),
    ``"auto"`` logs one line and runs the exact path from then on; ``"fast"`` raises the error."""
    monkeypatch.setattr(fast_paths, "_failed", set())
    monkeypatch.setattr(attention_psf.PSFAttention, "fast_mixes", {"cpu": fast_mix})

    def failing(*args, **options):
        raise RuntimeError("no kernel today")

    if fast_mix == "mix_compiled":
        monkeypatch.setattr(attention_psf, "compiled", lambda function: failing)
    else:
        monkeypatch.setattr(pytest.importorskip("hf_effattn.modeling.chord_kernels"), "chord_mix", failing)
    attention = build("psf", dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    with fast_paths.fast_paths("fast"), pytest.raises(RuntimeError, match="no kernel today"):
        attention(x, mask)
    with fast_paths.fast_paths("exact"):
        exact = attention(x, mask).context
    with fast_paths.fast_paths("auto"):
        first, second = attention(x, mask).context, attention(x, mask).context
    torch.testing.assert_close(first, exact, atol=0, rtol=0)
    torch.testing.assert_close(second, exact, atol=0, rtol=0)
    said = [record.getMessage() for record in caplog.records if "did not compile" in record.getMessage()]
    assert len(said) == 1 and "factor product" in said[0] and "no kernel today" in said[0]
