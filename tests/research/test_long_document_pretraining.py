"""The long-document benchmark's pretraining budget (research/long_documents/pretrain.py): more steps, another
length with the same tokens a step, checkpoints that resume and go once a result is saved, and the memory-span
remake of a row."""

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from hf_effattn.modeling.local_settings import GATE_STARTS

import pretrain
from rows import ROWS


def test_the_steps_lever_pretrains_longer_resumably_against_chunks_pretrained_as_long(tmp_path, monkeypatch):
    """A row with more masked-LM steps scales its warm-up, continues its newest checkpoint (unless measured again),
    and is held against the chunks pretrained with the same steps, not the benchmark's 80."""
    import json

    import block_tables
    import controls
    import runs

    lever = "singularformer-b512-direct-gate-lr0.1-mlm160"
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    command = pretrain.stage_command(ROWS[lever], "mlm", budget)
    assert command[command.index("--max_train_steps") + 1] == "160"
    assert command[command.index("--num_warmup_steps") + 1] == "16"
    assert command[command.index("--resume_from_checkpoint") + 1] == "latest"
    assert command[command.index("--checkpointing_steps") + 1] == str(pretrain.CHECKPOINT_STEPS)
    again = pretrain.stage_command(ROWS[lever], "mlm", SimpleNamespace(**{**vars(budget), "again": True}))
    assert "--resume_from_checkpoint" not in again and "--overwrite_output_dir" in again
    assert controls.control_of(lever) == "local-b512-mlm160" and ROWS["local-b512-mlm160"].mlm_steps == 160
    assert controls.control_of("singularformer-b512-direct-gate-lr0.1") == "local-b512"

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    for reader, losses in [("local-b512", [1.0, 1.0, 1.2, 1.0]), ("local-b512-mlm160", [2.0, 2.0, 2.2, 2.0]),
                           (lever, [1.9, 1.8, 2.1, 1.9])]:
        (tmp_path / "long_range").mkdir(exist_ok=True)
        (tmp_path / "long_range" / f"{reader}@mlm.json").write_text(json.dumps({"losses": losses}))
    assert block_tables.below_chunks(lever) == "met (-0.125, 2 s.e. 0.050)"


def test_a_masked_lm_stage_removes_its_checkpoints_once_its_result_is_saved(tmp_path, monkeypatch):
    import runs

    def train(command):
        checkpoint = Path(command[command.index("--output_dir") + 1]) / "checkpoints" / "step_20"
        checkpoint.mkdir(parents=True)
        assert runs.read_result("masked_lm", "local-b512-mlm160_mlm") is None  # nothing saved yet
        return 1.0

    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    (tmp_path / "head").mkdir()
    (tmp_path / "head" / "model.safetensors").write_bytes(b"the head's weights")
    monkeypatch.setattr(pretrain, "HEAD_FOLDER", tmp_path / "head")
    monkeypatch.setattr(pretrain, "run_command", train)
    monkeypatch.setattr(pretrain, "evaluate_folder", lambda folder, length, block: {"loss": 5.0})
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    pretrain.run_stage("local-b512-mlm160", "mlm", budget)
    saved = runs.read_result("masked_lm", "local-b512-mlm160_mlm")
    assert saved["loss"] == 5.0 and saved["tokens_trained"] == 160 * 4 * 2048
    assert saved["head_sha256"] == hashlib.sha256(b"the head's weights").hexdigest()[:16]
    assert (tmp_path / "models" / "local-b512-mlm160-2048-mlm").is_dir()
    assert not (tmp_path / "models" / "local-b512-mlm160-2048-mlm" / "checkpoints").exists()


def test_a_row_pretrained_at_512_is_read_at_2048_as_every_row():
    row = ROWS["local-b512-mlm160-at512"]
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    convert = pretrain.stage_command(row, "extend", budget)
    assert convert[convert.index("--max_length") + 1] == "2048"
    train = pretrain.stage_command(row, "mlm", budget)
    assert [train[train.index(option) + 1] for option in ("--max_seq_length", "--per_device_train_batch_size")] \
        == ["512", "4"]


@pytest.mark.parametrize(("batch_size", "accumulation", "length", "batch", "accumulated"),
                         [(1, 4, 512, 4, 4), (1, 4, 2048, 1, 4), (1, 4, 8192, 1, 1), (2, 4, 8192, 1, 2)])
