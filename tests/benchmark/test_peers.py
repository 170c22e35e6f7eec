"""``hf-effattn bench --peers`` on tiny sizes: the peers' rows, their models (the named Transformers classes with
the requested width and depth, on the same inputs as ours), the notes of peers that cannot run or run otherwise,
the round-robin turns and the comparison with the fastest peer. (Speed itself is never asserted.)"""

from __future__ import annotations

import argparse
import csv
from types import SimpleNamespace

import pytest
import torch
import transformers
from helpers.threads import restore_torch_threads  # noqa: F401 (an autouse fixture)
from torch import nn

from hf_effattn import benchmark
from hf_effattn.commands import bench as command
from hf_effattn.benchmark.measuring import measure_round_robin
from hf_effattn.benchmark.peers import PEERS, ChunkedReader
from hf_effattn.benchmark.rows import Infeasible
from hf_effattn.benchmark.runner import selected_mechanisms
from hf_effattn.benchmark.subjects import Subject, build_subject
from hf_effattn.benchmark.summary import fastest_peer, summarise
from hf_effattn.benchmark.tables import MARK_CAPTION

TINY = ["--hidden_size", "16", "--num_heads", "2", "--intermediate_size", "32", "--repeats", "1", "--warmup", "0",
        "--device", "cpu", "--threads", "1"]
LABELS = [peer.label for peer in PEERS.values()]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args([*TINY, *argv])


def settings(*argv: str) -> benchmark.BenchmarkSettings:
    return benchmark.BenchmarkSettings(**command.settings_of(parse(*argv)))


def test_peer_rows_are_written_beside_ours_with_their_notes(tmp_path):
    """At N = 8 and 64 Nystromformer cannot run (N = 8, not a multiple of its 64 landmarks) or runs exact softmax
    (N = 64), BigBird falls back to full attention, Longformer pads to its window of 512: all are said."""
    args = parse("--attentions", "kerformer", "--parts", "encoder", "--lengths", "8", "64", "--peers",
                 "--output_dir", str(tmp_path))
    assert command.run(args) == 0
    with open(tmp_path / "results.csv") as handle:
        rows = {(row["mechanism"], int(row["length"])): row for row in csv.DictReader(handle)}
    assert set(rows) == {(name, n) for name in ["kerformer", "sdpa", "floor", *LABELS] for n in (8, 64)}
    assert {row["part"] for row in rows.values()} == {"encoder"}
    for name in ("kerformer", "sdpa", "floor", "peer:roberta-sdpa", "peer:roberta-eager", "peer:roberta-chunks512"):
        assert all(float(rows[name, n]["fwd_bwd_ms"]) > 0 and not rows[name, n]["note"] for n in (8, 64))
    cannot = rows["peer:nystromformer", 8]
    assert cannot["fwd_ms"] == cannot["fwd_bwd_ms"] == "" and cannot["note"].startswith("cannot run")
    assert "num_landmarks=64" in cannot["note"]
    assert float(rows["peer:nystromformer", 64]["fwd_bwd_ms"]) > 0
    assert rows["peer:nystromformer", 64]["note"].startswith("exact softmax attention")
    for n in (8, 64):
        assert float(rows["peer:bigbird", n]["fwd_bwd_ms"]) > 0
        assert "ran full attention" in rows["peer:bigbird", n]["note"]
        assert rows["peer:longformer", n]["note"] == f"inputs padded from N={n} to 512 (a multiple of " \
                                                     "attention_window=512)"
    markdown = (tmp_path / "results.md").read_text()
    assert "## Whole encoder (2 layers and the embeddings, no pooler)" in markdown
    assert "| peer:nystromformer | cannot run |" in markdown and MARK_CAPTION in markdown
    assert "`peer:bigbird` = Transformers' BigBirdModel (block_sparse, block_size=64, num_random_blocks=3)" in markdown
    assert "speed-up over peer:roberta-sdpa" in markdown and "beats every peer from N" in markdown
    assert "- encoder peer:bigbird N=8: ran full attention" in markdown


@pytest.mark.parametrize("key", list(PEERS))
def test_peer_is_the_named_class_with_our_width_depth_and_inputs(key):
    """Built at N = 1024 (BigBird runs block-sparse attention from 705 on, Longformer needs no padding) with 3
    layers: the Transformers class, its width, depth, heads and feed-forward; it receives the same token ids and
    all-ones mask as our encoder, and runs its own mechanism (no note)."""
    peer = PEERS[key]
    args = settings("--num_layers", "3")
    subjects = {name: build_subject(name, "encoder", 1024, args) for name in ("psf", peer.label)}
    model = subjects[peer.label].module
    encoder = model.model if isinstance(model, ChunkedReader) else model
    assert type(encoder) is getattr(transformers, peer.class_name)
    config = encoder.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size) == (
        16, 3, 2, 32)
    assert len(encoder.encoder.layer) == 3
    if key.startswith("roberta"):
        assert config._attn_implementation == ("eager" if key == "roberta-eager" else "sdpa")
    seen = {}
    for name, subject in subjects.items():
        subject.module.register_forward_pre_hook(lambda module, args, kwargs, name=name: seen.update({name: kwargs}),
                                                 with_kwargs=True)
        subject.module.eval()
        with torch.no_grad():
            assert subject.call().last_hidden_state.shape == (1, 1024, 16)
    ours, theirs = seen["psf"], seen[peer.label]
    assert torch.equal(ours["input_ids"], theirs["input_ids"]) and ours["input_ids"].min() >= 3
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"]) and bool(theirs["attention_mask"].all())
    assert peer.runs_otherwise(model, 1024) == ""


