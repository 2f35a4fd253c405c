"""What one variants task does on a worker: its chunk of alleles (one record, sorted) read from the staged
``_alleles/`` part, the genome around them read once, both alleles' contexts scored by every motif row
(``workers.variants``), the best window of each motif on each allele with its exact p-value, the rows where either
allele reaches ``--pvalue`` (or every row), one Parquet file, a manifest entry."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline.engine.dataset import write_manifest_entry, write_part
from pipeline.io import arrow, storage
from pipeline.io.genome import GenomeStore
from pipeline.io.schema import VARIANTS_SCHEMA
from pipeline.variants.alleles import contexts, genome_starts
from workers.distribution import PvalueTable

COLUMNS = tuple(VARIANTS_SCHEMA.names)
CALLS = ("none", "gain", "loss", "both")
CALL_WORDS = pa.array(CALLS, pa.string())
STRANDS = pa.array(["+", "-"], pa.string())


@functools.lru_cache(maxsize=4)
def _words_of(words: tuple) -> pa.Array:
    return arrow.strings(words)


def _words(words: list) -> pa.Array:
    """The motif ids or names as one Arrow array (made once per worker), for ``take``."""
    return _words_of(tuple(words))


@dataclass
class VariantsContext:
    """What every task needs; scattered to each worker once."""
    store: GenomeStore
    out: str
    pwms: list              # (m, 4) float64 per row: each motif's + then - strand (one row where one strand is scanned)
    rows: object            # workers.variants.Rows of the pwms, with each row's threshold at --pvalue (alpha;
    row_motif: np.ndarray   # +inf: it cannot reach it)
    row_strand: np.ndarray
    pvalues: PvalueTable    # each row's tail table, down to motifgrid.variants.table-pvalue
    background: np.ndarray
    motif_ids: list
    motif_names: list
    flank: int              # the longest motif's length - 1
    report_all: bool
    metadata: dict
    device: str = "cpu"
    atsnp: list | None = None   # --atsnp: each motif's workers.variants.atsnp.MotifTails
    markov: dict | None = None


def variants_task(ctx: VariantsContext, chunk: str, record: str) -> dict:
    """Score the alleles of the staged part ``chunk`` (on ``record``), write their rows and the manifest entry."""
    t0 = time.perf_counter()
    al = storage.read_parquet(storage.join(ctx.out, "_alleles", f"part-{chunk}.parquet"))
    pos = al.column("pos").to_pylist()
    ref, alt = al.column("ref").to_pylist(), al.column("alt").to_pylist()
    rec = ctx.store.records
    length = int(rec.lengths[rec.index[record]])
    lo = max(min(pos) - 1 - ctx.flank, 0)
    hi = min(max(q - 1 + len(r) for q, r in zip(pos, ref)) + ctx.flank, length)
    segment = ctx.store.fetch(record, lo, hi)
    cx = contexts(segment, lo, length, pos, ref, alt, ctx.flank)
    t1 = time.perf_counter()
    n = len(pos)
    table, n_exact, calls = _rows(ctx, al, cx, n)
    t2 = time.perf_counter()
    files = []
    if table.num_rows:
        files.append(write_part(ctx.out, record, chunk, table, ctx.metadata, ["chrom", "motif_id", "motif_name",
                                                                            "call", "ref_strand", "alt_strand"],
                                ["pos", "ref_pvalue", "alt_pvalue"]))
    entry = {"chunk": chunk, "record": record, "alleles": n, "rows": table.num_rows, "files": files,
             "tests": n * len(ctx.motif_ids), "exact_fallbacks": n_exact, "calls": calls}
    write_manifest_entry(ctx.out, chunk, entry)
    t3 = time.perf_counter()
    return {**entry, "seconds_score": t2 - t1, "seconds_io": (t1 - t0) + (t3 - t2)}


def _candidates(ctx: VariantsContext, cx, n: int, by: np.ndarray):
    """``(allele, motif)`` pairs to score exactly: every pair (``--report all``), else those where a window of either
    allele may reach the threshold on either strand."""
    from workers.variants import reaching  # noqa: PLC0415

    if ctx.report_all:
        return np.nonzero(np.ones((n, by.shape[0]), bool))
    reach = reaching(cx.codes, cx.starts, cx.e0, cx.e1, ctx.rows, ctx.device)   # (n, R): either allele
    return np.nonzero(reach[:, by].any(axis=2))


def motif_rows(row_motif: np.ndarray, row_strand: np.ndarray, n_motifs: int) -> np.ndarray:
    """``(n_motifs, 2)``: each motif's + and - strand row (the one strand scanned in both columns where only one is)."""
    by = np.full((n_motifs, 2), -1, np.int64)
    by[row_motif, row_strand.astype(np.int64)] = np.arange(row_motif.size)
    by[by[:, 0] < 0, 0] = by[by[:, 0] < 0, 1]
    by[by[:, 1] < 0, 1] = by[by[:, 1] < 0, 0]
    return by


def _side(ctx: VariantsContext, s2, rows, starts) -> tuple[dict, int]:
    """One allele side of the reported pairs, given both strands' best ``(k, 2)`` scores and starts: the better strand
    by p-value (+ on a tie), its score, p-value, genome start and strand; and how many p-values needed the exact
    computation."""
    pv, n_exact = _pvalues(ctx, s2, rows)
    pick = (pv[:, 1] < pv[:, 0]).astype(np.int64)
    k = np.arange(s2.shape[0])
    row = rows[k, pick]
    start = starts[k, pick]
    best = s2[k, pick]
    return {"score": np.where(np.isfinite(best), best, np.nan), "pvalue": pv[k, pick], "start": start,
            "minus": (ctx.row_strand[row] == 1).astype(np.int8)}, n_exact


