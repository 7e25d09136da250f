"""--values-file: one user's value per line, UTF-8 (the simulations of `ldptel simulate`
and `ldptel heavy-hitters` run on the users' own data)."""

from __future__ import annotations

from pathlib import Path

from ldptel.client.errors import ParameterError


def read_values(path: str) -> list[str]:
    """The file's lines without their line ends (\\n or \\r\\n), one user each; an empty
    line is a user whose value is the empty string."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as error:
        raise ParameterError("values_file", f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ParameterError("values_file", f"is not UTF-8 (byte {error.start})") from None
    lines = text.split("\n")
    if lines[-1] == "":  # the last line's end, not an empty value
        lines.pop()
    if not lines:
        raise ParameterError("values_file", f"{path} holds no values")
    return [line.removesuffix("\r") for line in lines]
