"""PSF's fast path on a CPU (``PSFAttention.mix_compiled``: each factor's product compiled by ``torch.compile``)
against the exact path, a fast path that fails (``"auto"`` falls back, ``"fast"`` raises), and the line that says, on
CUDA in the default mode, how to run PSF's kernels."""

from __future__ import annotations

from types import SimpleNamespace

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
    assert compiled == [chord_mixes.plain_chord_mix]
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


ON_CUDA = SimpleNamespace(device=torch.device("cuda"))  # what the exact mode reads of a tensor: its device


@pytest.mark.parametrize("chosen, own_kernels, device, capturing, said", [
    (False, True, "cuda", False, 1), (True, True, "cuda", False, 0), (False, False, "cuda", False, 0),
    (False, True, "cpu", False, 0), (False, True, "cuda", True, 0)],
    ids=["default-mode", "mode-chosen", "no-kernels", "on-cpu", "capturing"])
def test_the_default_mode_says_once_how_to_run_a_mechanisms_own_kernels(chosen, own_kernels, device, capturing, said,
                                                                        monkeypatch, caplog):
    """On CUDA in the default mode (``"exact"``, not chosen by the user) a part with kernels of its own logs one line,
    once, naming the setting that runs them; not where the user chose the mode, nor for a part whose fast path is
    compiled (minutes at its first call), nor on a CPU, nor while compiled or exported (a log call would break a
    graph). The exact path runs in every case."""
    monkeypatch.setattr(fast_paths, "_mode", "exact")
    monkeypatch.setattr(fast_paths, "_chosen", chosen)
    monkeypatch.setattr(fast_paths, "_said", set())
    monkeypatch.setattr(fast_paths, "capturing_graph", lambda: capturing)
    tensor = ON_CUDA if device == "cuda" else torch.zeros(1)
    taken = [fast_paths.takes_fast_path("the 'psf' attention's factor product", tensor, own_kernels=own_kernels)
             for _ in range(2)]
    assert taken == [False, False]
    lines = [record.getMessage() for record in caplog.records if "own kernels" in record.getMessage()]
    assert len(lines) == said
    if said:
        assert "the 'psf' attention's factor product" in lines[0] and "HF_EFFATTN_FAST_PATHS=auto" in lines[0]


def test_choosing_the_mode_silences_the_line(monkeypatch):
    """``fast_paths(mode)`` (and ``set_fast_paths``) count as the user's choice, for the rest of the process."""
    monkeypatch.setattr(fast_paths, "_chosen", False)
    with fast_paths.fast_paths("exact"):
        pass
    assert fast_paths._chosen


def test_psf_says_it_has_its_own_kernels(monkeypatch):
    """PSF's factor product asks with ``own_kernels`` (its ``has_own_kernels``), so its line can be said."""
    asked = []

    def recorded(name, tensor, devices=("cuda",), own_kernels=False):
        asked.append(own_kernels)
        return False

    monkeypatch.setattr(attention_psf, "takes_fast_path", recorded)
    attention = build("psf", dtype=torch.float32)
    attention(*mixed_batch(dtype=torch.float32))
    assert asked and all(asked)
