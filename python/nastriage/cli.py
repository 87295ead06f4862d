"""The ``nastriage`` command line (documented in docs/cli.md).

Exit status: 0 analysed; 1 internal error (a bug: please report it); 2 bad usage or
unreadable input; 130 interrupted (Ctrl-C); 141 output closed early (e.g. ``| head``).

Startup must stay fast (``nastriage --version`` well under 0.3 s): this module imports only
the standard library at the top; the engine and the views load when needed (pyarrow only
for ``--html``).
"""

from __future__ import annotations

import argparse
import os
import sys

# `typing` is not imported at run time on the command's way to the engine (about 10 ms
# of start-up that the engine would wait for): these names serve the type checker only,
# which takes any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

__all__ = ["build_parser", "main"]

PROG = "nastriage"

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _Fail(Exception):
    """A user-facing error: one line on stderr and an exit status, no traceback."""

    def __init__(self, message: str, status: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.status = status


def _error(message: str) -> None:
    from nastriage.sanitize import clean

    sys.stderr.write(f"{PROG}: error: {clean(message)}\n")
    sys.stderr.flush()


def _warn(message: str) -> None:
    from nastriage.sanitize import clean

    sys.stderr.write(f"{PROG}: warning: {clean(message)}\n")


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked for (it may load the engine)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any):
        super().__init__(option_strings, dest=dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> NoReturn:
        from nastriage import __version__

        sys.stdout.write(f"{PROG} {__version__}\n")
        sys.stdout.flush()
        parser.exit(EXIT_OK)


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it ($COLUMNS, then
    standard output's terminal, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    try:
        return (stdout is not None and os.get_terminal_size(stdout.fileno()).columns) or 80
    except (ValueError, OSError):  # (not a terminal, or closed)
        return 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, told the width: without it argparse imports ``shutil`` (and
    with it ``bz2``, ``lzma``), 2.5 ms of every command's start-up, while building the
    parser."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(
            prog, indent_increment, max_help_position, _columns() - 2 if width is None else width
        )


def _top(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Find out why the NAS is slow, from a packet capture of NFS/SMB traffic.",
        epilog="Run 'nastriage analyze -h' for the options of a command. See docs/cli.md.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    analyze = commands.add_parser(
        "analyze",
        help="analyse capture files and print a summary",
        formatter_class=_HelpFormatter,
        description=(
            "Analyse one or more capture files (pcap, pcapng, snoop; gzip or zstd compressed "
            "or not) in one pass and print what they contain: files, protocols and the "
            "busiest TCP connections. Several files are merged in time order."
        ),
    )
    analyze.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="capture file; '-' reads standard input (at most once)",
    )
    analyze.add_argument(
        "--json",
        metavar="PATH",
        help="also write the full results as JSON to PATH ('-': standard output, "
        "which replaces the terminal summary)",
    )
    analyze.add_argument(
        "--html",
        metavar="PATH",
        help="also write an HTML report to PATH: one self-contained file (works offline) "
        "with the verdicts, conversations and charts (see docs/report.md)",
    )
    analyze.add_argument(
        "--top",
        type=_top,
        default=10,
        metavar="N",
        help="show the N conversations with the most bytes (default: 10; 0: none)",
    )
    analyze.add_argument(
        "--decode-as",
        type=_decode_as,
        action="append",
        default=[],
        metavar="PORT=PROTO",
        help="decode TCP connections on PORT as PROTO (nfs or smb) whatever their content "
        "looks like; repeatable (detection by content works on any port without it)",
    )
    analyze.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (it is shown only on a terminal and for input over 64 MiB)",
    )
    analyze.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no summary, no progress bar and no warnings on the terminal; errors only",
    )
    analyze.set_defaults(func=_cmd_analyze)
    return parser


_DECODE_AS_PROTOCOLS = ("nfs", "smb")


def _decode_as(text: str) -> tuple[int, str]:
    port, sep, proto = text.partition("=")
    proto = proto.strip().lower()
    if not sep or not port.strip().isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected PORT=nfs or PORT=smb, not {text!r}")
    if proto not in _DECODE_AS_PROTOCOLS:
        raise argparse.ArgumentTypeError(f"unknown protocol {proto!r} (use nfs or smb)")
    return int(port), proto


def _check_inputs(paths: list[str]) -> None:
    if paths.count("-") > 1:
        raise _Fail("standard input ('-') can be given only once")
    for p in paths:
        if p == "-":
            continue
        try:
            p.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fail(f"{p}: file names must be valid UTF-8") from None
        try:
            st = os.stat(p)
        except OSError as exc:
            raise _Fail(f"{p}: cannot open: {exc.strerror or exc}") from None
        import stat

        if stat.S_ISDIR(st.st_mode):
            raise _Fail(f"{p}: is a directory, not a capture file")


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _no_progress(bytes_read: int, total_bytes: int) -> None:
    """Progress callback that shows nothing (pending signals are handled when it runs)."""


def _preload(modules: list[str]) -> None:
    """Import what the run needs after the analysis on a thread of its own, while the
    engine works with the GIL released. pyarrow is not among them: the rules and views
    read the engine's tables as plain values (``Capture.plain_table``), and only
    ``--html`` and API users load it. A failed import is left for the real import to
    report.

    On two cores the imports' 22 ms of CPU are not free: the pass alone keeps both
    busy, and it took 13 ms longer for them on one lossy GiB. Started after the pass
    instead, beside the engine's digest, they saved 6 ms of the command there (medians of
    16 alternating runs), but the memory they take then adds to the digest's and the
    rules' and no longer hides under the pass's peak: the generated mix's peak was then
    26 MB at 1 GiB and 31-32 MB at 4 GiB (31 MB at both with the imports here), no longer
    flat. They stay here.
    """
    import importlib
    import threading

    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # reported by the import that needs it
                return

    threading.Thread(target=run, name="nastriage-preload", daemon=True).start()


