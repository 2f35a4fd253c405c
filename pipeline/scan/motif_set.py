"""What a scan scans for: ``MotifSet`` (motifs read from a source, their PWMs under a background, the strands),
its rows' thresholds at a p-value (``threshold_plan``, ``row_thresholds_many``) and the thresholds table; ``ScanError``,
the scan's one-line error."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError
from workers.distribution import PvalueTable
from workers.scan import make_plan


class ScanError(MotifgridError, RuntimeError):
    """A scan that cannot start or go on; ``str(e)`` is one line for the user."""


STRAND_ROWS = {"both": (0, 1), "+": (0,), "-": (1,)}


#: what a scan keys by motif id (said when matrices share one): the hits, and so the q-value families
SCAN_KEYED = ("hits carry the id only, so matrices sharing one share their q-values (one Benjamini-Hochberg "
              "family)")


@dataclass
class MotifSet:
    """Motifs read from a source, their PWMs under a background, the strands scanned.

    ``like="fimo"``: the matrices are FIMO's integer-scaled PSSMs (``lattices``, one per motif, forward
    strand) and ``pwms`` their ``q/scale + offset``; ``background`` is the one FIMO uses (:mod:`pipeline.distribution.fimo`).
    """
    source: str
    checksum: str
    ids: list
    names: list
    pwms: list                 # forward (m, 4) float64
    background: np.ndarray
    pseudocount: float
    strands: str = "both"      # "both", "+" or "-"
    like: str | None = None    # None (motifgrid's exact scores) or "fimo"
    lattices: list | None = None   # like="fimo": workers.distribution.fimo_lattice.LatticeMatrix per motif (forward)
    logodds: list | None = None    # motifs given as log-odds only (MEME): scored as written, - strand reversed
    select: list | None = None     # ids/names chosen from the source (--motif), recorded in the provenance

    @classmethod
    def load(cls, source: str, background: np.ndarray, pseudocount: float, select=None,
             format: str | None = None, *, like: str | None = None, strands: str = "both",
             keyed: str = SCAN_KEYED) -> "MotifSet":
        """Read ``source`` (``format`` when neither its name nor content tells it), keep the motifs ``select``
        chooses by id or name (:func:`pipeline.motifs.select_motifs`), and build their PWMs.  ``keyed``: what
        the command keys by motif id, said in a warning when matrices share one."""
        from pipeline.motifs import (motifs_checksum, pwm_from_motif, read_motifs, warn_logodds_only,  # noqa: PLC0415
                                     warn_shared_ids)

        if strands not in STRAND_ROWS:
            raise ValueError(f"strands must be one of {', '.join(STRAND_ROWS)}, not {strands!r}")
        if like == "fimo" and strands == "-":
            raise ValueError("FIMO scans both strands or the forward one (--norc): --like fimo takes --strand both or +")
        select = list(select) if select else None
        motifs = read_motifs(source, format=format, select=select)
        warn_shared_ids(source, motifs, keyed)
        lattices = None
        if like == "fimo":
            from pipeline.distribution.fimo import fimo_background, fimo_matrix  # noqa: PLC0415

            background = fimo_background(background, both_strands=strands == "both")
            lattices = [fimo_matrix(m, background, pseudocount) for m in motifs]
            pwms = [lat.pwm for lat in lattices]
        elif like is None:
            pwms = [pwm_from_motif(m, background, pseudocount) for m in motifs]
        else:
            raise ValueError(f"like must be None or 'fimo', not {like!r}")
        warn_logodds_only(source, motifs)
        logodds = [m.kind == "logodds" for m in motifs]
        return cls(source=str(source), checksum=motifs_checksum(source), ids=[m.id for m in motifs],
                   names=[m.name for m in motifs], pwms=pwms, background=np.asarray(background, float),
                   pseudocount=float(pseudocount), strands=strands, like=like, lattices=lattices, select=select,
                   logodds=logodds if any(logodds) else None)

    @property
    def strand_rows(self) -> tuple:
        """The strands scanned: (0, 1), (0,) or (1,) (0 the motif, 1 its reverse complement)."""
        return STRAND_ROWS[self.strands]

    @property
    def max_length(self) -> int:
        return max((p.shape[0] for p in self.pwms), default=0)

    def subset(self, pick: list) -> "MotifSet":
        """The motifs ``pick`` (indices) of this set, in that order, everything else kept."""
        import dataclasses  # noqa: PLC0415

        def take(values):
            return None if values is None else [values[i] for i in pick]

        return dataclasses.replace(self, ids=take(self.ids), names=take(self.names), pwms=take(self.pwms),
                                   lattices=take(self.lattices), logodds=take(self.logodds),
                                   select=take(self.ids))

    def minus(self, i: int) -> np.ndarray:
        """The ``-`` strand's matrix of motif ``i`` (:func:`pipeline.motifs.minus_strand_pwm`; a log-odds-only
        motif's reverse complement; FIMO's own reverse complement with ``like="fimo"``, whose background is
        strand-symmetric when both strands are scanned)."""
        from pipeline.motifs import minus_strand_pwm, reverse_complement  # noqa: PLC0415

        if self.lattices is not None:
            return self.lattices[i].reverse_complement().pwm
        if self.logodds is not None and self.logodds[i]:
            return reverse_complement(self.pwms[i])
        return minus_strand_pwm(self.pwms[i], self.background)

    def rows(self):
        """(pwms, motif index, strand) for every (motif, strand) row scanned: '+' then '-' per motif
        (one of them with ``strands`` "+" or "-")."""
        pwms, mi, st = [], [], []
        for i, w in enumerate(self.pwms):
            for s in STRAND_ROWS[self.strands]:
                pwms.append(w if s == 0 else self.minus(i))
                mi.append(i)
                st.append(s)
        return pwms, np.asarray(mi, np.int32), np.asarray(st, np.int8)

    def row_lattices(self) -> list | None:
        """``like="fimo"``: the LatticeMatrix of every row, in ``rows()`` order; else None."""
        if self.lattices is None:
            return None
        return [lat if s == 0 else lat.reverse_complement()
                for lat in self.lattices for s in STRAND_ROWS[self.strands]]


def threshold_plan(mset: MotifSet, pvalue: float, client=None, store_later: bool = False, early=None,
                   table: bool = True):
    """``(plan, tables, kept rows, unreachable motif ids)``: the scan plan of ``mset``'s rows at their thresholds
    for ``pvalue`` (rows that cannot reach it left out), with the kept rows' score -> p-value tables
    (``plan.pvalues``); ``tables`` the ScoreThreshold of every row (:func:`row_thresholds`, or ``early.result()``
    of the same, started beforehand).  ``table=False``: the thresholds alone and ``plan.pvalues`` None, for a scan
    that looks no p-value up (no hits files)."""
    tables = (early.result() if early is not None else
              row_thresholds(mset, pvalue, client=client, store_later=store_later, table=table))
    pwms, row_motif, row_strand = mset.rows()
    thr = np.array([t.threshold if t.reachable else np.inf for t in tables])
    plan = make_plan(pwms, thr, row_motif, row_strand)
    keep = np.flatnonzero(np.isfinite(thr))
    unreachable = sorted({mset.ids[row_motif[i]] for i in range(len(thr)) if not np.isfinite(thr[i])})
    plan.pvalues = PvalueTable.from_thresholds([tables[i] for i in keep]) if table else None
    return plan, tables, keep, unreachable


def row_thresholds(mset: MotifSet, pvalue: float, client=None, store_later: bool = False, table: bool = True):
    """Per-row ScoreThreshold: forward matrices, and the reverse-complement ones under the same background
    (the complemented background for the motif); computed once when the background is strand-symmetric.
    ``store_later``: new threshold-cache entries are written in the background
    (``pipeline.distribution.thresholds.wait_for_cache_writes``).  ``table=False``: without the score -> p-value tables (the
    same thresholds; the tables were 60 % of the time of JASPAR's 879 vertebrate matrices: docs/benchmarks.md)."""
    return row_thresholds_many(mset, [pvalue], client, store_later=store_later, table=table)[0]


def row_thresholds_many(mset: MotifSet, pvalues, client=None, *, method: str = "exact",
                        table: bool = True, rel_tol: float = 1e-3, device: str = "cpu",
                        store_later: bool = False):
    """``row_thresholds`` at several p-values: ``result[i_pvalue]`` is the per-row list (``rows()`` order).
    ``like="fimo"`` sets: FIMO's lattice tables (:func:`workers.distribution.fimo_lattice.lattice_thresholds`;
    ``method``, ``rel_tol`` and ``table`` do not apply), computed here: one small integer DP per matrix."""
    from pipeline.distribution.thresholds import compute_thresholds_many  # noqa: PLC0415

    bg = mset.background
    if mset.lattices is not None:
        from workers.distribution.fimo_lattice import lattice_thresholds  # noqa: PLC0415

        def compute(mats):
            per = [lattice_thresholds(lat, bg, pvalues) for lat in mats]                  # [matrix][p]
            return [[t[j] for t in per] for j in range(len(pvalues))]

        mats = mset.lattices
    else:
        def compute(mats):
            return compute_thresholds_many(mats, bg, pvalues, client=client, method=method, table=table,
                                           rel_tol=rel_tol, device=device, store_later=store_later)

        mats = mset.pwms
    fwd = compute(mats) if mset.strands != "-" else None
    if mset.strands == "+":
        rev = None
    elif fwd is not None and np.allclose(bg, bg[::-1], rtol=0, atol=1e-15):
        rev = fwd               # a strand-symmetric background: the reverse-complement matrix scores alike
    else:
        rev = compute([lat.reverse_complement() for lat in mats] if mset.lattices is not None else
                      [mset.minus(i) for i in range(len(mats))])
    out = []
    for j in range(len(pvalues)):
        rows = []
        for i in range(len(mset.pwms)):
            rows += [(fwd if s == 0 else rev)[j][i] for s in STRAND_ROWS[mset.strands]]
        out.append(rows)
    return out


def motif_thresholds_table(mset: MotifSet, tables, strands) -> pa.Table:
    """One row per (motif, strand) row of ``mset`` with its ``tables[r]`` (ScoreThreshold at one p-value): what a
    scan's ``_thresholds.parquet``, compare's ``thresholds.parquet`` and ``motifgrid thresholds`` write."""
    from pipeline.distribution.thresholds import thresholds_table  # noqa: PLC0415

    _, mi, _ = mset.rows()
    return thresholds_table([mset.ids[i] for i in mi], [mset.names[i] for i in mi], strands, tables,
                            lengths=[mset.pwms[i].shape[0] for i in mi])


def default_background(like: str | None) -> str:
    """The background when none is asked for: FIMO's (MEME's NRDB) with ``like="fimo"``, else
    ``motifgrid.scan.background`` (uniform)."""
    import dask.config  # noqa: PLC0415

    return "nrdb" if like == "fimo" else str(dask.config.get("motifgrid.scan.background", default="uniform"))


def check_like(like: str | None, strands: str) -> None:
    """Refuse a ``like``/``strands`` combination that has no meaning (one line, ScanError)."""
    if strands not in STRAND_ROWS:
        raise ScanError(f"--strand must be one of {', '.join(STRAND_ROWS)}, not {strands!r}")
    if like not in (None, "fimo"):
        raise ScanError(f"--like must be fimo, not {like!r}")
    if like == "fimo" and strands == "-":
        raise ScanError("--like fimo scans both strands or, as FIMO's --norc, the forward one: --strand both or +")
