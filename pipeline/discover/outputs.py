"""What discovery writes: ``motifs.meme``, ``motifs.jaspar``, ``sites.parquet``, ``summary.tsv`` and, last,
``summary.json``; the found motifs identified against a database (``--compare-to``)."""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pipeline import __version__
from pipeline.discover.inputs import DiscoverError, DiscoverSettings, SequenceSet
from pipeline.io import arrow


def _motif_records(found: list, seqs: SequenceSet) -> list:
    from pipeline.motifs import Motif  # noqa: PLC0415

    out = []
    for m in found:
        counts = np.asarray(m.counts, np.float64)
        if counts.sum() == 0:
            counts = counts + 0.25
        mat = counts.copy()
        mat.setflags(write=False)
        out.append(Motif(f"MOTIF_{m.index + 1}", m.consensus, mat, "counts", float(len(m.sites)), "discover",
                         m.index + 1))
    return out


def compare_motifs(motifs, database: str, client=None, *, device: str = "cpu", keep: int = 4) -> list:
    """Best match of each motif in ``database`` by Tomtom's statistic — what ``motifgrid compare MOTIFS
    DATABASE`` reports with its defaults (:func:`pipeline.compare.identify.run_identify`: Euclidean column distance,
    complete scores, both strands, pseudocount 0.1).

    ``motifs``: :class:`pipeline.motifs.Motif` records or a motif file.  Returns, per motif, ``{id, name,
    pvalue, evalue, qvalue, similarity, offset, strand, overlap, length, runners_up}`` (``runners_up``: the
    next ``keep - 1`` targets with their p- and E-values).
    """
    from pipeline.compare.identify import run_identify  # noqa: PLC0415
    from pipeline.motifs import read_motifs  # noqa: PLC0415

    qs = read_motifs(motifs) if isinstance(motifs, (str, os.PathLike)) else list(motifs)
    db = read_motifs(database)
    res = run_identify(qs, db, client, top=keep, device=device)
    length = {m.id: m.length for m in db}
    rows = res.table.to_pylist()
    k = len(rows) // len(qs)                          # every query's ranks 1..k, queries in input order
    out = []
    for i in range(len(qs)):
        mine = rows[i * k:(i + 1) * k]
        best = mine[0]
        out.append({"id": best["target"], "name": best["target_name"]}
                   | {k: best[k] for k in ("pvalue", "evalue", "qvalue", "similarity", "offset", "strand", "overlap")}
                   | {"length": length[best["target"]],
                      "runners_up": [{"id": r["target"], "name": r["target_name"], "pvalue": r["pvalue"],
                                      "evalue": r["evalue"]} for r in mine[1:]]})
    return out


