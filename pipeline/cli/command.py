"""``motifgrid`` command line.

Every user error (bad file, bad argument, refused output) ends with one line on stderr and exit
status 2; nothing that looks finished is left behind.
"""
from __future__ import annotations

import os
import sys

from pipeline import MotifgridError
from pipeline.cli.analysis_verbs import cmd_compare, cmd_composition, cmd_discover, cmd_enrich, cmd_variants
from pipeline.cli.args import EXIT_USAGE, HelpFormatter, UserError, build_parser
from pipeline.cli.demo import cmd_demo
from pipeline.cli.scan_verbs import cmd_export, cmd_ingest, cmd_scan, cmd_summary, cmd_thresholds


# ------------------------------------------------------------------------------------ commands


def _one_line_warnings(cmd: str) -> None:
    """Warnings meant for the user (a class with ``one_line``, e.g. identification's small target set) print as
    ``motifgrid CMD: warning: ...``, without Python's source line; any other keeps Python's format."""
    import warnings  # noqa: PLC0415

    plain = warnings.formatwarning

    def fmt(message, category, filename, lineno, line=None):
        if getattr(category, "one_line", False):
            return f"motifgrid {cmd}: warning: {message}\n"
        return plain(message, category, filename, lineno, line)

    warnings.formatwarning = fmt


def _message(e: Exception, a) -> str:
    """The error's line, its advice for Python callers (``format=`` of read_motifs) replaced by this command's
    flag (``--motif-format``), or dropped where the command has none."""
    if getattr(e, "hint", None) and hasattr(e, "with_hint"):
        return e.with_hint("or pass --motif-format FORMAT" if hasattr(a, "motif_format") else None)
    return str(e)


#: what an interrupted command leaves, for the commands that can go on from it
_AFTER_INTERRUPT = {"scan": "; finished blocks are kept (rerun with --resume)",
                    "composition": "; finished blocks are kept (rerun with --resume)",
                    "demo": "; finished blocks are kept (run the demo again to finish)"}

def _after_interrupt(a) -> str:
    """:data:`_AFTER_INTERRUPT` for the command, where its output folder holds a run to go on from (a scan stopped
    while it read its inputs has none)."""
    from pipeline.io import storage  # noqa: PLC0415

    out = getattr(a, "out", None)
    if out and not storage.is_url(str(out)) and not os.path.exists(os.path.join(str(out), "_run.json")):
        return ""
    return _AFTER_INTERRUPT.get(a.cmd, "")


COMMANDS = {"ingest": cmd_ingest, "scan": cmd_scan, "thresholds": cmd_thresholds, "compare": cmd_compare,
            "discover": cmd_discover, "composition": cmd_composition, "export": cmd_export, "demo": cmd_demo,
            "summary": cmd_summary, "enrich": cmd_enrich, "variants": cmd_variants}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:                      # its own option parser (pipeline/cli/bench.py)
        from pipeline.cli.bench import main as bench_main  # noqa: PLC0415

        return bench_main(argv[1:], formatter_class=HelpFormatter)
    parser = build_parser()
    a = parser.parse_args(argv)
    _one_line_warnings(a.cmd)          # warnings meant for the user, of every command: one line each
    try:
        return COMMANDS[a.cmd](a) or 0
    except (MotifgridError, UserError) as e:
        print(f"motifgrid {a.cmd}: error: {_message(e, a)}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as e:
        print(f"motifgrid {a.cmd}: error: {e.filename}: no such file or directory", file=sys.stderr)
        return EXIT_USAGE
    except PermissionError as e:
        print(f"motifgrid {a.cmd}: error: {e.filename}: permission denied", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"motifgrid {a.cmd}: error: {e.strerror or e} {('(' + str(e.filename) + ')') if e.filename else ''}",
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"motifgrid {a.cmd}: interrupted{_after_interrupt(a)}", file=sys.stderr)
        return 130


def _terminate_as_interrupt() -> None:
    """SIGTERM (``kill``, Slurm's ``scancel`` and time limit, a container's stop) stops a command as Ctrl-C does:
    its one "interrupted" line, finished blocks kept for ``--resume``, temporary folders removed (a FASTA's
    store being ingested was left behind); a second SIGTERM ends it at once."""
    import signal  # noqa: PLC0415

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def entry() -> None:
    """The console script: ``main``, then a quick exit.

    Tearing down the interpreter (every module of dask, distributed, numba, pyarrow, zarr) takes ~0.6 s
    after a scan has finished and reported.  The exit handlers still run (they close clusters and
    temporary folders, flush logs); then the standard streams are flushed and the process ends with
    ``os._exit``, skipping only the module teardown.  Every output file is closed (and renamed into
    place) by then.  ``MOTIFGRID_SLOW_EXIT=1`` keeps the normal exit (debugging, leak checkers).
    The garbage collector's thresholds are raised first (:func:`workers.backend.set_gc_threshold`), and numba's
    BLAS probe is kept from importing scipy.linalg (:func:`workers.backend.skip_numba_blas_probe`).
    """
    from workers.backend import set_gc_threshold, skip_numba_blas_probe  # noqa: PLC0415

    from workers.trace import mark  # noqa: PLC0415

    mark("entry")                    # interpreter and this module's imports done (MOTIFGRID_TRACE)
    skip_numba_blas_probe()
    _terminate_as_interrupt()
    try:
        set_gc_threshold()           # before the commands' imports (motifgrid.cluster.gc-threshold)
    except ValueError as e:
        print(f"motifgrid: error: {e}", file=sys.stderr)
        os._exit(EXIT_USAGE)
    rc = main()
    if os.environ.get("MOTIFGRID_SLOW_EXIT"):
        sys.exit(rc)
    import atexit  # noqa: PLC0415

    atexit._run_exitfuncs()
    mark("exit")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # a closed pipe: nothing more can be said
            pass
    os._exit(rc if isinstance(rc, int) else 1)


if __name__ == "__main__":
    entry()
