"""The ready Accelerate configurations in ``configs/`` load with Accelerate and say what their names say."""

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from helpers.finetuning import REPO

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def test_every_launch_setup_has_a_config():
    names = {path.stem for path in CONFIGS}
    assert {"cpu", "cpu_2proc", "single_gpu", "single_gpu_fp16", "single_gpu_bf16", "multi_gpu", "multi_gpu_fp16",
            "multi_gpu_bf16", "multi_node"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_config_loads_and_matches_its_name(path):
    config = load_config_from_file(str(path))
    expected_precision = next((p for p in ("fp16", "bf16") if p in path.stem), "no")
    if path.stem == "multi_node":
        expected_precision = "bf16"
        assert config.num_machines == 2 and config.num_processes == 16 and config.main_process_port
    assert config.mixed_precision == expected_precision
    if path.stem.startswith(("single", "cpu")) and path.stem != "cpu_2proc":
        assert config.num_processes == 1
    if path.stem == "cpu_2proc":
        # MULTI_GPU (with ACCELERATE_USE_CPU=1 at launch), not use_cpu: that would start a single process.
        assert config.distributed_type == "MULTI_GPU" and config.num_processes == 2 and not config.use_cpu
    assert "accelerate launch --config_file configs/" + path.name in path.read_text()


SHARDED = {"fsdp_full_shard": ("FSDP", None), "fsdp_hybrid_shard": ("FSDP", "HYBRID_SHARD"),
           "deepspeed_zero2": ("DEEPSPEED", 2), "deepspeed_zero3": ("DEEPSPEED", 3)}


@pytest.mark.parametrize("name", SHARDED)
def test_sharded_training_configs_shard_as_named(name):
    config = load_config_from_file(str(REPO / "configs" / f"{name}.yaml"))
    distributed_type, strategy = SHARDED[name]
    assert config.distributed_type == distributed_type
    if distributed_type == "DEEPSPEED":
        assert config.deepspeed_config["zero_stage"] == strategy
    else:
        assert config.fsdp_config["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"  # wraps _no_split_modules
        assert config.fsdp_config.get("fsdp_sharding_strategy") == strategy  # None: FSDP2's full sharding
    assert (REPO / "configs" / f"{name}.yaml").read_text().startswith("# ")  # says what it is for
