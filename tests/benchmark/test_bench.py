"""``hf-effattn bench`` on tiny sizes: the files it writes, the CPU peak-memory measurement, the skipping of
infeasible lengths, the summary statistics, a fixed number of tokens a step and compiled rows. (Speed itself is
measured by the benchmark, never asserted.)"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import asdict

import pytest
import torch
from helpers.threads import restore_torch_threads  # noqa: F401 (an autouse fixture)

from hf_effattn import benchmark, list_attentions
from hf_effattn.benchmark import guard
from hf_effattn.commands import bench as command
from hf_effattn.benchmark.measuring import CPU_MEMORY_METHOD, cpu_peak_bytes
from hf_effattn.benchmark.rows import COLUMNS
from hf_effattn.benchmark.options import FLOOR, PARTS
from hf_effattn.benchmark.summary import crossover_length, growth_exponent

TINY = ["--lengths", "8", "16", "--hidden_size", "16", "--num_heads", "2", "--repeats", "1", "--warmup", "0",
        "--device", "cpu", "--dtype", "float32", "--threads", "1"]


def bench(tmp_path, *extra: str) -> list[dict]:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    assert command.run(parser.parse_args(TINY + ["--output_dir", str(tmp_path), *extra])) == 0
    with open(tmp_path / "results.csv") as handle:
        return list(csv.DictReader(handle))


def test_bench_writes_csv_markdown_and_plot(tmp_path):
    rows = bench(tmp_path, "--attentions", "kerformer", "psf")
    assert list(rows[0]) == COLUMNS
    measured = {(row["mechanism"], row["part"], int(row["length"])) for row in rows}
    assert measured == {(m, p, n) for m in ("kerformer", "psf", "sdpa", "floor") for p in PARTS
                        for n in (8, 16)}
    for row in rows:
        assert not row["note"]
        assert all(float(row[column]) > 0 for column in ("fwd_ms", "fwd_bwd_ms", "fwd_bwd_peak_mib"))
    markdown = (tmp_path / "results.md").read_text()
    assert "forward+backward time (ms)" in markdown and "| kerformer |" in markdown
    assert CPU_MEMORY_METHOD in markdown and "beats sdpa from N" in markdown
    assert (tmp_path / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_mechanism_is_also_timed_beside_the_window_it_is_given(tmp_path):
    rows = bench(tmp_path, "--attentions", "kerformer", "local", "sdpa", "--local_window", "4",
                 "--parts", "attention")
    assert {row["mechanism"] for row in rows} == {"kerformer", "kerformer+w4", "local+w4", "sdpa", "floor"}
    assert all(not row["note"] and float(row["fwd_bwd_ms"]) > 0 for row in rows)  # sdpa takes no window
    assert benchmark.options.windowed("dba+w128") == ("dba", {"local_window": 128})
    assert benchmark.options.windowed("dba") == ("dba", {})


def test_each_mechanism_is_also_timed_beside_the_blocks_it_is_given(tmp_path):
    rows = bench(tmp_path, "--attentions", "kerformer", "local", "sdpa", "--local_block", "4",
                 "--parts", "attention")
    assert {row["mechanism"] for row in rows} == {"kerformer", "kerformer+b4", "local+b4", "sdpa", "floor"}
    assert all(not row["note"] and float(row["fwd_bwd_ms"]) > 0 for row in rows)
    assert benchmark.options.windowed("dba+b512") == ("dba", {"local_block": 512})


def record_input_shapes(monkeypatch) -> dict:
    """``{(row, N): the shape of the token ids or hidden states it is called on}`` for every subject built."""
    seen, build_subject = {}, guard.build_subject

    def record(name, part, length, args):
        subject = build_subject(name, part, length, args)
        subject.module.register_forward_pre_hook(lambda module, args, kwargs: seen.update(
            {(name, length): (kwargs.get("input_ids") if args == () else args[0]).shape}), with_kwargs=True)
        return subject

    monkeypatch.setattr(guard, "build_subject", record)
    return seen


def test_tokens_per_step_give_each_length_its_batch_beside_the_chunked_reader(tmp_path, monkeypatch):
    """32 tokens a step: 4 sequences at N = 8, 2 at 16 and 1 at 64 (32 // 64 = 0, at least 1), for our encoders and
    the chunked reader alike; each row's batch is in results.csv, the rule in results.md, and the time over the
    chunked reader's is a table."""
    seen = record_input_shapes(monkeypatch)
    rows = bench(tmp_path, "--attentions", "kerformer", "--parts", "encoder", "--peers", "roberta-chunks512",
                 "--tokens_per_step", "32", "--lengths", "8", "16", "64")
    expected = {8: 4, 16: 2, 64: 1}
    names = ["kerformer", "sdpa", "floor", "peer:roberta-chunks512"]
    assert {(row["mechanism"], int(row["length"])): int(row["batch_size"]) for row in rows} == {
        (name, n): batch for name in names for n, batch in expected.items()}
    assert seen == {(name, n): (batch, n) for name in names for n, batch in expected.items()}
    markdown = (tmp_path / "results.md").read_text()
    assert "32 tokens a step (batch = 32 // N, at least 1: 4 at N=8, 2 at N=16, 1 at N=64)" in markdown
    assert "time over the chunked reader's (peer:roberta-chunks512)" in markdown
    assert "| peer:roberta-chunks512 | 1.00x | 1.00x | 1.00x |" in markdown


def test_compiled_rows_are_timed_beside_their_eager_rows_and_their_compilation_apart(tmp_path, monkeypatch):
    """``--compile kerformer sdpa``: each also compiled (here with Dynamo's eager backend: what the bench does with
    the compiled module, not Inductor's code), right after its eager row, at each length; the compiled rows carry
    their compile times and are compared with each other. ``--fwd_bwd_only``: no forward-only times."""
    compiled, compile = [], torch.compile
    monkeypatch.setattr(torch, "compile", lambda module: compiled.append(type(module).__name__) or compile(
        module, backend="eager"))
    rows = bench(tmp_path, "--attentions", "kerformer", "--parts", "attention", "--compile", "kerformer", "sdpa",
                 "--fwd_bwd_only")
    names = ["kerformer", "kerformer@compiled", "sdpa", "sdpa@compiled", "floor"]
    assert [(row["mechanism"], row["length"]) for row in rows] == [(name, n) for name in names for n in ("8", "16")]
    assert compiled == ["KerformerAttention", "SdpaAttention"] * 2  # one model per row and length
    for row in rows:
        assert row["fwd_ms"] == "" and float(row["fwd_bwd_ms"]) > 0
        assert (float(row["compile_s"]) > 0) if row["mechanism"].endswith("@compiled") else row["compile_s"] == ""
    markdown = (tmp_path / "results.md").read_text()
    assert "forward time (ms)" not in markdown and "compile time (s" in markdown
    times = {(row["mechanism"], row["length"]): float(row["fwd_bwd_ms"]) for row in rows}
    speed_up = times["sdpa@compiled", "8"] / times["kerformer@compiled", "8"]
    assert f"| kerformer@compiled | {speed_up:.2f}x |" in markdown  # over sdpa@compiled, not sdpa


def test_without_matplotlib_the_tables_are_written_and_the_plot_is_said_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not installed: the bench extra left out
    bench(tmp_path, "--attentions", "kerformer", "--parts", "attention")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results.csv", "results.md"]
    assert "no results.png: matplotlib is not installed (pip install 'hf_effattn[bench]')" in capsys.readouterr().out


def test_floor_is_local_to_the_benchmark(tmp_path):
    bench(tmp_path, "--attentions", "sdpa", "--parts", "layer")
    assert FLOOR not in list_attentions()


def test_too_slow_lengths_are_skipped_with_a_note(tmp_path):
    rows = bench(tmp_path, "--attentions", "eager", "--time_limit", "1e-9")
    for row in rows:
        if row["length"] == "8":
            assert float(row["fwd_bwd_ms"]) > 0 and not row["note"]
        else:
            assert row["fwd_bwd_ms"] == "" and row["note"].startswith("skipped: predicted")


def test_cpu_peak_counts_a_known_allocation():
    size = 8 * 2**20

    def allocate():
        torch.empty(size, dtype=torch.uint8).fill_(1)

    assert size <= cpu_peak_bytes(allocate) < size + 2**20


def test_cpu_peak_is_the_peak_not_the_total():
    """Two 8 MiB tensors alive one after the other peak at 8 MiB; alive together, at 16 MiB."""
    size = 8 * 2**20

    def one_after_the_other():
        for _ in range(2):
            torch.ones(size, dtype=torch.uint8)

    def together():
        first = torch.ones(size, dtype=torch.uint8)
        return first, torch.ones(size, dtype=torch.uint8)

    assert size <= cpu_peak_bytes(one_after_the_other) < 1.5 * size
    assert 2 * size <= cpu_peak_bytes(together) < 2.5 * size


def test_growth_exponent_and_crossover():
    quadratic = {n: 1e-6 * n**2 for n in (256, 512, 1024, 2048)}
    linear = {n: 1e-3 * n for n in (256, 512, 1024, 2048)}
    assert growth_exponent(quadratic, 3) == pytest.approx(2.0)
    assert growth_exponent(linear, 3) == pytest.approx(1.0)
    assert crossover_length(linear, quadratic, list(linear)) == 1024  # 1.024 < 1.05; 0.512 > 0.26
    assert crossover_length(quadratic, linear, list(linear)) is None
    del quadratic[2048]  # a baseline skipped as infeasible counts as beaten
    assert crossover_length(linear, quadratic, list(linear)) == 1024


TINY_SETTINGS = dict(lengths=[8], hidden_size=16, num_heads=2, repeats=1, warmup=0, device="cpu", threads=1)


def test_python_api_returns_the_rows_that_are_written(tmp_path):
    rows = benchmark.run_benchmark(attentions=["kerformer"], parts=["attention"], verbose=False, **TINY_SETTINGS)
    assert [(row.mechanism, row.part, row.length) for row in rows] == [
        (name, "attention", 8) for name in ("kerformer", "sdpa", "floor")]
    assert all(row.fwd_ms > 0 and row.fwd_bwd_ms > 0 and not row.note for row in rows)
    summaries = benchmark.write_results(rows, tmp_path, verbose=False, parts=["attention"], **TINY_SETTINGS)
    assert {summary.mechanism for summary in summaries} == {"kerformer", "sdpa", "floor"}
    with open(tmp_path / "results.csv") as handle:
        written = list(csv.DictReader(handle))
    assert written == [{key: "" if value is None else str(value) for key, value in asdict(row).items()} for row in rows]


def test_python_api_rejects_unknown_settings_and_attentions():
    with pytest.raises(TypeError, match="lenghts"):
        benchmark.run_benchmark(lenghts=[8])
    with pytest.raises(ValueError, match="Unknown attention.*kerformr"):
        benchmark.run_benchmark(attentions=["kerformr"], **TINY_SETTINGS)


def test_profiler_console_lines_are_silenced(capfd):
    assert cpu_peak_bytes(lambda: torch.ones(1024).add_(1)) > 0
    out, err = capfd.readouterr()
    assert "USDT" not in out + err and "profiler_start" not in out + err


def guarded_measure(monkeypatch, longest: int) -> list[int]:
    """Record the lengths ``guard.build_subject`` builds (every measurement starts there); fail the test
    (without allocating) above ``longest``."""
    measured, build_subject = [], guard.build_subject

    def record(mechanism, part, length, args):
        assert length <= longest, f"N={length} was run unguarded"
        measured.append(length)
        return build_subject(mechanism, part, length, args)

    monkeypatch.setattr(guard, "build_subject", record)
    return measured


def test_the_first_length_is_predicted_from_probes_before_it_runs(monkeypatch):
    """``--lengths 100000000`` with a 1 MiB limit: single calls at 64, 128, ... tokens stop where the peak is
    predicted above the limit; the requested length never runs."""
    measured = guarded_measure(monkeypatch, longest=2**14)
    rows = benchmark.run_benchmark(attentions=["kerformer"], parts=["attention"], verbose=False,
                                   memory_limit_gb=1 / 1024, time_limit=1e6, **{**TINY_SETTINGS, "lengths": [10**8]})
    assert [(row.mechanism, row.fwd_bwd_ms) for row in rows] == [("kerformer", None), ("sdpa", None), ("floor", None)]
    for row in rows:
        assert row.note.startswith("skipped: predicted peak") and row.note.endswith("(probed up from N=64)")
        assert "> limit 1.0 MiB already at N=" in row.note
    assert measured[:3] == [64, 128, 256] and max(measured) < 2**14


def test_a_length_whose_input_passes_the_limit_is_refused_from_its_shapes(monkeypatch):
    guarded_measure(monkeypatch, longest=0)  # nothing may run
    rows = benchmark.run_benchmark(attentions=["kerformer"], parts=["attention"], verbose=False, memory_limit_gb=0.5,
                                   **{**TINY_SETTINGS, "batch_size": 2**20})  # [B, 8, 16] floats: 512 MiB
    assert {row.note for row in rows} == {"skipped: the input and output alone take 1.0 GiB > limit 512.0 MiB"}


@pytest.mark.parametrize("setting, message", [
    ({"lengths": [8, 0]}, r"lengths=\[8, 0\]: give one or more lengths of at least 1"),
    ({"lengths": [-8]}, r"lengths=\[-8\]"),
    ({"lengths": []}, r"lengths=\[\]"),
    ({"repeats": 0}, r"repeats=0: it must be at least 1 \(--repeats\)"),
    ({"batch_size": -1}, r"batch_size=-1: it must be at least 1 \(--batch_size\)"),
    ({"warmup": -1}, r"warmup=-1: it must be at least 0"),
    ({"num_heads": 3}, r"hidden_size=16 is not a multiple of num_heads=3"),
    ({"memory_limit_gb": 0}, r"must be positive"),
    ({"local_window": 32}, r"local_window=32: it must be at least 2 and at most the shortest length 8"),
    ({"tokens_per_step": 0}, r"tokens_per_step=0: it must be at least 1 \(--tokens_per_step\)"),
    ({"batch_size": 2, "tokens_per_step": 64}, r"batch_size=2 and tokens_per_step=64: give one of them"),
    ({"compile": ["kerformr"]}, r"compile=\['kerformr'\]: not a measured row; choose among .*kerformer"),
])
def test_settings_that_cannot_run_are_refused_up_front(monkeypatch, setting, message):
    guarded_measure(monkeypatch, longest=0)
    with pytest.raises(ValueError, match=message):
        benchmark.run_benchmark(verbose=False, **{**TINY_SETTINGS, **setting})


def test_the_command_refuses_bad_settings_in_one_line_and_fails_when_nothing_was_measured(tmp_path, capsys):
    from hf_effattn.commands import main as cli

    argv = ["bench", *TINY, "--attentions", "kerformer", "--parts", "attention", "--output_dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exit:
        cli.main([*argv, "--repeats", "0"])
    assert exit.value.code == 2
    assert capsys.readouterr().err == "hf-effattn bench: error: repeats=0: it must be at least 1 (--repeats).\n"
    assert cli.main([*argv, "--memory_limit_gb", "1e-9"]) == 1  # every length refused: exits non-zero
    assert "nothing was measured" in capsys.readouterr().err
    assert not (tmp_path / "results.csv").exists()
