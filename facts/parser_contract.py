"""The parser contract of ``facts.parsers`` and ``facts.host_parsers``, in one decorator.

Every public parser takes the text a tool printed (``str``; ``bytes`` are decoded as UTF-8)
and returns plain data. Whatever the input (junk, a truncated output, an unknown format,
a value that is not text), the only exception it raises is ``ValueError``, and its message
names the format it expected, so a caller can turn it into one clear per-host failure.
Line endings are normalised to ``\n`` before parsing. Pure: no pyinfra, no I/O.
"""
import functools

_NA = {"n/a", "not supported", "unknown error", "insufficient permissions",
       "requested functionality has been deprecated", "not available"}


def contract(fmt):
    """Turn any non-ValueError escaping a parser into a ValueError naming ``fmt``."""
    def wrap(function):
        @functools.wraps(function)
        def inner(text, *args, **kwargs):
            if isinstance(text, (bytes, bytearray)):
                text = bytes(text).decode("utf-8", "replace")
            if not isinstance(text, str):
                raise ValueError(f"expected {fmt} as text (str), got {type(text).__name__}")
            try:
                return function(text.replace("\r\n", "\n").replace("\r", "\n"), *args, **kwargs)
            except ValueError:
                raise
            except Exception as error:  # noqa: BLE001 - the contract allows only ValueError
                raise ValueError(f"could not parse {fmt} (internal error "
                                 f"{type(error).__name__}: {error}); report this output "
                                 "to gpuhost's maintainers") from error
        return inner
    return wrap


def na(value):
    """Value with N/A-like cells turned into None (stripped)."""
    if value is None:
        return None
    value = value.strip()
    inner = value[1:-1].strip() if value.startswith("[") and value.endswith("]") else value
    return None if inner.lower() in _NA else value
