"""One line for an error, as rows and reasons show it."""

from __future__ import annotations


def first_error_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # Dynamo wraps backend errors as "backend='x' raised:\nRealError: ..."; the useful line is the real one.
    if len(lines) > 1 and lines[0].endswith("raised:"):
        lines = lines[1:]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]
