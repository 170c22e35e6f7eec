"""The long-document benchmark's rows that start from another row's pretrained model (``rows.then``): a memory
added to the chunks pretrained at 512, held against the same chunks pretrained as many steps more."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import pretrain
from rows import ROWS

START, SECOND = "local-b512-mlm160-at512", "local-b512-mlm160-seed2-at512"  # the chunks at 512, two seeds
BUDGET = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80, mlm_warmup_steps=8,
                         again=False)


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_a_memory_after_the_chunks_converts_their_pretrained_model_and_is_held_against_them_continued(
        tmp_path, monkeypatch):
    """The memory's row converts the chunks' pretrained folder (not the MLM head's) to its blocks at 2,048 and
    pretrains that; the chunks' row has nothing to convert and pretrains their folder into one of its own; both take
    the benchmark's 80 steps with a seed of their own (not the chunks': the same batches again), and are paired; so
    do the chunks continued on the memory's data and length (what that layout does to them)."""
    import controls
    import runs

    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")  # no rerun of a control on another head
    monkeypatch.setattr(pretrain, "training_file", lambda row: Path(f"pieces{row.pieces}"))  # a fresh clone: no corpus
    memory, chunks = ROWS[f"{START}-then-kerformer-gated"], ROWS[f"{START}-then-local"]
    started = str(tmp_path / "models" / f"{START}-512-mlm")
    convert = pretrain.stage_command(memory, "extend", BUDGET)
    assert convert[2] == started and option(convert, "--max_length") == "2048" and "--convert_attention" in convert
    assert json.loads(option(convert, "--attention_config")) == {"local_block": 512, "shared_normaliser": False}
    train = pretrain.stage_command(memory, "mlm", BUDGET)
    assert option(train, "--model_name_or_path") == str(tmp_path / "models" / f"{memory.name}-2048-extend")
    assert option(train, "--train_file") == "pieces2048"
    assert pretrain.jobs([chunks.name], ["extend", "mlm"]) == [(chunks.name, "mlm")]
    continued = pretrain.stage_command(chunks, "mlm", BUDGET)
    assert option(continued, "--model_name_or_path") == started != option(continued, "--output_dir")
    assert option(continued, "--max_seq_length") == "512" and "--block_special_tokens" in continued
    layout = ROWS[f"{START}-then-local-pieces2048"]  # the chunks continued as the memory is: what the layout does
    assert pretrain.jobs([layout.name], ["extend", "mlm"]) == [(layout.name, "mlm")]
    pieces = pretrain.stage_command(layout, "mlm", BUDGET)
    assert option(pieces, "--model_name_or_path") == started and option(pieces, "--max_seq_length") == "2048"
    assert option(pieces, "--train_file") == option(train, "--train_file")
    for row, seed in [(memory, "3"), (chunks, "3"), (layout, "3"), (ROWS[f"{SECOND}-then-local"], "4")]:
        command = pretrain.stage_command(row, "mlm", BUDGET)
        assert (option(command, "--max_train_steps"), option(command, "--seed")) == ("80", seed)
    assert controls.control_of(memory.name) == chunks.name == controls.control_of(layout.name)
    assert controls.control_of(chunks.name) == START
    assert controls.control_of(f"{SECOND}-then-singularformer-gated") == f"{SECOND}-then-local"


def test_the_steps_lever_after_the_chunks_is_held_against_the_chunks_continued_as_long():
    """Twice the steps more: each memory and the chunks take 160 steps (warm-up 16) from the same model, and every
    memory's control is the chunks' 160-step row, not the 80-step one."""
    import controls

    again = f"{START}-rerun"  # the chunks at 512 pretrained again (on a head trained again)
    chunks = ROWS[f"{again}-then-local-mlm160"]
    memories = [ROWS[f"{again}-then-{mechanism}-gated-mlm160"] for mechanism in ("singularformer", "dba", "psf")]
    for row in (*memories, chunks):
        assert row.start == again and row.mlm_steps == 160 and row.mlm_seed == 3
    continued = pretrain.stage_command(chunks, "mlm", BUDGET)
    assert (option(continued, "--max_train_steps"), option(continued, "--num_warmup_steps")) == ("160", "16")
    for memory in memories:
        assert (memory.pieces, memory.length, memory.block) == (2048, 2048, 512)
        assert controls.control_of(memory.name) == chunks.name
    assert controls.control_of(chunks.name) == again


