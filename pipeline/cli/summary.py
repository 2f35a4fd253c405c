"""What a motifgrid output folder holds: one summary for any of them (``motifgrid summary PATH``).

The five outputs are told apart by the files they write (``docs/formats.md``):

============  ===========================================  ==========================================
kind          recognised by                                finished when
============  ===========================================  ==========================================
scan          ``_run.json`` with ``hits_format``           ``_summary.json`` exists
composition   ``_run.json`` with ``composition_format``    ``_summary.json`` exists
compare       ``_run.json`` with ``motifs_a``              ``_summary.json`` exists
enrich        ``_run.json`` with ``enrich_format``         ``_summary.json`` exists
discover      ``summary.json`` / ``motifs.meme``, ...      ``summary.json`` exists (written last)
============  ===========================================  ==========================================

:func:`summarize` returns a plain, JSON-serialisable dict (the CLI formats it, ``--json`` prints it):
``kind``, ``path``, ``finished``, ``parameters``, ``command``, ``progress`` (units done / total),
``totals``, ``seconds``, ``next`` (what to do with an unfinished run) and per kind the top rows: motifs by
hits and hits per contig (scan; and ``qvalues``: hits at the level, ``--max-qvalue``, tests), tests by matches
(composition), most similar pairs (compare --method occurrence) or the queries' best matches, most significant first
(compare, tomtom), the motifs found (discover), the most enriched motifs (enrich). Nothing is written or removed: a
run still going on is read as it stands.
:func:`summary_lines` writes it as text (``motifgrid summary``).
"""
from __future__ import annotations

import json
import os

import numpy as np

from pipeline import MotifgridError
from pipeline.engine.dataset import iter_manifest
from pipeline.io import storage
from pipeline.io.arrow import by_descending

KINDS = ("scan", "composition", "compare", "discover", "enrich")
_DISCOVER_FILES = ("summary.json", "summary.tsv", "sites.parquet", "motifs.meme", "motifs.jaspar")


class SummaryError(MotifgridError, ValueError):
    """A path that is not a readable motifgrid output; ``str(e)`` is one line for the user."""


# ------------------------------------------------------------------------------------ scan motif summary
def top_motifs(out: str, n: int = 10) -> list[dict]:
    """The ``n`` motifs with the most hits of a finished scan (rows of ``_motif_summary.parquet`` as dicts)."""
    from pipeline.scan.read import rank_motifs  # noqa: PLC0415

    t = storage.read_parquet(storage.join(out, "_motif_summary.parquet"))
    return rank_motifs(t).slice(0, n).to_pylist()


# ------------------------------------------------------------------------------------ reading
def _json(path: str) -> dict | None:
    if not storage.exists(path):
        return None
    try:
        return json.loads(storage.read_bytes(path))
    except ValueError:
        raise SummaryError(f"{path}: unreadable JSON (not written by motifgrid, or damaged)") from None


def kind_of(path: str) -> str:
    """``scan``, ``composition``, ``compare``, ``enrich``, ``variants`` or ``discover``; a :class:`SummaryError` for
    anything else."""
    if not storage.exists(path):
        raise SummaryError(f"{path}: no such file or directory")
    if not storage.isdir(path):
        raise SummaryError(f"{path}: is a file; give a motifgrid output folder (a scan's --out, ...)")
    run = _json(storage.join(path, "_run.json"))
    if run is not None:
        for key, kind in (("hits_format", "scan"), ("composition_format", "composition"), ("motifs_a", "compare"),
                          ("enrich_format", "enrich"), ("vcf_checksum", "variants")):
            if key in run:
                return kind
        raise SummaryError(f"{path}/_run.json: not a motifgrid scan, composition, compare, enrich or variants run")
    names = set(storage.listdir(path))
    if names & set(_DISCOVER_FILES):
        return "discover"
    raise SummaryError(f"{path}: not a motifgrid output (no _run.json, no summary.json)")


def _data_files(path: str):
    """The data files of a dataset (``chrom/<record>/part-*.parquet``, ``packed/part-*.parquet``)."""
    folders = [storage.join(path, "packed")]
    if storage.exists(storage.join(path, "chrom")):
        folders += [storage.join(path, "chrom", d) for d in sorted(storage.listdir(storage.join(path, "chrom")))]
    for d in folders:
        if storage.exists(d):
            for f in sorted(storage.listdir(d)):
                if f.startswith("part-") and f.endswith(".parquet"):
                    yield storage.join(d, f)


