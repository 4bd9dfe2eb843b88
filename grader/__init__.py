"""kvgrade: interview exercises on attention during decode with a KV cache, and their grader."""
__version__ = "0.1.0"
