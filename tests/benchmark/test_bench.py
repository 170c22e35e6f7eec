"""``hf-effattn bench`` on tiny sizes: the files it writes, the CPU peak-memory measurement, the skipping of
infeasible lengths and the summary statistics. (Speed itself is measured by the benchmark, never asserted.)"""

from __future__ import annotations

import argparse
import csv
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