def _first_part(path: str) -> str | None:
    """One data file of a dataset, or None."""
    return next(iter(_data_files(path)), None)


def _provenance(path: str) -> dict:
    """Key-value metadata of one data file (command, genome path, ...), {} when none is written yet."""
    part = _first_part(path)
    if part is None:
        return {}
    meta = storage.read_parquet_schema(part).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}


def _top_counts(counts: dict, n: int) -> list[dict]:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"chrom": c, "hits": int(h)} for c, h in ranked[:n]]


def _resume_hint(command: str | None, kind: str) -> str:
    if command and command.split()[1:2] == [kind]:
        return command if " --resume " in f"{command} " else f"{command} --resume"
    if command:                      # `motifgrid demo` resumes by itself
        return command
    return f"rerun the same motifgrid {kind} command with --resume"


def _blocks_total(genome_path: str | None, checksum: str | None, task_positions: int | None = None,
                  regions: str | None = None):
    """Blocks (or composition tasks, with ``task_positions``) of the genome store the run reads, or those holding
    a window of its BED ``regions``; None when the store is not known (no data file written yet) or no longer the
    one the run started on, or the BED file is gone."""
    if not genome_path or not storage.exists(genome_path):
        return None
    from pipeline.io.genome import GenomeStore  # noqa: PLC0415

    try:
        store = GenomeStore(genome_path)
    except MotifgridError:
        return None
    if checksum and store.checksum != checksum:
        return None
    if regions is not None:
        from pipeline.io.regions import read_bed  # noqa: PLC0415

        try:
            return len({p.block for p in read_bed(regions, store.records).pieces(store.block_size)})
        except (MotifgridError, OSError):
            return None
    if task_positions is None:
        return len(store.blocks())
    from pipeline.composition.run import task_groups  # noqa: PLC0415

    return len(task_groups(store, int(task_positions)))


# ------------------------------------------------------------------------------------ scan
def _scan(path: str, top: int, contigs: int) -> dict:
    run = _json(storage.join(path, "_run.json"))
    done = _json(storage.join(path, "_summary.json"))
    prov = _provenance(path)
    n_done = hits = 0
    files = []                  # the finished blocks' files: a killed writer's file has no manifest entry
    for e in iter_manifest(path, "block"):
        n_done += 1
        hits += e["hits"]
        if e.get("file"):
            files.append(storage.join(path, e["file"]))
    # (a scan of BED regions counts a hit in every region holding it: its region counts overcount per contig)
    per_chrom = _rows_per_chrom(path, done if not run.get("regions") else None, files)
    genome = prov.get("genome.path")
    total = done["blocks"] if done else _blocks_total(genome, run.get("genome_checksum"), regions=run.get("regions"))
    out = {
        "parameters": {"genome": genome, "genome_checksum": run.get("genome_checksum"),
                       "motifs": run.get("motifs_source"), "motif_count": run.get("motifs"),
                       "pvalue": run.get("pvalue"), "background": run.get("background_spec"),
                       "pseudocount": run.get("pseudocount"), "block_size": run.get("block_size"),
                       "halo": run.get("halo"), "strands": run.get("strands"),
                       "max_qvalue": ((done or {}).get("qvalues") or {}).get("max_qvalue"),
                       "device": (done or {}).get("device") or prov.get("device")},
        "command": prov.get("motifgrid.command"),
        "progress": {"unit": "blocks", "done": done["blocks"] if done else n_done, "total": total},
        "totals": {"hits": done["hits"] if done else hits, "contigs_with_hits": sum(1 for v in per_chrom.values() if v)},
        "seconds": (done or {}).get("seconds"),
        "contigs": _top_counts(per_chrom, contigs),
        "top_motifs": [], "thresholds": None,
    }
    if done:
        out["top_motifs"] = top_motifs(path, top)
        out["thresholds"] = _scan_thresholds(path, done)
        q = done.get("qvalues")
        out["qvalues"] = None if not q else {k: q.get(k) for k in ("level", "hits_at_level", "max_qvalue", "tests")}
    return out


def _scan_thresholds(path: str, done: dict) -> dict:
    t = storage.read_parquet(storage.join(path, "_thresholds.parquet"),
                             columns=["motif_id", "strand", "threshold", "reachable"])
    reach = np.asarray(t.column("reachable").to_pylist(), bool)
    thr = np.asarray(t.column("threshold").to_pylist(), float)[reach]
    return {"rows": t.num_rows, "unreachable_rows": int((~reach).sum()),
            "unreachable_motifs": list(done.get("unreachable_motifs", [])),
            "score_min": float(thr.min()) if thr.size else None, "score_max": float(thr.max()) if thr.size else None}


