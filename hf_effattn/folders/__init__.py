"""The folders a command reads and writes: a Hub id or a local folder, the output-folder rule and its whole-folder
replacement, a sentence-transformers checkpoint's modules."""
