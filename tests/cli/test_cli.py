"""The command line's help (pipeline/cli/command.py): every argument explained, every default shown.

A new user had to find the p-value default (1e-4) by experiment, and positional arguments (ingest's FASTA and
STORE, export's HITS ...) had no text at all.
"""
from __future__ import annotations

import argparse

import pytest

from pipeline.cli.command import main
from pipeline.cli.args import build_parser


def _subparsers():
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _arguments(parser):
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


@pytest.mark.parametrize("cmd", sorted(_subparsers()))
def test_every_argument_has_help_and_default(cmd, capsys):
    parser = _subparsers()[cmd]
    args = _arguments(parser)
    if cmd == "bench":                       # its own parser: pipeline/cli/bench.py
        with pytest.raises(SystemExit) as e:
            main(["bench", "-h"])
        assert e.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "(default: 0.0001)" in text and "(default: JASPAR2024:CORE:vertebrates)" in text
        return
    assert args
    for a in args:
        assert a.help and a.help.strip(), f"motifgrid {cmd}: {a.option_strings or a.dest} has no help text"
    with pytest.raises(SystemExit) as e:
        main([cmd, "-h"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())           # the help as one line (argparse wraps it)
    for a in args:
        if a.default not in (None, False, argparse.SUPPRESS) and a.option_strings:
            shown = "default" in a.help or f"(default: {a.default})" in text
            assert shown, f"motifgrid {cmd} {a.option_strings[0]}: default {a.default!r} not shown"


def test_scan_help_shows_the_pvalue_default(capsys):
    with pytest.raises(SystemExit):
        main(["scan", "-h"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.0001)" in text and "(default: 0.1)" in text          # --pvalue, --pseudocount
    assert "--motif ID_OR_NAME" in text and "--motif-format FORMAT" in text and "--overwrite" in text
    assert "STORE|FASTA genome store (motifgrid ingest), or a FASTA" in text and "--regions BED" in text


def test_every_subcommand_has_its_command():
    """The parser's table and the commands' table name the same subcommands (``bench`` is dispatched by ``main``
    before parsing), in the order ``motifgrid -h`` lists them."""
    from pipeline.cli.command import COMMANDS
    from pipeline.cli.args import SUBCOMMANDS

    assert set(SUBCOMMANDS) == set(COMMANDS) | {"bench"}
    assert list(_subparsers()) == list(SUBCOMMANDS)


def test_thresholds_beside_the_planning_only_for_an_in_process_cluster(monkeypatch):
    """The thresholds take this machine's cores beside the planning where the cluster will be threads of this
    process; never beside worker processes starting (GPU, --processes) or for a remote scheduler."""
    import workers.backend
    from pipeline.cli import local as cli
    from pipeline.engine.cluster import cpu_count

    kw = dict(scheduler=None, device="cpu", processes=False)
    assert cli.threshold_threads_for(kw) == cpu_count() >= 1
    assert cli.threshold_threads_for({**kw, "processes": True}) == 0
    assert cli.threshold_threads_for({**kw, "scheduler": "tcp://10.0.0.1:8786"}) == 0
    assert cli.threshold_threads_for({**kw, "device": "gpu"}) == 0
    monkeypatch.setattr(workers.backend, "gpu_available", lambda: False)
    assert cli.threshold_threads_for({**kw, "device": None}) == cpu_count()
    monkeypatch.setattr(workers.backend, "gpu_available", lambda: True)
    assert cli.threshold_threads_for({**kw, "device": None}) == 0