# ------------------------------------------------------------------------------------ composition
def _num_rows(path: str) -> int:
    """Rows of one Parquet file, from its footer."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    fs, p = storage.arrow_source(path)
    if fs is None:
        return pq.ParquetFile(p).metadata.num_rows
    with fs.open(p, "rb") as f:
        return pq.ParquetFile(f).metadata.num_rows


def _rows_per_chrom(path: str, done=None, files=None) -> dict:
    """Hits (matches) per record: a finished scan's ``_region_counts.parquet``, else the ``chrom`` column of
    ``files`` (default: every data file; dictionary-encoded: little to read)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    rc = storage.join(path, "_region_counts.parquet")
    if done and storage.exists(rc):
        t = storage.read_parquet(rc, columns=["chrom", "hits"]).group_by("chrom").aggregate([("hits", "sum")])
        return dict(zip(t.column("chrom").to_pylist(), t.column("hits_sum").to_pylist()))
    counts: dict = {}
    for f in _data_files(path) if files is None else files:
        vc = pc.value_counts(storage.read_parquet(f, columns=["chrom"]).column("chrom").combine_chunks().dictionary_decode())
        for v in vc.to_pylist():
            counts[v["values"]] = counts.get(v["values"], 0) + v["counts"]
    return counts


def _composition(path: str, top: int, contigs: int) -> dict:
    run = _json(storage.join(path, "_run.json"))
    done = _json(storage.join(path, "_summary.json"))
    prov = _provenance(path)
    entries = list(iter_manifest(path, "task"))
    ref = storage.join(path, "_reference.zarr")
    genome = ref if storage.exists(ref) else prov.get("genome.path") or (done or {}).get("genome")
    total = done["tasks"] if done else _blocks_total(genome, run.get("genome_checksum"), run.get("task_positions"))
    out = {
        "parameters": {"tests": run.get("tests_source"), "test_count": run.get("tests"), "genome": genome,
                       "genome_checksum": run.get("genome_checksum"), "min_similarity": run.get("min_similarity"),
                       "both_strands": run.get("both_strands"), "counts_only": run.get("counts_only"),
                       "device": (done or {}).get("device") or prov.get("device")},
        "command": prov.get("motifgrid.command") or (done or {}).get("command"),
        "progress": {"unit": "tasks", "done": done["tasks"] if done else len(entries), "total": total},
        "totals": {"matches": done["matches"] if done else int(sum(e["hits"] for e in entries))},
        "seconds": (done or {}).get("seconds"),
        "contigs": _top_counts(_rows_per_chrom(path), contigs),
        "top_tests": [],
    }
    if done:
        out["totals"]["tests_with_matches"] = done.get("tests_with_matches")
        t = storage.read_parquet(storage.join(path, "_test_summary.parquet"))
        out["top_tests"] = t.take(by_descending(t, "matches")).slice(0, top).to_pylist()
    return out


# ------------------------------------------------------------------------------------ compare, discover
def _compare(path: str, top: int) -> dict:
    run = _json(storage.join(path, "_run.json"))
    done = _json(storage.join(path, "_summary.json"))
    if run.get("method") == "tomtom":
        return _compare_tomtom(path, top, run, done)
    parts = [f for f in storage.listdir(storage.join(path, "pairs")) if f.endswith(".parquet") and f[0] != "."]
    out = {
        "parameters": {"motifs_a": run.get("motifs_a"), "motifs_b": run.get("motifs_b"), "pvalue": run.get("pvalue"),
                       "background": run.get("background_spec"), "pseudocount": run.get("pseudocount"),
                       "cells": run.get("cells"), "device": run.get("device")},
        "command": run.get("command"),
        "progress": {"unit": "tasks", "done": done["tasks"] if done else len(parts),
                     "total": done["tasks"] if done else None},
        "totals": {k: done.get(k) for k in ("pairs", "combos", "motifs_a", "motifs_b", "clusters")} if done else {},
        "seconds": (done or {}).get("seconds"),
        "top_pairs": [],
    }
    if done and parts:
        from pipeline.compare.run import read_pairs  # noqa: PLC0415

        t = read_pairs(path, ["motif_a", "name_a", "motif_b", "name_b", "similarity", "shift", "strand", "overlap"])
        out["top_pairs"] = t.take(by_descending(t, "similarity")).slice(0, top).to_pylist()
    return out