def test_a_row_whose_start_has_not_been_pretrained_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    with pytest.raises(SystemExit, match=rf"starts from .*{START}-512-mlm, which is missing: run --rows {START} "
                                         "--stages extend mlm first"):
        pretrain.run_stage(f"{START}-then-local", "mlm", BUDGET)


@pytest.mark.parametrize("mechanism, length, accumulation", [
    ("kerformer", 8192, 1), ("singularformer", 8192, 1), ("singularformer", 4096, 2)])
def test_the_length_lever_after_the_chunks_converts_to_its_length_and_trains_the_tokens_of_a_step_at_2048(
        mechanism, length, accumulation, tmp_path, monkeypatch):
    """Kerformer's gated memory and Singularformer's after the chunks at 8,192 (and Singularformer's at 4,096) on
    shuffled pieces of 2,048: converted from the chunks' model to that length, the tokens of 4 x 2,048 a step (one
    block of 8,192, two of 4,096), 160 steps, named apart from the same memories at 2,048 and held against the chunks
    continued 160 steps at 512."""
    import controls
    import runs

    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(pretrain, "training_file", lambda row: Path(f"pieces{row.pieces}"))
    again = f"{START}-rerun"
    memory = ROWS[f"{again}-then-{mechanism}-gated-mlm160-at{length}"]
    assert memory.name != f"{again}-then-{mechanism}-gated-mlm160" and memory.settings["local_block"] == 512
    assert memory.settings.get("shared_normaliser", False) is False  # Kerformer's too: gated, not shared
    convert = pretrain.stage_command(memory, "extend", BUDGET)
    assert convert[2] == str(tmp_path / "models" / f"{again}-512-mlm")
    assert option(convert, "--max_length") == str(length)
    train = pretrain.stage_command(memory, "mlm", BUDGET)
    assert option(train, "--model_name_or_path") == str(tmp_path / "models" / f"{memory.name}-{length}-extend")
    assert [option(train, name) for name in ("--max_seq_length", "--per_device_train_batch_size",
                                              "--gradient_accumulation_steps", "--max_train_steps", "--seed",
                                              "--train_file")] == [str(length), "1", str(accumulation), "160", "3",
                                                                   "pieces2048"]
    assert controls.control_of(memory.name) == f"{again}-then-local-mlm160"


@pytest.mark.parametrize("memory", ["kerformer-gated-mlm160-seed4-at8192", "singularformer-gated-mlm160-seed4",
                                    "dba-gated-mlm160-seed4", "psf-gated-mlm160-seed4"])
def test_another_continuation_seed_is_named_and_held_against_the_chunks_continued_with_that_seed(memory, monkeypatch):
    """Kerformer's memory at 8,192 and Singularformer's, DBA's and PSF's at 2,048 continued with seed 4 from the same
    chunks: the name says the seed, the row trains with it, and its control is the chunks continued 160 steps with
    seed 4 (whose control is the model both started from), while the seed-3 row's stays the chunks continued with
    seed 3."""
    import controls

    monkeypatch.setattr(pretrain, "training_file", lambda row: Path(f"pieces{row.pieces}"))  # a fresh clone: no corpus
    again = f"{START}-rerun"
    memory, chunks = ROWS[f"{again}-then-{memory}"], ROWS[f"{again}-then-local-mlm160-seed4"]
    for row in (memory, chunks):
        command = pretrain.stage_command(row, "mlm", BUDGET)
        assert (row.start, row.mlm_steps, option(command, "--seed")) == (again, 160, "4")
    assert controls.control_of(memory.name) == chunks.name
    assert controls.control_of(chunks.name) == again
    assert controls.control_of(memory.name.replace("-seed4", "")) == f"{again}-then-local-mlm160"


