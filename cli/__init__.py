"""The `ldptel` command."""
