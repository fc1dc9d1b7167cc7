"""The bad-input error, in a module with no heavy imports so every script's --help is instant."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: stops the run with exit code 2 and one message naming file, row and column."""

    def __init__(self, file, message: str, row: int | None = None, column: str | None = None):
        self.file = str(file)
        self.row = row
        self.column = column
        self.message = message
        where = [self.file]
        if row is not None:
            # row = 1-based data row; the header is line 1, so data row r is line r + 1
            where.append(f"row {row} (line {row + 1})")
        if column is not None:
            where.append(f"column '{column}'")
        super().__init__(": ".join([", ".join(where), message]))