def test_a_masked_lm_step_reads_the_same_tokens_at_every_length(batch_size, accumulation, length, batch, accumulated):
    budget = SimpleNamespace(batch_size=batch_size, mlm_accumulation=accumulation, mlm_learning_rate=1e-4,
                             mlm_steps=80, mlm_warmup_steps=8, again=False)
    command = pretrain.mlm_command(Path("in"), Path("out"), budget, length)
    value = lambda option: int(command[command.index(option) + 1])  # noqa: E731
    assert value("--max_seq_length") == length
    assert (value("--per_device_train_batch_size"), value("--gradient_accumulation_steps")) == (batch, accumulated)
    assert batch * accumulated * length == batch_size * accumulation * 2048


def test_a_step_that_makes_no_whole_block_of_the_length_is_refused():
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=2, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    with pytest.raises(SystemExit, match="1 x 2 blocks of 2048 a step do not make whole blocks of 8192"):
        pretrain.mlm_command(Path("in"), Path("out"), budget, 8192)


def test_the_length_lever_is_extended_to_and_pretrained_at_8192_against_the_same_chunks(tmp_path, monkeypatch):
    """A row pretrained at the length it reads: converted to 8,192, each masked-LM step one block of 8,192 (the
    tokens of four of 2,048), its loss measured at 2,048 like every row's, held against the chunks pretrained so."""
    import controls
    import runs

    name = "kerformer-b512-direct-gate-lr0.1-mlm160-at8192"
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")  # no rerun of a control on another head
    extend = pretrain.stage_command(ROWS[name], "extend", budget)
    assert extend[extend.index("--max_length") + 1] == "8192"
    assert extend[extend.index("--output_dir") + 1] == str(tmp_path / "models" / f"{name}-8192-extend")
    mlm = pretrain.stage_command(ROWS[name], "mlm", budget)
    assert mlm[mlm.index("--model_name_or_path") + 1] == str(tmp_path / "models" / f"{name}-8192-extend")
    assert mlm[mlm.index("--max_seq_length") + 1] == "8192" and mlm[mlm.index("--max_train_steps") + 1] == "160"
    assert mlm[mlm.index("--gradient_accumulation_steps") + 1] == "1"
    assert mlm[mlm.index("--mechanism_weight_learning_rate") + 1] == "0.1" and "--block_special_tokens" in mlm
    assert controls.control_of(name) == "local-b512-mlm160-at8192"  # the chunks pretrained so
    assert controls.control_of("local-b512-mlm160-at8192") == "local-b512-mlm160"  # what the length changes
    assert ROWS["local-b512-mlm160-at8192"].length == 8192 and ROWS["local-b512-mlm160-at8192"].mlm_steps == 160
    seed2 = "kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192"  # its second seed, against the chunks' second
    assert controls.control_of(seed2) == "local-b512-mlm160-seed2-at8192" and ROWS[seed2].length == 8192
    seeded = pretrain.stage_command(ROWS[seed2], "mlm", budget)
    assert seeded[seeded.index("--seed") + 1] == "2" and mlm[mlm.index("--seed") + 1] != "2"

    measured = []
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(pretrain, "run_command", lambda command: 1.0)
    monkeypatch.setattr(pretrain, "head_identity", lambda: "0123456789abcdef")  # no head folder in a fresh clone
    monkeypatch.setattr(pretrain, "evaluate_folder", lambda *read: measured.append(read) or {"loss": 5.0})
    pretrain.run_stage(name, "mlm", budget)
    assert measured == [(tmp_path / "models" / f"{name}-8192-mlm", 2048, 512)]
    assert runs.read_result("masked_lm", f"{name}_mlm")["tokens_trained"] == 160 * 4 * 2048


