"""The model code of hf_effattn: one flat folder, so that ``save_pretrained`` can copy it as remote code.

Files here import each other only as ``from .name import X`` and import nothing but torch and
transformers.
"""
