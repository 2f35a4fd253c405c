"""``--atsnp``: atSNP's p-values of each SNV allele's best match and of the change, beside the per-window ones.

The background is a first-order Markov chain: estimated from the genome's dinucleotides (``DIR/_markov.tsv`` says
which) or given with ``--markov FILE`` (a TSV: a header ``\tA\tC\tG\tT``, then a row ``prior`` and rows ``A`` .. ``T`` of
transition probabilities — atSNP's ``prior`` and ``transition`` in one file).  Each motif's tails are estimated once
(``workers.variants.atsnp``: importance sampling, ``motifgrid.variants.atsnp-samples`` samples, a fixed seed per
motif, so a rerun or ``--resume`` gives the same values), one Dask task per group of motifs on the workers (CuPy on a
GPU worker), then looked up by every task for its SNV rows; other alleles (indels, MNVs) get none, as atSNP defines
them for SNVs."""
from __future__ import annotations

import numpy as np

from pipeline.io.genome import GenomeStore
from pipeline.variants.stage import VariantsError

BASES = "ACGT"
PIECE = 1 << 22


def markov_of_genome(store: GenomeStore) -> tuple[np.ndarray, np.ndarray]:
    """``(prior, trans)`` from the dinucleotide counts of every record (pairs with an N left out)."""
    from workers.variants.atsnp import markov_of  # noqa: PLC0415

    counts = np.zeros(16, np.int64)
    rec = store.records
    for name in rec.index:
        length = int(rec.lengths[rec.index[name]])
        for lo in range(0, length, PIECE):
            c = store.fetch(name, lo, min(lo + PIECE + 1, length)).astype(np.int64)
            a, b = c[:-1], c[1:]
            ok = (a < 4) & (b < 4)
            counts += np.bincount(a[ok] * 4 + b[ok], minlength=16)
    return markov_of(counts.reshape(4, 4))


def read_markov(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``(prior, trans)`` of a ``--markov`` file; a clear error naming the file and line otherwise."""
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            cols = line.rstrip("\r\n").split("\t")
            if n == 1 or not line.strip() or line.startswith("#"):
                continue
            try:
                rows[cols[0]] = np.array([float(x) for x in cols[1:5]])
            except ValueError:
                raise VariantsError(f"{path}: line {n}: four probabilities expected after {cols[0]!r}") from None
            if rows[cols[0]].size != 4 or (rows[cols[0]] < 0).any():
                raise VariantsError(f"{path}: line {n}: four non-negative probabilities expected")
    missing = [k for k in ("prior", *BASES) if k not in rows]
    if missing:
        raise VariantsError(f"{path}: rows {', '.join(missing)} missing (a --markov file has a header line, then rows "
                            "prior, A, C, G, T of four probabilities)")
    prior = rows["prior"] / rows["prior"].sum()
    trans = np.array([rows[b] / rows[b].sum() for b in BASES])
    return prior, trans


def markov_text(prior: np.ndarray, trans: np.ndarray) -> str:
    """A ``--markov`` file of the chain."""
    lines = ["\t" + "\t".join(BASES), "prior\t" + "\t".join(f"{x:.10g}" for x in prior)]
    lines += [b + "\t" + "\t".join(f"{x:.10g}" for x in trans[i]) for i, b in enumerate(BASES)]
    return "\n".join(lines) + "\n"


def _tails_task(pairs: list, prior, trans, samples: int, seeds: list, device: str) -> list:
    """One group of motifs' tails on a worker (CuPy where ``device`` is the GPU)."""
    from workers.backend import resolve_device  # noqa: PLC0415
    from workers.variants.atsnp import motif_tails  # noqa: PLC0415

    xp = np
    if resolve_device(device) == "gpu":
        import cupy as xp  # noqa: PLC0415
    return [motif_tails(plus, minus, prior, trans, samples, seed, xp) for (plus, minus), seed in zip(pairs, seeds)]


def motif_tails_all(pwms: list, by: np.ndarray, prior, trans, samples: int, client, device: str = "cpu") -> list:
    """Every motif's :class:`~workers.variants.atsnp.MotifTails` (its + and - rows ``by[m]`` of ``pwms``), computed
    a group of motifs a task on ``client`` (at most 16, at least four tasks a worker thread)."""
    pairs = [(pwms[a], pwms[b]) for a, b in by]
    threads = max(1, sum(client.nthreads().values()))
    group = int(np.clip(len(pairs) // (4 * threads), 1, 16))
    futures = [client.submit(_tails_task, pairs[i:i + group], prior, trans, samples,
                             list(range(i + 1, min(i + group, len(pairs)) + 1)), device, pure=False)
               for i in range(0, len(pairs), group)]
    out = []
    for f in futures:
        out.extend(f.result())
    return out


def snv_columns(tails: list, m_idx: np.ndarray, snv: np.ndarray, m_ref: np.ndarray, m_alt: np.ndarray) -> dict:
    """The atSNP columns of rows (motif ``m_idx``; SNV or not; best scores of either strand per allele): NaN where
    not an SNV or an allele has no window."""
    from workers.variants.atsnp import snv_statistics  # noqa: PLC0415

    names = ("ref", "alt", "change", "ref_rse", "alt_rse", "change_rse")
    out = {k: np.full(m_idx.size, np.nan) for k in names}
    ok = snv & np.isfinite(m_ref) & np.isfinite(m_alt)
    for m in np.unique(m_idx[ok]):
        rows = np.flatnonzero(ok & (m_idx == m))
        got = snv_statistics(tails[m], m_ref[rows], m_alt[rows])
        for k in names:
            out[k][rows] = got[k]
    return out