def test_the_all_keys_lever_remakes_a_row_resumably(tmp_path, monkeypatch):
    """``kernel_memory.py``: the row's own budget (steps, the gates' learning rate, length and data), the memory over
    every key while it trains (a class attribute), the pretraining continuing its newest checkpoint, the result under
    the row's name with its per-token losses, the checkpoints gone once it is saved, and the converted model kept for
    a run that goes on."""
    import kernel_memory
    import long_range
    import pieces
    import runs

    import hf_effattn
    from hf_effattn.finetuning import masked_lm
    from hf_effattn.modeling.kernel_attention import KernelAttention

    row = "kerformer-b512-direct-gate-lr0.1-mlm160"
    converted, trained, evaluated = [], [], []

    def convert(checkpoint, attention, output, **options):
        converted.append((output, options))
        output.mkdir(parents=True)

    def run_mlm(argv):
        assert KernelAttention.mechanism_outside_window is False  # set in this process only
        trained.append(argv)
        (Path(argv[argv.index("--output_dir") + 1]) / "checkpoints" / "step_20").mkdir(parents=True, exist_ok=True)

    def evaluate_folder(folder, length, block):
        evaluated.append((folder.name, length, block))
        return {"loss": 4.9}

    monkeypatch.setattr(KernelAttention, "mechanism_outside_window", True)  # restored after the test
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(pretrain, "MODELS", tmp_path / "models")
    for module in (pieces, runs):
        monkeypatch.setattr(module, "DATA", tmp_path)
    monkeypatch.setattr(hf_effattn, "convert", convert)
    monkeypatch.setattr(masked_lm, "main", run_mlm)
    monkeypatch.setattr(pretrain, "evaluate_folder", evaluate_folder)
    monkeypatch.setattr(long_range, "folder_losses", lambda folder, length, block: ([4.8, 5.0], [True, False]))
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    kernel_memory.measure(row, budget)
    argv, folder = trained[0], tmp_path / "models" / f"{row}-all-keys-2048-mlm"
    (extended, options), = converted
    assert extended == tmp_path / "models" / f"{row}-all-keys-2048-extend" and options["max_length"] == 2048
    assert options["attention_config"] == ROWS[row].settings
    assert argv[argv.index("--max_train_steps") + 1] == "160"
    assert argv[argv.index("--mechanism_weight_learning_rate") + 1] == "0.1"
    assert argv[argv.index("--train_file") + 1] == str(tmp_path / "mlm_train.jsonl")
    assert argv[argv.index("--resume_from_checkpoint") + 1] == "latest" and argv[argv.index("--output_dir") + 1] \
        == str(folder)
    assert evaluated == [(folder.name, 2048, 512)]
    result = runs.read_result(kernel_memory.KIND, row)
    assert result["loss"] == 4.9 and result["losses"] == [4.8, 5.0] and not (folder / "checkpoints").exists()
    kernel_memory.measure(row, budget)
    assert len(converted) == 1 and len(trained) == 2  # the conversion kept, the pretraining run again


