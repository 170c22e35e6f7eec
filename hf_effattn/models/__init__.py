"""The models as the tools name them: which class is which head, the presets, and a hybrid's parts switched on and
off."""