def _cmd_analyze(args: argparse.Namespace) -> int:
    paths: list[str] = list(args.files)
    _check_inputs(paths)
    # A young collection every 100,000 allocations rather than 700 (a common setting for
    # a tool that runs once and exits): the rules' and views' objects (table values,
    # profiles) are almost all free of cycles, and scanning them again and again took
    # 12 ms after the pass with 4,743 connections. Garbage in cycles still goes, later.
    import gc

    gc.set_threshold(100_000, 20, 20)
    try:
        from nastriage import _core
    except ImportError as exc:
        raise _Fail(
            f"the analysis engine (nastriage._core) is not installed or not built: {exc}",
            EXIT_INTERNAL,
        ) from None

    json_to_stdout = args.json == "-"
    show_summary = not args.quiet and not json_to_stdout

    reporter = None
    if not (args.quiet or args.no_progress) and _stderr_is_tty():
        from nastriage.views.progress import ProgressReporter

        reporter = ProgressReporter(paths)
        if not reporter.worthwhile:
            reporter = None

    from contextlib import ExitStack

    from nastriage.capture import Capture

    with ExitStack() as stack:
        out = None
        if args.json is not None:
            # Not json_out itself (about 6 ms of start-up): it loads during the analysis.
            from nastriage.views.destination import json_output

            try:  # before the analysis, so that a bad path fails fast
                out = stack.enter_context(json_output(args.json))
            except OSError as exc:
                raise _Fail(f"cannot write JSON to {args.json}: {exc.strerror or exc}") from None
        if args.html is not None:
            if args.html == "-":
                raise _Fail(
                    "--html needs a file name (the report is not written to standard output)"
                )
            try:
                from nastriage.views.html import check_writable

                check_writable(args.html)
            except ImportError as exc:
                raise _Fail(f"cannot make the HTML report: {exc}") from None
            except OSError as exc:
                raise _Fail(
                    f"cannot write the HTML report to {args.html}: {exc.strerror or exc}"
                ) from None
        later = ["nastriage.diagnosis.run"]
        if out is not None:
            later.append("nastriage.views.json_out")
        if show_summary:
            # (srt: the summary's response-time tables, 1.4 ms of imports that were made
            # once the rules were done.)
            later += ["nastriage.views.verdicts", "nastriage.views.terminal", "nastriage.views.srt"]
        _preload(later)
        try:
            capture = Capture.analyze(
                paths,
                # Without a bar, a no-op callback still gives Python a chance to act on Ctrl-C
                # during a long analysis (the engine runs with the GIL released).
                progress=reporter if reporter is not None else _no_progress,
                progress_interval_bytes=reporter.interval if reporter is not None else 64 << 20,
                decode_as=args.decode_as,
                # Sequence-graph points are for the HTML report only: without it they are
                # not recorded (about a fifth of the pass and of its memory).
                segment_points=None if args.html is not None else 0,
                # Every request (the transactions table) only for the report too: the rules
                # read the engine's summaries (about a tenth of the pass).
                transactions=args.html is not None,
            )
        except _core.CaptureError as exc:
            raise _Fail(str(exc)) from None
        finally:
            if reporter is not None:
                reporter.close()
        findings = None
        texts = None
        if out is not None:
            from nastriage.views import json_out

            # The engine writes the conversations' JSON while the rules run.
            texts = json_out.start_texts(capture)
        if out is not None or show_summary:
            from nastriage.diagnosis.run import diagnose

            findings = diagnose(capture)
        if out is not None:
            json_out.write(capture, out, findings=findings, texts=texts)

    if args.html is not None:
        from nastriage.views.html import run_diagnosis, write_report

        html_findings, note = (findings, "") if findings is not None else run_diagnosis(capture)
        try:
            write_report(capture, args.html, findings=html_findings, diagnosis_note=note)
        except ImportError as exc:
            raise _Fail(f"cannot make the HTML report: {exc}") from None
        except OSError as exc:
            raise _Fail(
                f"cannot write the HTML report to {args.html}: {exc.strerror or exc}"
            ) from None

    if show_summary:
        from nastriage.views.terminal import print_summary
        from nastriage.views.verdicts import print_verdicts

        if findings is not None:
            print_verdicts(findings)
        print_summary(capture, top=args.top)
    elif not args.quiet:
        for warning in capture.warnings:
            _warn(warning)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nastriage`` script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_usage(sys.stderr)
            _error("no command given (try 'nastriage analyze FILE')")
            return EXIT_INPUT
        status: int = args.func(args)
        return status
    except _Fail as exc:
        _error(str(exc))
        return exc.status
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. '| head'): stop quietly, and keep Python from
        # complaining when it flushes stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_BROKEN_PIPE
    except SystemExit:
        raise
    except BaseException as exc:  # includes pyo3's PanicException (a BaseException)
        if os.environ.get("NASTRIAGE_DEBUG"):
            raise
        _error(
            f"internal error: {type(exc).__name__}: {exc} "
            "(this is a bug; rerun with NASTRIAGE_DEBUG=1 for details and please report it)"
        )
        return EXIT_INTERNAL


def run() -> NoReturn:
    """The ``nastriage`` command: :func:`main`, then exit without tearing the interpreter
    down. Every output is written and closed by then; freeing the analysis and the
    interpreter's objects would only add tens of milliseconds to every run."""
    status = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away after the last write
        status = status or EXIT_BROKEN_PIPE
    except (OSError, ValueError):  # a closed or failing stream: nothing more to say
        pass
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