def _pvalues(ctx: VariantsContext, scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, int]:
    """P-values of the ``(k, 2)`` best scores of each pair's two strand rows ``rows``: the tail tables; below them
    (an allele whose best window has a p-value above the table's) the exact computation
    (``workers.distribution.pvalue_of_score``), only where neither strand is in its table (else that strand is the
    better); 1 where no window was scored."""
    from workers.distribution import pvalue_of_score  # noqa: PLC0415

    flat, r = scores.ravel(), rows.ravel().astype(np.int32)
    ok = np.isfinite(flat)
    got = np.ones(flat.size)
    got[ok] = ctx.pvalues.lookup(r[ok], flat[ok])
    pair = got.reshape(scores.shape)
    below = np.isnan(pair)
    need = np.flatnonzero((below.all(axis=1)[:, None] & below).ravel())
    for i in need:
        got[i] = pvalue_of_score(ctx.pwms[r[i]], ctx.background, float(flat[i]))[0]
    got[np.isnan(got)] = 1.0            # a strand below its table beside one in it: the other is the better
    return got.reshape(scores.shape), int(need.size)


def _atsnp(ctx: VariantsContext, cx, a_idx, m_idx, m_ref, m_alt) -> dict:
    """atSNP's columns of the rows (NaN without ``--atsnp``, and for alleles that are no SNV)."""
    if ctx.atsnp is None:
        nan = np.full(a_idx.size, np.nan)
        return {k: nan for k in ("ref", "alt", "change", "ref_rse", "alt_rse", "change_rse")}
    from pipeline.variants.atsnp import snv_columns  # noqa: PLC0415

    n = cx.p.size
    snv = (cx.e1[:n] - cx.e0[:n] == 1) & (cx.e1[n:] - cx.e0[n:] == 1)
    return snv_columns(ctx.atsnp, m_idx, snv[a_idx], m_ref, m_alt)


def _rows(ctx: VariantsContext, al: pa.Table, cx, n: int):
    """The table of the reported (allele, motif) rows, how many p-values needed the exact computation, and the rows
    by call."""
    from workers.variants import best_of  # noqa: PLC0415

    by = motif_rows(ctx.row_motif, ctx.row_strand, len(ctx.motif_ids))
    a_idx, m_idx = _candidates(ctx, cx, n, by)
    rows = by[m_idx]                                                          # (k, 2)
    contexts_ = np.concatenate([a_idx, a_idx, n + a_idx, n + a_idx])         # ref +, ref -, alt +, alt -
    best, where = best_of(cx.codes, cx.starts, cx.e0, cx.e1, ctx.rows, contexts_, np.tile(rows.T.ravel(), 2),
                          ctx.device)
    k = a_idx.size
    s_ref, s_alt = best[:2 * k].reshape(2, k).T, best[2 * k:].reshape(2, k).T
    w_ref, w_alt = where[:2 * k].reshape(2, k).T, where[2 * k:].reshape(2, k).T
    alpha = ctx.rows.alpha[rows]
    reach_ref, reach_alt = (s_ref >= alpha).any(axis=1), (s_alt >= alpha).any(axis=1)
    keep = np.flatnonzero(reach_ref | reach_alt | ctx.report_all)
    a_idx, m_idx, rows, reach_ref, reach_alt = a_idx[keep], m_idx[keep], rows[keep], reach_ref[keep], reach_alt[keep]
    ref, n1 = _side(ctx, s_ref[keep], rows, genome_starts(cx, a_idx, w_ref[keep], ctx.flank, alt=False))
    alt, n2 = _side(ctx, s_alt[keep], rows, genome_starts(cx, a_idx, w_alt[keep], ctx.flank, alt=True))
    call = reach_ref.astype(np.int64) * 2 + reach_alt.astype(np.int64)
    at = _atsnp(ctx, cx, a_idx, m_idx, s_ref[keep].max(axis=1), s_alt[keep].max(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log10(ref["pvalue"]) - np.log10(alt["pvalue"])
    take = pa.array(a_idx.astype(np.int64))

    def start(side):
        return pa.array(side["start"], pa.int64(), mask=side["start"] < 0)

    def strand(side):                   # Arrow's take of a two-word dictionary: no Python string per row
        return STRANDS.take(pa.array(side["minus"], pa.int8(), mask=side["start"] < 0))

    cols = {
        "chrom": al.column("chrom").take(take), "pos": al.column("pos").take(take), "id": al.column("id").take(take),
        "ref": al.column("ref").take(take), "alt": al.column("alt").take(take),
        "motif_id": _words(ctx.motif_ids).take(pa.array(m_idx)),
        "motif_name": _words(ctx.motif_names).take(pa.array(m_idx)),
        "ref_score": pa.array(ref["score"]), "alt_score": pa.array(alt["score"]),
        "score_diff": pa.array(alt["score"] - ref["score"]),
        "ref_pvalue": pa.array(ref["pvalue"]), "alt_pvalue": pa.array(alt["pvalue"]), "log10_ratio": pa.array(ratio),
        "call": CALL_WORDS.take(pa.array(call)),
        "ref_start": start(ref), "ref_strand": strand(ref), "alt_start": start(alt), "alt_strand": strand(alt),
        "vcf_line": al.column("line").take(take), "haplotype": al.column("haplotype").take(take),
        **{f"atsnp_{k}" + ("" if k.endswith("rse") else "_pvalue"): pa.array(v, pa.float64(), mask=np.isnan(v))
           for k, v in at.items()},
    }
    counts = np.bincount(call, minlength=len(CALLS))
    return pa.table(cols, schema=VARIANTS_SCHEMA), n1 + n2, {c: int(counts[i]) for i, c in enumerate(CALLS)}