@pytest.mark.parametrize("seed, suffix", [("3", ""), ("4", "-seed4")])
def test_a_memory_starting_at_another_gate_is_named_for_it_converts_with_it_and_is_held_against_the_same_chunks(
        seed, suffix, tmp_path, monkeypatch):
    """The gate's start after the chunks: Singularformer's memory with its gates starting at 0.01 is a row apart from
    the one starting at the default, converts the chunks' model with ``initial_mechanism_weight`` 0.01 and otherwise
    the same settings, trains with the same options, seed and data, and has the same control."""
    import controls
    import runs

    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(pretrain, "training_file", lambda row: Path(f"pieces{row.pieces}"))
    again = f"{START}-rerun"
    memory = ROWS[f"{again}-then-singularformer-gated-gate0.01-mlm160{suffix}"]
    default = ROWS[f"{again}-then-singularformer-gated-mlm160{suffix}"]
    converted = json.loads(option(pretrain.stage_command(memory, "extend", BUDGET), "--attention_config"))
    assert converted == {**default.settings, "initial_mechanism_weight": 0.01} != default.settings
    assert "initial_mechanism_weight" not in default.settings and "gates starting at 0.01" in memory.what
    train, trained = (pretrain.stage_command(row, "mlm", BUDGET) for row in (memory, default))
    assert option(train, "--seed") == seed
    assert [part.replace(memory.name, default.name) for part in train] == trained
    assert controls.control_of(memory.name) == controls.control_of(default.name)


def test_a_gated_memory_is_held_against_the_row_it_was_made_from_and_a_continuation_against_none():
    """``controls.shared_twin``: a gated Kerformer row's twin is the row equal to it in every field but its
    normaliser (shared); a gated continuation, whose name ends as a gated row's does, has no such row and is not
    listed against itself; a row with no gate has none."""
    import controls

    assert controls.shared_twin("kerformer-b512-gated") == "kerformer-b512"
    twin = "kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048"
    assert controls.shared_twin(f"{twin}-gated") == twin
    assert controls.shared_twin(f"{START}-then-kerformer-gated") is None
    assert controls.shared_twin(f"{START}-rerun-then-kerformer-gated-mlm160-at8192") is None
    assert [controls.shared_twin(name) for name in ("kerformer-b512", "singularformer-b512")] == [None, None]


@pytest.mark.parametrize("seed, suffix", [("3", ""), ("4", "-seed4")])
def test_each_memory_after_the_chunks_is_also_held_against_the_same_training_without_it(seed, suffix, monkeypatch):
    """``controls.without_memory``: a memory continued 160 steps at 2,048 from the chunks is paired with the
    blocks alone continued from the same model, on the same pieces, with the same steps and seed: the same command
    but for the model it trains (the chunks' own, which reads 2,048 tokens already, against the chunks converted to
    the memory's) and the gate's own learning rate; a memory at another length, and a row that continues none, has no
    such twin."""
    import controls

    monkeypatch.setattr(pretrain, "training_file", lambda row: Path(f"pieces{row.pieces}"))  # a fresh clone: no corpus
    again = f"{START}-rerun"
    blocks = ROWS[f"{again}-then-local-pieces2048-mlm160{suffix}"]
    memories = [f"{again}-then-{memory}-mlm160{suffix}" for memory in ("singularformer-gated", "dba-gated", "psf-gated",
                                                                        "singularformer-gated-gate0.01")]
    assert {controls.without_memory(name) for name in memories} == {blocks.name}
    assert pretrain.jobs([blocks.name], ["extend", "mlm"]) == [(blocks.name, "mlm")]
    train, alone = (pretrain.stage_command(row, "mlm", BUDGET) for row in (ROWS[memories[0]], blocks))
    assert option(alone, "--seed") == seed and option(alone, "--model_name_or_path").endswith(f"/{again}-512-mlm")
    model = train.index("--model_name_or_path") + 1
    assert train[-2:] == ["--mechanism_weight_learning_rate", "0.1"]
    assert alone == [alone[model] if index == model else part.replace(memories[0], blocks.name)
                     for index, part in enumerate(train[:-2])]
    assert controls.without_memory(f"{again}-then-singularformer-gated-mlm160-at4096") is None
    assert controls.without_memory("singularformer-b512-direct-gate-lr0.1-mlm160-pieces2048") is None
    assert controls.control_of(blocks.name) == controls.control_of(memories[0])  # the chunks at 512