def create_output(out: str) -> Path:
    """A new, empty output folder (created); one that holds anything is refused (nothing is overwritten)."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise DiscoverError(f"{out}: exists and is not a directory")
    if p.exists() and any(p.iterdir()):
        state = "a finished discovery" if (p / "summary.json").exists() else "files"
        raise DiscoverError(f"{out}: already holds {state}; choose another --out (nothing is overwritten)")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DiscoverError(f"{out}: cannot create the output folder ({e.strerror})") from None
    return p


def write_outputs(out: Path, seqs: SequenceSet, settings: DiscoverSettings, found: list, stats: dict,
                  started: float, device: str, compare_to: str | None = None, command: str | None = None,
                  client=None) -> dict:
    """Write the output files, ``summary.json`` last.  ``started``: the ``time.perf_counter()`` the run's time
    counts from; ``summary["seconds"]`` spans from it to ``summary.json`` being written (every other file
    written, ``--compare-to`` included); ``stats["seconds"]`` may hold the earlier phases (``run_discover``)."""
    import pyarrow as pa  # noqa: PLC0415

    from pipeline.motifs import format_jaspar, format_meme  # noqa: PLC0415
    from pipeline.engine.dataset import atomic_write_bytes as _atomic_write_bytes  # noqa: PLC0415
    from pipeline.io.storage import write_parquet  # noqa: PLC0415
    from pipeline.io.schema import SITES_FORMAT_VERSION, SITES_SCHEMA  # noqa: PLC0415

    bg = np.asarray(stats["background"])
    recs = _motif_records(found, seqs)
    strands = "+ -" if settings.both_strands else "+"
    written = []
    _atomic_write_bytes(str(out / "motifs.meme"), format_meme(recs, bg, strands).encode())
    written.append("motifs.meme")
    # best matches as `motifgrid compare motifs.meme DATABASE` reports them
    t_compare = time.perf_counter()
    matches = (compare_motifs(recs, compare_to, client, device=device)
               if compare_to and recs else [None] * len(recs))
    t_compare = time.perf_counter() - t_compare
    _atomic_write_bytes(str(out / "motifs.jaspar"), format_jaspar(recs).encode())
    written.append("motifs.jaspar")
    rows = {k: [] for k in ("motif_id", "sequence", "sequence_index", "start", "end", "strand", "score",
                            "mismatches", "site")}
    for rec, m in zip(recs, found):
        for i, p0, s0, sc, mm, site in m.sites:
            rows["motif_id"].append(rec.id)
            rows["sequence"].append(seqs.names[i])
            rows["sequence_index"].append(i)
            rows["start"].append(p0)
            rows["end"].append(p0 + settings.width)
            rows["strand"].append("+-"[s0])
            rows["score"].append(sc)
            rows["mismatches"].append(mm)
            rows["site"].append(site)
    table = pa.table({k: arrow.column(v, SITES_SCHEMA.field(k).type.value_type
                                      if pa.types.is_dictionary(SITES_SCHEMA.field(k).type) else SITES_SCHEMA.field(k).type)
                      for k, v in rows.items()})
    table = pa.table([table[k].dictionary_encode() if pa.types.is_dictionary(SITES_SCHEMA.field(k).type)
                      else table[k] for k in SITES_SCHEMA.names], schema=SITES_SCHEMA)
    meta = {"motifgrid.version": __version__, "motifgrid.sites_format": str(SITES_FORMAT_VERSION),
            "motifgrid.command": command or "", "sequences.path": os.path.abspath(seqs.source),
            "sequences.checksum": seqs.checksum, "settings": json.dumps(_settings_json(settings))}
    table = table.replace_schema_metadata(meta)
    write_parquet(table, str(out / "sites.parquet"), compression="zstd")
    written.append("sites.parquet")
    motifs_json = []
    for rec, m, match in zip(recs, found, matches):
        motifs_json.append({
            "id": rec.id, "consensus": m.consensus, "width": settings.width, "sites": len(m.sites),
            "loglik_bits": m.loglik, "zoops_fraction": m.gamma, "information_content_bits": m.information_content,
            "ld_count": m.ld_count, "ld_distance_sum": m.ld_distance, "found_by": m.origin,
            "best_match": match,
        })
    match_cols = ["id", "name", "pvalue", "evalue", "offset", "strand", "overlap"]
    tsv = ["\t".join(["id", "consensus", "sites", "loglik_bits", "information_content_bits", "ld_count",
                      "found_by"] + [f"best_match_{c}" for c in match_cols])]
    for mj in motifs_json:
        bm = mj["best_match"] or {}
        tsv.append("\t".join(str(x) for x in [
            mj["id"], mj["consensus"], mj["sites"], f"{mj['loglik_bits']:.3f}", f"{mj['information_content_bits']:.3f}",
            "" if mj["ld_count"] is None else mj["ld_count"], mj["found_by"]]
            + [(f"{bm[c]:.3g}" if c in ("pvalue", "evalue") else bm[c]) if bm else "" for c in match_cols]))
    _atomic_write_bytes(str(out / "summary.tsv"), ("\n".join(tsv) + "\n").encode())
    written.append("summary.tsv")
    seconds = dict(stats.get("seconds", {}))
    seconds["compare_to"] = t_compare
    seconds["total"] = time.perf_counter() - started
    seconds["write"] = seconds["total"] - sum(v for k, v in seconds.items() if k != "total")
    summary = {
        "motifgrid_version": __version__, "command": command, "sequences": os.path.abspath(seqs.source),
        "sequences_checksum": seqs.checksum, "n_sequences": seqs.T, "total_length": int(seqs.lengths.sum()),
        "settings": _settings_json(settings), "device": device, "seconds": seconds["total"], "seconds_by_phase": seconds,
        "background": stats["background"], "compare_to": compare_to, "motifs": motifs_json,
        "rounds": stats["rounds"], "files": written,
    }
    _atomic_write_bytes(str(out / "summary.json"), json.dumps(summary, indent=1).encode())
    return summary


def _settings_json(settings: DiscoverSettings) -> dict:
    d = asdict(settings)
    d.pop("device_chains", None)
    return d