def test_the_pieces_lever_pretrains_at_8192_on_shuffled_pieces_of_the_documents(tmp_path, monkeypatch):
    """The pieces of every document (cut at word starts by ``run_mlm.py``'s own cutter, tested with it) are shuffled
    into one file, built once; a pieces row pretrains on it at 8,192 and is held against the chunks pretrained so."""
    import json

    import controls
    import pieces
    import runs
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(runs.minilm_folder())
    monkeypatch.setattr(runs, "DATA", tmp_path)
    monkeypatch.setattr(pieces, "DATA", tmp_path)
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")  # no rerun of a control on another head
    documents = [f"Document {number} says: " + "the scheduler picks the next task to run. " * 12 for number in range(4)]
    rows = [{"text": text, "label": "scheduler"} for text in documents]  # mlm_train's schema, as mlm_heldout's
    (tmp_path / "mlm_train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    path = pieces.pieces_file(8)
    built_rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {tuple(row) for row in built_rows} == {("text", "label")}  # its columns, so that both files load together
    built = [row["text"] for row in built_rows]
    in_order = [piece for document in documents for piece in pieces.cut_at_word_starts(document, tokenizer, 8)]
    assert sorted(built) == sorted(in_order) and built != in_order  # every piece, shuffled
    path.write_text("kept\n")
    assert pieces.pieces_file(8).read_text() == "kept\n"  # built once, never rebuilt over

    name = "kerformer-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048"
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    mlm = pretrain.stage_command(ROWS[name], "mlm", budget)
    assert mlm[mlm.index("--train_file") + 1] == str(tmp_path / "mlm_train_pieces2048.jsonl")
    assert mlm[mlm.index("--max_seq_length") + 1] == "8192"
    plain = pretrain.stage_command(ROWS["kerformer-b512-direct-gate-lr0.1-mlm160-at8192"], "mlm", budget)
    assert plain[plain.index("--train_file") + 1] == str(tmp_path / "mlm_train.jsonl")
    assert controls.control_of(name) == "local-b512-mlm160-at8192-pieces2048"
    assert controls.control_of("local-b512-mlm160-at8192-pieces2048") == "local-b512-mlm160"
    seed2 = "kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048"  # its second seed, against the chunks'
    assert controls.control_of(seed2) == "local-b512-mlm160-seed2-at8192-pieces2048" and ROWS[seed2].mlm_seed == 2
    again = pretrain.stage_command(ROWS[seed2], "mlm", budget)  # the same pieces, another seed
    assert again[again.index("--train_file") + 1] == str(tmp_path / "mlm_train_pieces2048.jsonl")
    assert again[again.index("--seed") + 1] == "2" and mlm[mlm.index("--seed") + 1] != "2"


def test_the_block_tables_leave_out_what_no_stage_measured_and_name_the_rows_not_run(tmp_path, monkeypatch):
    """A row whose cells all read "not run" (or "-") is left out of a block table, a cell every row fills (the cost of
    its architecture) does not count as a measurement, and the rows no stage has run are named above the tables."""
    import json

    import block_tables
    import controls
    import runs

    body = [["`a`", "not run", "-", "met (1.08 vs 1.5)"], ["`b`", "4.931", "not run", "met (1.08 vs 1.5)"]]
    assert block_tables.measured(body) == body
    assert block_tables.measured(body, always=1) == [body[1]]
    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    (tmp_path / "masked_lm").mkdir()
    for name in [*controls.CHUNK_ROWS, *controls.BLOCK_ROWS][1:]:
        (tmp_path / "masked_lm" / f"{name}_extend.json").write_text(json.dumps({"loss": 6.3}))
    assert controls.CHUNK_ROWS[0] == controls.CHUNKS
    expected = f"Defined in `rows.py`, not run yet (left out of the tables): `{controls.CHUNKS}`."
    assert block_tables.not_run() == expected
    assert f"| `{controls.CHUNKS}`:" not in block_tables.masked_lm_table()
    assert "| `local-b512-plain`:" in block_tables.masked_lm_table()


def test_a_gated_row_is_its_row_with_the_setting_and_is_paired_with_it_on_the_same_tokens(tmp_path, monkeypatch):
    """A ``-gated`` row: its row, converted with ``shared_normaliser`` False (saved with the model), pretrained with
    the same budget; the block tables' line holds it against that row, before and after the pretraining, and on the
    same masked tokens."""
    import json

    import block_tables
    import controls
    import pieces
    import runs

    for module in (pieces, runs):
        monkeypatch.setattr(module, "DATA", tmp_path)
    (tmp_path / "mlm_train_pieces2048.jsonl").write_text("built\n")  # pieces.py's file, tested with it
    shared = "kerformer-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048"
    name = f"{shared}-gated"
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=80,
                             mlm_warmup_steps=8, again=False)
    convert = pretrain.stage_command(ROWS[name], "extend", budget)
    assert json.loads(convert[convert.index("--attention_config") + 1]) == {"local_block": 512,
                                                                            "shared_normaliser": False}
    mine, theirs = (pretrain.stage_command(ROWS[row], "mlm", budget) for row in (name, shared))
    assert mine == [part.replace(f"{shared}-8192", f"{name}-8192") for part in theirs]  # the same budget and data
    assert controls.control_of(name) == controls.control_of(shared)

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    results = {
        ("masked_lm", f"{shared}_mlm"): {"loss": 4.941},
        ("masked_lm", f"{name}_extend"): {"loss": 6.3},
        ("masked_lm", f"{name}_mlm"): {"loss": 4.6},
        ("masked_lm", f"{controls.CHUNKS}_extend"): {"loss": 6.315},
        ("long_range", f"{shared}@mlm"): {"losses": [4.2, 4.2, 5.0, 5.0], "far": [True] * 4},
        ("long_range", f"{name}@mlm"): {"losses": [4.0, 4.2, 5.0, 5.0], "far": [True] * 4},
    }
    for (kind, result), values in results.items():
        (tmp_path / kind).mkdir(exist_ok=True)
        (tmp_path / kind / f"{result}.json").write_text(json.dumps(values))
    start = GATE_STARTS["mixed", "blocks"]  # a gated memory's default: the row sets none
    assert block_tables.kernel_memory_text() == (
        f"- `{name}`, the memory normalised on its own and mixed per head by a gate from {start:g}: 6.3000 nats "
        f"before any "
        f"training (the chunked reader 6.3150), 4.6000 after the pretraining against the shared normaliser's 4.9410 "
        f"(`{shared}`) (-0.050 ± 0.050 a token).")
