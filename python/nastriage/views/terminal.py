"""Draw the summary (``views.summary``) on a terminal with rich, or as plain text.

* On a terminal: rich tables sized to the terminal width; columns that do not fit are
  dropped, least important first. Colour follows rich's rules, so ``NO_COLOR`` (any value)
  turns it off and ``TERM=dumb`` gives no styling.
* Not a terminal (pipe, file) or ``TERM=dumb``: plain aligned text, no colour, no box
  drawing, no width limit, so ``grep``/``awk`` see whole lines.

All cell text is printed literally (rich ``Text``, never markup) and was sanitised when the
summary was built, so nothing from a capture can inject escape sequences or markup.
rich is imported only for terminal output.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TextIO

from nastriage.views.summary import (
    Block,
    Column,
    KeyValueBlock,
    ListBlock,
    TableBlock,
    build_summary,
)

if TYPE_CHECKING:
    from nastriage.capture import Capture

__all__ = ["fit_columns", "print_summary", "render_plain", "render_rich", "use_plain"]


def use_plain(file: TextIO) -> bool:
    """Plain text unless ``file`` is an interactive terminal that understands escapes."""
    if os.environ.get("TERM") == "dumb":
        return True
    try:
        return not file.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return True


def _can_encode(file: TextIO, text: str) -> bool:
    encoding = getattr(file, "encoding", None)
    if not encoding:  # an in-memory stream (io.StringIO): any text goes
        return True
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def print_summary(
    capture: Capture,
    *,
    top: int = 10,
    file: TextIO | None = None,
    plain: bool | None = None,
    width: int | None = None,
) -> None:
    """Print the summary of ``capture`` to ``file`` (default: standard output)."""
    out = sys.stdout if file is None else file
    if plain is None:
        plain = use_plain(out)
    blocks = build_summary(capture, top=top, unicode=_can_encode(out, "\u2192\u2026"))
    if plain:
        render_plain(blocks, out)
    else:
        render_rich(blocks, out, width=width)


# -- plain text ------------------------------------------------------------------------------


def _plain_table(block: TableBlock) -> list[str]:
    headers = [c.header for c in block.columns]
    widths = [len(h) for h in headers]
    for row in block.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: list[str]) -> str:
        parts = []
        for col, cell, w in zip(block.columns, cells, widths):
            parts.append(cell.rjust(w) if col.align == "right" else cell.ljust(w))
        return "  ".join(parts).rstrip()

    lines = []
    if block.rows:
        lines.append(line(headers))
        lines.extend(line(row) for row in block.rows)
    if block.note:
        lines.append(block.note)
    return lines


def render_plain(blocks: list[Block], out: TextIO) -> None:
    """Undecorated text: one title line per block, then aligned content."""
    chunks: list[str] = []
    for block in blocks:
        lines: list[str] = []
        if block.title:
            lines.append(f"{block.title}:")
        if isinstance(block, KeyValueBlock):
            key_width = max((len(k) for k, _ in block.items), default=0) + 1
            lines.extend(f"  {(k + ':').ljust(key_width)}  {v}" for k, v in block.items)
        elif isinstance(block, ListBlock):
            lines.extend(f"  {item}" for item in block.items)
        else:
            lines.extend(f"  {text}" if text else "" for text in _plain_table(block))
        chunks.append("\n".join(lines))
    out.write("\n\n".join(chunks) + "\n")
    out.flush()


# -- rich ------------------------------------------------------------------------------------

#: Space rich adds per column in our tables (padding either side and the separator).
_PAD = 3


#: Columns with at least this priority are never dropped (a fold column folds instead).
ESSENTIAL = 90


def _min_width(block: TableBlock, i: int) -> int:
    """Width a column needs: its widest cell, or for a fold column its widest word."""
    col: Column = block.columns[i]
    texts = [col.header, *(row[i] for row in block.rows)]
    if col.fold:
        return max(len(word) for text in texts for word in (text.split() or [""]))
    return max(len(text) for text in texts)


def fit_columns(block: TableBlock, width: int) -> list[int]:
    """Indices of the columns to show so the table fits ``width`` characters.

    Columns are dropped lowest priority first (ties: rightmost first; columns sharing a
    ``group`` go together) until the table fits, counting a ``fold`` column (addresses) at
    its widest word since rich wraps it between words. Columns with priority ``ESSENTIAL``
    or more are never dropped.
    """
    columns = block.columns
    needed = {i: _min_width(block, i) + _PAD for i in range(len(columns))}
    keep = list(range(len(columns)))
    for i in sorted(keep, key=lambda i: (columns[i].priority, -i)):
        if sum(needed[j] for j in keep) <= width or columns[i].priority >= ESSENTIAL:
            break
        if i not in keep:  # already dropped with its group
            continue
        group = columns[i].group
        keep = [j for j in keep if j != i and (group is None or columns[j].group != group)]
    return keep


def render_rich(blocks: list[Block], out: TextIO, *, width: int | None = None) -> None:
    """Tables and headings with rich, sized to the terminal (or ``width``)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, width=width, highlight=False, emoji=False, markup=False)
    for n, block in enumerate(blocks):
        if n:
            console.print()
        if block.title:
            console.print(Text(block.title, style="bold cyan"))
        if isinstance(block, KeyValueBlock):
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column(overflow="fold")
            for key, value in block.items:
                grid.add_row(Text(key), Text(value))
            console.print(grid)
        elif isinstance(block, ListBlock):
            style = "yellow" if block.title.startswith("Warnings") else ""
            for item in block.items:
                console.print(Text(f"  {item}", style=style), overflow="fold")
        else:
            keep = fit_columns(block, console.width)
            if block.rows:
                table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold")
                for i in keep:
                    col = block.columns[i]
                    table.add_column(
                        Text(col.header),
                        justify=col.align,
                        no_wrap=not col.fold,
                        overflow="fold",
                        min_width=_min_width(block, i) if col.fold else None,
                    )
                for row in block.rows:
                    table.add_row(*(Text(row[i]) for i in keep))
                console.print(table)
            notes = []
            if len(keep) < len(block.columns):
                hidden = ", ".join(c.header for i, c in enumerate(block.columns) if i not in keep)
                notes.append(f"(hidden to fit the terminal: {hidden})")
            if block.note:
                notes.insert(0, block.note)
            for note in notes:
                console.print(Text(note, style="dim"), overflow="fold")
    out.flush()
