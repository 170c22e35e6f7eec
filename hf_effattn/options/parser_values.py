"""The values that the ``hf-effattn`` subcommands' parsers offer as choices or give as defaults, written out here:
their sources (the registry of mechanisms, the heads, the benchmark's settings, the synthetic tasks) import PyTorch
and Transformers, seconds that a subcommand's ``--help`` or a bad option should not wait. Each commented source is
checked against its value by ``tests/commands/test_startup.py``, so that the table cannot drift: a mechanism, head or
task added there fails that test until it is added here too."""

ATTENTIONS = ("singularformer", "kerformer", "dba", "psf", "eager", "sdpa", "linear", "performer", "nystromformer",
              "linformer", "cosformer", "local")  # modeling.attentions.list_attentions(), in registration order
TASKS = ("base", "image-classification", "masked-image-modeling", "masked-lm", "multiple-choice",
         "question-answering", "sequence-classification", "token-classification")  # models.model_classes.all_tasks()

TRAINABLE = ("mechanism", "attention", "attention_block")  # conversion.transfer.TRAINABLE: what a transfer trains
MODEL_LENGTH = "model"  # conversion.transfer.MODEL_LENGTH: a transfer's length, the model's maximum
MECHANISM_WEIGHT_LEARNING_RATE = 1e-2  # models.hybrid_parts.MECHANISM_WEIGHT_LEARNING_RATE

BENCH_PARTS = ("attention", "layer", "encoder")  # benchmark.options.PARTS
BENCH_DTYPES = ("float32", "bfloat16", "float16")  # benchmark.options.DTYPES' names
BENCH_PEERS = ("roberta-sdpa", "roberta-eager", "roberta-chunks512", "nystromformer", "bigbird",
               "longformer")  # benchmark.peers.PEERS' keys
BENCH_DEFAULTS = {  # benchmark.options.BenchmarkSettings' defaults (but the device's, the machine's own)
    "lengths": (256, 512, 1024, 2048, 4096, 8192), "parts": BENCH_PARTS, "hidden_size": 768, "num_heads": 12,
    "num_layers": 2, "dtype": "float32", "repeats": 5, "warmup": 1, "time_limit": 60.0, "fit_points": 3, "seed": 0,
}

SYNTHETIC_TASKS = ("adding", "temporal-order", "listops")  # synthetic_tasks.training.TASKS' names
POOLINGS = ("mean", "first")  # synthetic_tasks.model.POOLINGS
NORM_STYLES = ("pre", "post")  # synthetic_tasks.model.NORM_STYLES' names

PASSAGE_LENGTH = 64  # evaluation.retrieval.PASSAGE_LENGTH
