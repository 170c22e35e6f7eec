"""Every registered attention mechanism, imported so that it registers, and the registry's API.

Import mechanisms from here (not from ``attention_base``) to be sure the registry is complete. (A saved folder's copy
imports only what its model runs: ``remote_code.py``.)
"""

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, setting
from .attention_registry import (
    build_attention, build_settings, describe_attention, get_attention_class, get_settings_class, list_attentions,
    put_first, register_attention, register_composition, register_local_part, register_settings, resolved_attention,
)
# The order of ``list_attentions()`` (put_first, below): the four papers, then the baselines, then the local part
# alone; then the local parts and their compositions, which the encoder layer builds beside a mechanism.
from .attention_singular import SingularformerAttention, SingularformerSettings  # isort: skip
from .attention_kerformer import KerformerAttention, KerformerSettings  # isort: skip
from .attention_dba import DBAAttention, DBASettings  # isort: skip
from .attention_psf import PSFAttention, PSFSettings  # isort: skip
from .attention_vanilla import EagerAttention, SdpaAttention  # isort: skip
from .attention_linear import LinearAttention, LinearSettings  # isort: skip
from .attention_performer import PerformerAttention, PerformerSettings  # isort: skip
from .attention_nystromformer import NystromformerAttention, NystromformerSettings  # isort: skip
from .attention_linformer import LinformerAttention, LinformerSettings  # isort: skip
from .attention_cosformer import CosformerAttention, CosformerSettings  # isort: skip
from .local_attention import LocalAttention, LocalSettings  # isort: skip
from .hybrid_attention import HybridAttention, LocalPart  # isort: skip
from .local_window import LocalWindow  # isort: skip
from .local_blocks import LocalBlocks  # isort: skip
from .shared_normaliser import SharedNormaliserBesideBlocks, SharedNormaliserBesideWindow  # isort: skip
from .local_settings import LocalPartSettings  # isort: skip

put_first([cls.name for cls in (
    SingularformerAttention, KerformerAttention, DBAAttention, PSFAttention, EagerAttention, SdpaAttention,
    LinearAttention, PerformerAttention, NystromformerAttention, LinformerAttention, CosformerAttention, LocalAttention,
)])

__all__ = [
    "AttentionOutput", "AttentionSettings", "EfficientAttention", "build_attention", "build_settings",
    "describe_attention", "get_attention_class", "get_settings_class", "list_attentions", "register_attention",
    "register_local_part", "register_settings", "resolved_attention", "setting",
    "DBAAttention", "DBASettings", "KerformerAttention", "KerformerSettings", "PSFAttention", "PSFSettings",
    "SingularformerAttention", "SingularformerSettings", "EagerAttention", "SdpaAttention",
    "LinearAttention", "LinearSettings", "PerformerAttention", "PerformerSettings", "NystromformerAttention",
    "NystromformerSettings", "LinformerAttention", "LinformerSettings", "CosformerAttention", "CosformerSettings",
    "LocalAttention", "LocalSettings", "HybridAttention", "LocalPart", "LocalPartSettings", "LocalWindow",
    "LocalBlocks", "SharedNormaliserBesideBlocks", "SharedNormaliserBesideWindow", "register_composition",
]