def _compare_tomtom(path: str, top: int, run: dict, done: dict | None) -> dict:
    """A ``compare --method tomtom`` folder: its best matches are written at the end, all at once."""
    out = {
        "parameters": {k: run.get(k) for k in ("motifs_a", "motifs_b", "method", "distance", "top", "min_overlap",
                                               "pseudocount", "cluster", "device")}
        | {"background": run.get("background_spec")},
        "command": run.get("command"),
        "progress": {"unit": "tasks", "done": done["tasks"] if done else 0, "total": done["tasks"] if done else None},
        "totals": {k: done.get(k) for k in ("queries", "targets", "pairs", "clusters")} if done else {},
        "seconds": (done or {}).get("seconds"),
        "top_matches": [],
    }
    f = storage.join(path, "best_matches.parquet")
    if done and storage.exists(f):
        import pyarrow.compute as pc  # noqa: PLC0415

        t = storage.read_parquet(f)
        t = t.filter(pc.equal(t["rank"], 1))
        order = pc.sort_indices(t, sort_keys=[("pvalue", "ascending")])
        out["top_matches"] = t.take(order).slice(0, top).to_pylist()
    return out


def _discover(path: str, top: int) -> dict:
    s = _json(storage.join(path, "summary.json"))
    if s is None:
        return {"parameters": {}, "command": None, "progress": {"unit": "motifs", "done": 0, "total": None},
                "totals": {}, "seconds": None, "motifs": [],
                "files": [f for f in _DISCOVER_FILES if storage.exists(storage.join(path, f))]}
    st = s.get("settings", {})
    motifs = [{k: m.get(k) for k in ("id", "consensus", "sites", "information_content_bits", "loglik_bits", "found_by")}
              | {"best_match": m.get("best_match")} for m in s.get("motifs", [])]
    return {
        "parameters": {"sequences": s.get("sequences"), "n_sequences": s.get("n_sequences"),
                       "total_length": s.get("total_length"), "width": st.get("width"),
                       "algorithm": st.get("algorithm"), "model": st.get("model"),
                       "both_strands": st.get("both_strands"), "mutations": st.get("mutations"),
                       "seed": st.get("seed"), "compare_to": s.get("compare_to"), "device": s.get("device")},
        "command": s.get("command"),
        "progress": {"unit": "motifs", "done": len(motifs), "total": st.get("motifs")},
        "totals": {"motifs": len(motifs), "sites": int(sum(m["sites"] or 0 for m in motifs))},
        "seconds": s.get("seconds"),
        "motifs": motifs[:top] if top else motifs,
        "files": s.get("files", []),
    }


def _enrich(path: str, top: int) -> dict:
    """A ``motifgrid enrich`` folder: its table is written at the end, all at once."""
    run = _json(storage.join(path, "_run.json"))
    done = _json(storage.join(path, "_summary.json"))
    st = run.get("settings", {})
    out = {
        "parameters": {"sequences": run.get("sequences"), "genome": run.get("genome"),
                       "control": (run.get("control") or {}).get("kind"), "shuffles": st.get("shuffles"),
                       "seed": st.get("seed"), "motifs": run.get("motifs"), "pvalue": st.get("pvalue"),
                       "cluster": st.get("cluster"), "centrality": st.get("centrality"),
                       "device": (done or {}).get("device")},
        "command": run.get("command"),
        "progress": {"unit": "steps", "done": 1 if done else 0, "total": 1},
        "totals": ({"targets": done["targets"], "controls": done["controls"], "motifs": done["motifs"],
                    "enriched_q<=0.05": done["significant"]["qvalue_0.05"], "clusters": done.get("clusters")}
                   if done else {}),
        "seconds": (done or {}).get("seconds"),
        "top_enriched": [],
    }
    f = storage.join(path, "enrichment.parquet")
    if done and storage.exists(f):
        cols = ["rank", "motif_id", "motif_name", "cluster", "pos_seqs", "pos_total", "neg_seqs", "neg_total",
                "odds_ratio", "log10_pvalue", "evalue", "qvalue"]
        have = storage.read_parquet_schema(f).names
        cols += [c for c in ("log10_evalue", "log10_qvalue") if c in have]       # (older runs: without)
        out["top_enriched"] = storage.read_parquet(f, columns=cols).slice(0, top).to_pylist()
    return out