@pytest.mark.parametrize("length, chunks", [(1024, (2, 512)), (700, (2, 512)), (300, (1, 300))])
def test_the_chunked_reader_reads_each_512_token_chunk_alone(length, chunks):
    """Its outputs are RobertaModel's on each chunk of 512 tokens read alone (the last one shorter at N = 700, the
    input padded to 1,024 and said; at N = 300, the input whole); its positions restart in every chunk."""
    subject = build_subject("peer:roberta-chunks512", "encoder", length, settings("--num_layers", "1"))
    reader, seen = subject.module.eval(), {}
    reader.model.register_forward_pre_hook(lambda module, args, kwargs: seen.update(kwargs), with_kwargs=True)
    with torch.no_grad():
        output = subject.call().last_hidden_state
        input_ids = seen["input_ids"].flatten()[:length]
        alone = [reader.model(input_ids[None, start : start + 512]).last_hidden_state[0]
                 for start in range(0, length, 512)]
    assert output.shape == (1, length, 16) and seen["input_ids"].shape == chunks
    torch.testing.assert_close(output[0], torch.cat(alone), atol=1e-5, rtol=1e-5)
    expected_note = "inputs padded from N=700 to 1024 (a multiple of chunk=512)" if length == 700 else ""
    assert PEERS["roberta-chunks512"].runs_otherwise(reader, length) == expected_note


def test_peers_only_in_the_encoder_part_and_bad_peer_settings():
    settings = benchmark.BenchmarkSettings(attentions=["psf"], peers=["bigbird"])
    assert selected_mechanisms(settings, "encoder") == ["psf", "sdpa", "floor", "peer:bigbird"]
    assert selected_mechanisms(settings, "layer") == ["psf", "sdpa", "floor"]
    with pytest.raises(ValueError, match="peers are whole encoders, add 'encoder' to the parts"):
        benchmark.run_benchmark(peers=True, parts=["layer"], lengths=[8])
    with pytest.raises(ValueError, match="Unknown peer.*bigbrid"):
        benchmark.run_benchmark(peers=["bigbrid"], lengths=[8])
    with pytest.raises(SystemExit) as error:
        parse("--peers", "bigbrid")
    assert error.value.code == 2


def recording_subject(name: str, order: list[str], fail: bool = False) -> Subject:
    module = nn.Linear(2, 2)

    def call():
        order.append(name)
        if fail:
            raise RuntimeError("boom")
        return SimpleNamespace(last_hidden_state=module(torch.ones(1, 2)))

    return Subject(module, call)


def test_subjects_take_turns_and_a_failing_one_leaves_them():
    order: list[str] = []
    subjects = {name: recording_subject(name, order, fail=name == "c") for name in "abc"}
    results = measure_round_robin(subjects, benchmark.BenchmarkSettings(device="cpu", warmup=1, repeats=2))
    # Per mode: warm-up and repeats in turns, then one profiled call each for the peak; "c" fails on its first.
    assert order == list("abc") + list("ab") * 2 + list("ab") + list("ab") * 3 + list("ab")
    assert isinstance(results["c"], Infeasible) and str(results["c"]) == "failed: boom"
    assert set(results["a"]) == {"fwd_ms", "fwd_bwd_ms", "fwd_peak_mib", "fwd_bwd_peak_mib"}


def row(mechanism: str, length: int, ms: float | None, note: str = "") -> benchmark.Row:
    return benchmark.Row(mechanism, "encoder", length, 1, 16, 2, "cpu", "float32", fwd_bwd_ms=ms, note=note)


def test_ours_beat_every_peer_from_the_length_where_they_beat_the_fastest():
    """The fastest peer is 5, 12, 30 ms at N = 256, 512, 1024 (one that cannot run is left out): kerformer at
    10, 15, 20 ms beats every peer from 1024 on; sdpa and the floor are not compared."""
    rows = [row("kerformer", n, ms) for n, ms in ((256, 10), (512, 15), (1024, 20))]
    rows += [row("peer:bigbird", n, ms) for n, ms in ((256, 5), (512, 20), (1024, 30))]
    rows += [row("peer:longformer", n, ms) for n, ms in ((256, 20), (512, 12), (1024, 40))]
    rows += [row("peer:nystromformer", n, None, "cannot run: ...") for n in (256, 512, 1024)]
    rows += [row("sdpa", n, 1.0) for n in (256, 512, 1024)]
    settings = benchmark.BenchmarkSettings(lengths=[256, 512, 1024], parts=["encoder"], peers=True)
    summaries = {summary.mechanism: summary for summary in summarise(rows, settings)}
    assert fastest_peer(rows, "encoder") == {256: 5, 512: 12, 1024: 30}
    assert summaries["kerformer"].beats_peers_from == 1024 and summaries["kerformer"].compares_to_peers
    assert "beats every peer from: N=1024" in summaries["kerformer"].describe()
    assert not summaries["sdpa"].compares_to_peers and not summaries["peer:bigbird"].compares_to_peers
