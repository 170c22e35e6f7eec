"""The Transformers and PyTorch versions this model code runs on; Transformers' is checked when it is imported.

Importing this file raises an ``ImportError`` that names the required version on an older Transformers: the
Hub folders that ``save_pretrained`` writes carry this code, and Transformers 4 would otherwise fail on them with
an unrelated error. The configuration and model files import it before anything else.
"""

import transformers

SUPPORTED_TRANSFORMERS = ">=5.20,<6"
LOWEST_TRANSFORMERS = (5, 20)  # the lowest tested (.ci/run's second lane)
SUPPORTED_TORCH = ">=2.4"


def check_transformers_version(version: str) -> None:
    """Raise an ``ImportError`` when Transformers ``version`` is older than :data:`LOWEST_TRANSFORMERS`."""
    if tuple(int(part) for part in version.split(".")[:2]) < LOWEST_TRANSFORMERS:
        raise ImportError(
            f"This efficient-attention model (hf_effattn) needs Transformers {SUPPORTED_TRANSFORMERS}, but "
            f"Transformers {version} is installed: run `pip install -U \"transformers{SUPPORTED_TRANSFORMERS}\"`."
        )


check_transformers_version(transformers.__version__)