def _variants(path: str, top: int) -> dict:
    """A ``motifgrid variants`` folder: chunks done from the manifest; the strongest changes once finished."""
    from pipeline.engine.dataset import iter_manifest  # noqa: PLC0415

    run = _json(storage.join(path, "_run.json"))
    done = _json(storage.join(path, "_summary.json"))
    staged = _json(storage.join(path, "_alleles", "_staged.json")) or {}
    entries = list(iter_manifest(path, "chunk"))
    out = {
        "parameters": {"vcf": run.get("vcf"), "motifs": run.get("motifs_source"), "pvalue": run.get("pvalue"),
                       "report": "all" if run.get("report_all") else "sites", "device": (done or {}).get("device")},
        "command": _provenance(path).get("motifgrid.command"),
        "progress": {"unit": "chunks", "done": len(entries), "total": len(staged.get("chunks", [])) or None},
        "totals": ({"alleles": done["alleles"], "rows": done["rows"], **{k: v for k, v in done["calls"].items()
                                                                       if k != "none" or v}}
                   if done else {"alleles scored": sum(e["alleles"] for e in entries),
                                 "rows": sum(e["rows"] for e in entries)}),
        "seconds": (done or {}).get("seconds"),
        "top_changes": [],
    }
    if done and top:
        from pipeline.variants.outputs import read_variants  # noqa: PLC0415

        t = read_variants(path, columns=["chrom", "pos", "id", "ref", "alt", "motif_id", "motif_name", "call",
                                         "log10_ratio", "qvalue"]).to_pylist()
        t = [r for r in t if r["call"] in ("gain", "loss")]
        out["top_changes"] = sorted(t, key=lambda r: -abs(r["log10_ratio"]))[:top]
    return out


# ------------------------------------------------------------------------------------ entry point
def summarize(path: str, top: int = 10, contigs: int = 5) -> dict:
    """The summary of the motifgrid output at ``path`` (see the module docstring for the keys).

    ``top``: motifs (tests, pairs, discovered motifs) listed; ``contigs``: contigs listed by hits."""
    path = path.rstrip("/") if storage.is_url(path) else os.path.abspath(path)
    kind = kind_of(path)
    if kind == "scan":
        s = _scan(path, top, contigs)
    elif kind == "composition":
        s = _composition(path, top, contigs)
    elif kind == "compare":
        s = _compare(path, top)
    elif kind == "enrich":
        s = _enrich(path, top)
    elif kind == "variants":
        s = _variants(path, top)
    else:
        s = _discover(path, top)
    finished = storage.exists(storage.join(path, "summary.json" if kind == "discover" else "_summary.json"))
    nxt = None
    if not finished:
        nxt = (f"unfinished; complete it with: {_resume_hint(s['command'], kind)}"
               if kind in ("scan", "composition", "variants")
               else f"unfinished (interrupted); motifgrid {kind} does not resume: rerun it into a new folder")
    return {"kind": kind, "path": path, "finished": finished, "next": nxt} | s


# ------------------------------------------------------------------------------------ as text
def top_motif_lines(rows: list, out: str) -> list:
    """The motifs with the most hits, one line each (the end of a scan, the demo, ``motifgrid summary``)."""
    if not rows:
        return []
    w = max(len(f"{r['motif_name']} ({r['motif_id']})") for r in rows)
    lines = [f"motifs with the most hits (all of them: {out}/_motif_summary.tsv):"]
    for r in rows:
        label = f"{r['motif_name']} ({r['motif_id']})"
        lines.append(f"  {label:<{w}}  {r['hits']:>11,} hits  (+ {r['hits_plus']:,} / - {r['hits_minus']:,})")
    return lines


