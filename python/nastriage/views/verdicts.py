"""The diagnosis on the terminal: verdicts first, one block per finding.

Each finding prints as a severity tag and its title, then one line of evidence and one line
with the first next step. Colour by severity on a terminal (rich; ``NO_COLOR`` and
``TERM=dumb`` honoured), plain text into a pipe. Every string is sanitised: titles and
evidence quote file names and addresses from the capture.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from nastriage.sanitize import clean

if TYPE_CHECKING:
    from nastriage.diagnosis.finding import Finding

__all__ = ["MAX_INFO", "print_verdicts", "verdict_blocks"]

#: Info findings shown on the terminal (all of them are in the JSON and HTML output).
MAX_INFO = 4
#: Named numbers shown on the evidence line.
MAX_NUMBERS = 5

_TAGS = {"critical": "CRITICAL", "warning": "WARNING", "info": "info"}
_STYLES = {"critical": "bold red", "warning": "bold yellow", "info": "cyan"}


def _value(v: object) -> str:
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _evidence_line(f: Finding) -> str:
    parts = [f"{k}={_value(v)}" for k, v in list(f.evidence.numbers.items())[:MAX_NUMBERS]]
    text = ", ".join(parts)
    if f.evidence.frames:
        shown = " ".join(str(x) for x in f.evidence.frames[:6])
        more = " ..." if len(f.evidence.frames) > 6 else ""
        text += f"; frames {shown}{more}"
    return clean(text)


def verdict_blocks(findings: list[Finding]) -> list[tuple[str, list[str]]]:
    """(severity, lines) per finding shown: a title line, then evidence and next step."""
    blocks: list[tuple[str, list[str]]] = []
    infos = 0
    hidden = 0
    for f in findings:
        if f.severity == "info" and f.id != "healthy":
            infos += 1
            if infos > MAX_INFO:
                hidden += 1
                continue
        tag = _TAGS.get(f.severity, f.severity)
        lines = [f"{tag:<8}  {clean(f.title)}  [{f.id}]"]
        evidence = _evidence_line(f)
        if evidence:
            lines.append(f"{'':<8}  Evidence: {evidence}")
        if f.evidence.wireshark_filter:
            lines.append(f"{'':<8}  Wireshark: {clean(f.evidence.wireshark_filter)}")
        if f.next_steps:
            lines.append(f"{'':<8}  Next: {clean(f.next_steps[0])}")
        blocks.append((f.severity, lines))
    if hidden:
        blocks.append(("info", [f"... and {hidden} more info finding(s) (see --json or --html)"]))
    return blocks


def _use_plain(out: TextIO) -> bool:
    from nastriage.views.terminal import use_plain

    return use_plain(out)


def print_verdicts(
    findings: list[Finding],
    *,
    file: TextIO | None = None,
    plain: bool | None = None,
    width: int | None = None,
) -> None:
    """Print the verdicts block (then a blank line) to ``file`` (default: stdout)."""
    out = sys.stdout if file is None else file
    if plain is None:
        plain = _use_plain(out)
    blocks = verdict_blocks(findings)
    if plain:
        text = ["Verdict:"]
        for _, lines in blocks:
            text.extend(f"  {line}" for line in lines)
        out.write("\n".join(text) + "\n\n")
        out.flush()
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, width=width, highlight=False, emoji=False, markup=False)
    console.print(Text("Verdict", style="bold cyan"))
    for severity, lines in blocks:
        first, *rest = lines
        tag, _, title = first.partition("  ")
        console.print(
            Text.assemble(("  " + tag, _STYLES.get(severity, "")), "  " + title.lstrip()),
            overflow="fold",
        )
        for line in rest:
            console.print(Text("  " + line, style="dim"), overflow="fold")
    console.print()
    out.flush()
