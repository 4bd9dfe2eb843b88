"""The block hash of prefix_cache (given: the grader uses this file, not an edited copy).

``block_hash(parent, tokens)`` names one full block: ``parent`` is the hash this function gave
the block before it (None for a sequence's first block), ``tokens`` the block's token ids as a
tuple of Python ints. The result is a Python int. It is a fixed function of its arguments,
the same in every process and run (unlike Python's ``hash`` of a tuple).
"""
import hashlib


def block_hash(parent: int | None, tokens: tuple) -> int:
    """A fixed 128-bit hash of (parent, tokens). TypeError for anything but None or an int
    as parent and a tuple of ints (not bools, not numpy integers) as tokens."""
    if parent is not None and type(parent) is not int:
        raise TypeError(f"parent must be None or a Python int, got {type(parent).__name__}")
    if type(tokens) is not tuple or any(type(t) is not int for t in tokens):
        kinds = sorted({type(t).__name__ for t in tokens}) if isinstance(tokens, (tuple, list)) else []
        raise TypeError(f"tokens must be a tuple of Python ints, got a {type(tokens).__name__}"
                        + (f" of {', '.join(kinds)}" if kinds else ""))
    text = f"{parent}|{','.join(map(str, tokens))}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:16], "big")