def _fmt(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def summary_lines(s: dict) -> list:
    """``motifgrid summary`` as text: what, where, with which parameters, how far, then the kind's top rows."""
    p, prog, tot = s["parameters"], s["progress"], s["totals"]
    lines = [f"{s['kind']}: {s['path']} ({'finished' if s['finished'] else 'UNFINISHED'})"]
    lines += [f"  {k.replace('_', ' ')}: {_fmt(v)}" for k, v in p.items() if v is not None and v != ""]
    if s["command"]:
        lines.append(f"  command: {s['command']}")
    total = "?" if prog["total"] is None else _fmt(prog["total"])
    lines.append(f"  {prog['unit']} done: {_fmt(prog['done'])} of {total}")
    if s["next"]:
        lines.append(f"  {s['next']}")
    if tot:
        took = f" in {s['seconds']:.1f} s" if s.get("seconds") is not None else ""
        lines.append("  " + ", ".join(f"{_fmt(v)} {k.replace('_', ' ')}" for k, v in tot.items() if v is not None)
                     + took)
    return lines + _summary_rows(s)


def _summary_rows(s: dict) -> list:
    kind, lines = s["kind"], []
    thr = s.get("thresholds")
    if thr:
        un = thr["unreachable_motifs"]
        rng = ("" if thr["score_min"] is None else
               f", threshold scores {thr['score_min']:.2f} to {thr['score_max']:.2f} bits")
        lines.append(f"  thresholds: {thr['rows']:,} motif x strand rows{rng}; {len(un)} motif(s) cannot reach the p-value on some strand"
                     + (": " + ", ".join(un[:10]) + (" ..." if len(un) > 10 else "") if un else ""))
    q = s.get("qvalues")
    if kind == "scan" and q:
        kept = (f"; --max-qvalue {q['max_qvalue']:g}: reads and exports keep those {q['hits_at_level']:,}"
                if q.get("max_qvalue") is not None else "")
        lines.append(f"  q-values: {q['hits_at_level']:,} of {s['totals']['hits']:,} hits have q <= {q['level']:g} "
                     f"(Benjamini-Hochberg per motif over {q['tests']:,} tests){kept}")
    if kind == "scan":
        lines += ["  " + x for x in top_motif_lines(s["top_motifs"], s["path"])]
    if s.get("contigs"):
        more = " ..." if len(s["contigs"]) < s["totals"].get("contigs_with_hits", 0) else ""
        lines.append(f"  {'hits' if kind == 'scan' else 'matches'} per contig (most first): "
                     + ", ".join(f"{c['chrom']} {c['hits']:,}" for c in s["contigs"]) + more)
    for t in s.get("top_tests", []):
        lines.append(f"  test {t['test_id']} ({t['length']} nt): {t['matches']:,} matches")
    for r in s.get("top_pairs", []):
        lines.append(f"  {r['motif_a']} {r['name_a']} ~ {r['motif_b']} {r['name_b']}: similarity "
                     f"{r['similarity']:.3f} (shift {r['shift']}, strand {r['strand']}, {r['overlap']} columns)")
    for r in s.get("top_matches", []):
        lines.append(f"  {r['query']} {r['query_name']} → {r['target']} {r['target_name']}: p={r['pvalue']:.3g} "
                     f"E={r['evalue']:.3g} (offset {r['offset']}, strand {r['strand']}, {r['overlap']} columns)")
    from pipeline.enrich.report import sci  # noqa: PLC0415

    for r in s.get("top_enriched", []):
        cl = "" if r["cluster"] is None else f", cluster {r['cluster']}"
        lines.append(f"  {r['rank']}. {r['motif_name']} ({r['motif_id']}): {r['pos_seqs']:,}/{r['pos_total']:,} targets, "
                     f"{r['neg_seqs']:,}/{r['neg_total']:,} controls, p={sci(r['log10_pvalue'])} "
                     f"E={_logged(r, 'evalue', sci)} q={_logged(r, 'qvalue', sci)}{cl}")
    for r in s.get("top_changes", []):
        lines.append(f"  {r['chrom']}:{r['pos']} {r['id']} {r['ref']}>{r['alt']} {r['call']} of {r['motif_name']} "
                     f"({r['motif_id']}): log10(p_ref/p_alt) {r['log10_ratio']:.2f}, q={r['qvalue']:.3g}")
    for m in s.get("motifs", []):
        bm = m.get("best_match")
        how = (f"E={bm['evalue']:.2g}" if "evalue" in bm else f"similarity {bm.get('score', 0):.2f}") if bm else ""
        match = f", best match {bm['id']} {bm['name']} ({how})" if bm else ""
        lines.append(f"  {m['id']} {m['consensus']}: {m['sites']} sites, {m['information_content_bits']:.1f} bits"
                     f"{match}")
    if s.get("files") and not s["finished"]:
        lines.append("  files present: " + ", ".join(s["files"]))
    return lines


def _logged(row: dict, name: str, sci) -> str:
    """E or q of an enrichment row, from its log10 column (exact where the float underflowed to 0), as p is."""
    lg = row.get(f"log10_{name}")
    return sci(lg) if lg is not None else f"{row[name]:.3g}"
