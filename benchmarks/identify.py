"""Identification benchmark (issue 17): which known factor is a discovered-looking motif?

Queries: JASPAR 2026 CORE vertebrate matrices (shipped by pyjaspar) whose factor name (case-insensitive)
is also among the JASPAR 2024 CORE vertebrates (non-redundant, 879 matrices), at least ``--width``
columns long; ``--queries`` of them drawn with ``--seed``.  Each query is the window of ``--width``
consecutive columns with the most information (uniform background) — the "clean" query — and that
window re-estimated from ``--sites`` sites drawn from its columns (multinomial, seeded) — the "noisy"
query, like a discovered motif.  A query is identified at rank r when the r-th target (the tool's own
order; ties in file order) is the first carrying the query's factor name.

Tools, in one run on the same matrices (letter probabilities with Tomtom's pseudocount 0.1 for both):
motifgrid's Tomtom (``pipeline.compare.identify``, ``ed`` and ``pearson``, in this process), ``motifgrid compare
QUERIES TARGETS`` end to end (a new process with its local Dask cluster, ``--workers``), memelite's ``tomtom``
(first call, which may compile, and a second call), and the seed's COMPARE (``pipeline.compare.run.run_compare`` with its
defaults, ranked by the Jaccard estimate) on the first ``--compare-queries`` queries only (it ran 6 min
43 s for all 80 in the issue); 0 skips it.

    python benchmarks/identify.py                          # CPU, prints a table, --out FILE writes JSON
    python benchmarks/identify.py --device gpu --all-pairs # also JASPAR 2024 CORE all-pairs (2,346²) timing
    python benchmarks/identify.py --clusters               # also clusterings of JASPAR vertebrates vs families
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.motifs import Motif, format_jaspar, motif_probabilities, read_motifs  # noqa: E402


def shared_data() -> Path:
    env = os.environ.get("MOTIFGRID_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def load_targets(which: str) -> list[Motif]:
    """JASPAR 2024 CORE (vertebrates or all taxa), non-redundant: the staged file, else pyjaspar's release."""
    stem = {"vertebrates": "JASPAR2024_CORE_vertebrates_non-redundant", "all": "JASPAR2024_CORE_non-redundant"}[which]
    f = shared_data() / "motifs" / f"{stem}.jaspar"
    if f.exists():
        return read_motifs(f)
    return read_motifs("JASPAR2024:CORE" + (":vertebrates" if which == "vertebrates" else ""))


def informative_window(ppm: np.ndarray, width: int) -> int:
    """Start of the ``width`` consecutive columns with the largest information content (uniform bg)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ic = 2.0 + np.where(ppm > 0, ppm * np.log2(ppm), 0.0).sum(axis=1)
    sums = np.convolve(ic, np.ones(width), mode="valid")
    return int(np.argmax(sums))


def make_queries(targets, n_queries: int, width: int, sites: int, seed: int):
    """(clean, noisy) query lists from JASPAR 2026 vertebrates whose factor is among ``targets``."""
    names = {t.name.upper() for t in targets}
    pool = [m for m in read_motifs("JASPAR2026:CORE:vertebrates") if m.name.upper() in names and m.length >= width]
    rng = np.random.default_rng(seed)
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), size=min(n_queries, len(pool)), replace=False))]
    clean, noisy = [], []
    for k, m in enumerate(chosen):
        ppm = m.matrix / m.matrix.sum(axis=1, keepdims=True)
        s = informative_window(ppm, width)
        cut = m.matrix[s:s + width]
        clean.append(Motif(id=m.id, name=m.name, matrix=cut, kind=m.kind, nsites=m.nsites,
                           source="JASPAR2026 window", record=k + 1))
        counts = np.stack([rng.multinomial(sites, p) for p in ppm[s:s + width]]).astype(np.float64)
        noisy.append(Motif(id=m.id, name=m.name, matrix=counts, kind="counts", nsites=float(sites),
                           source=f"JASPAR2026 window, {sites} sites", record=k + 1))
    return clean, noisy, len(pool)


def ranks_from_order(order: np.ndarray, queries, targets) -> np.ndarray:
    """Rank (1-based) of each query's first target carrying its factor name, in each row's ``order``."""
    tnames = np.array([t.name.upper() for t in targets])
    out = np.empty(len(queries), np.int64)
    for i, q in enumerate(queries):
        hit = np.flatnonzero(tnames[order[i]] == q.name.upper())
        out[i] = hit[0] + 1 if hit.size else len(targets) + 1
    return out


def order_by(values: np.ndarray, ascending: bool) -> np.ndarray:
    cols = np.arange(values.shape[1])
    key = values if ascending else -values
    return np.stack([np.lexsort((cols, row)) for row in key])


def summary(ranks: np.ndarray, seconds: float) -> dict:
    return {"queries": int(ranks.size), "top1": int((ranks == 1).sum()), "top5": int((ranks <= 5).sum()),
            "median_rank": float(np.median(ranks)), "seconds": round(seconds, 3)}


def run_motifgrid(queries, targets, distance: str, device: str) -> dict:
    from pipeline.compare.identify import match_all, ranking  # noqa: PLC0415

    t0 = time.perf_counter()
    m = match_all(queries, targets, distance=distance, device=device)
    order = ranking(m, len(targets))
    dt = time.perf_counter() - t0
    return summary(ranks_from_order(order, queries, targets), dt)


def run_memelite(queries, targets) -> tuple[dict, dict]:
    from memelite import tomtom  # noqa: PLC0415

    bg = np.full(4, 0.25)
    qs = [np.ascontiguousarray(motif_probabilities(q, bg).T) for q in queries]
    ts = [np.ascontiguousarray(motif_probabilities(t, bg).T) for t in targets]
    out = []
    for _ in range(2):
        t0 = time.perf_counter()
        p = tomtom(qs, ts)[0]
        out.append((p, time.perf_counter() - t0))
    ranks = ranks_from_order(order_by(out[1][0], True), queries, targets)
    return summary(ranks, out[0][1]), summary(ranks, out[1][1])


def run_compare(queries, targets, tmp: Path) -> dict:
    """The seed's COMPARE through pipeline.compare.run with its defaults, on a local cluster."""
    import pyarrow.compute as pc  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.compare.run import CompareSettings, read_pairs  # noqa: PLC0415
    from pipeline.compare.run import run_compare as compare  # noqa: PLC0415

    qf, tf = tmp / "queries.jaspar", tmp / "targets.jaspar"
    qf.write_text(format_jaspar(queries))
    tf.write_text(format_jaspar(targets))
    with get_client(device="cpu", quiet=True) as (client, _):
        t0 = time.perf_counter()
        compare(str(qf), str(tf), str(tmp / "out"), client, CompareSettings(method="occurrence"), device="cpu")
        dt = time.perf_counter() - t0
    pairs = read_pairs(str(tmp / "out"), ["motif_a", "motif_b", "similarity"])
    qi = {q.id: i for i, q in enumerate(queries)}
    ti = {t.id: j for j, t in enumerate(targets)}
    sim = np.zeros((len(queries), len(targets)))
    a = [qi[x] for x in pairs.column("motif_a").to_pylist()]
    b = [ti[x] for x in pairs.column("motif_b").to_pylist()]
    sim[a, b] = pc.fill_null(pairs.column("similarity"), 0.0).to_numpy()
    return summary(ranks_from_order(order_by(sim, False), queries, targets), dt)


def run_cli(queries, targets, tmp: Path, workers: int) -> dict:
    """``motifgrid compare queries targets --out DIR`` end to end (a new process: imports, local cluster,
    reading both files, the Dask tasks, writing best_matches): wall time and the identification rate of its
    best_matches.tsv (top 5)."""
    import subprocess  # noqa: PLC0415

    import pyarrow.parquet as pq  # noqa: PLC0415

    qf, tf = tmp / "queries.jaspar", tmp / "targets.jaspar"
    qf.write_text(format_jaspar(queries))
    tf.write_text(format_jaspar(targets))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.cli", "compare", str(qf), str(tf), "--out", str(tmp / "cli"),
                    "--workers", str(workers)], check=True, capture_output=True, env=env, cwd=ROOT)
    dt = time.perf_counter() - t0
    rows = pq.read_table(tmp / "cli" / "best_matches.parquet").to_pylist()
    tname = {t.id: t.name.upper() for t in targets}
    first = {}
    for r in rows:                          # rows of one query in rank order; ids may repeat between queries
        first.setdefault(r["query"], [])
        first[r["query"]].append(tname[r["target"]])
    ranks = np.array([(first[q.id].index(q.name.upper()) + 1) if q.name.upper() in first[q.id] else 6
                      for q in queries])
    out = summary(ranks, dt)
    out.pop("median_rank")
    out["seconds_summary_json"] = round(json.loads((tmp / "cli" / "_summary.json").read_text())["seconds"], 3)
    return out


def cluster_families(device: str) -> dict:
    """Clusterings of JASPAR 2024 vertebrates (all pairs, Tomtom) against the JASPAR family annotation: per
    method and cut-off the clusters, the share of same-cluster pairs sharing a family (precision), the share of
    pairs sharing a family that share a cluster (recall), and for GATA, SOX, FOX, Jun and Fos the largest share
    of the family in one cluster."""
    import csv  # noqa: PLC0415

    from scipy.cluster.hierarchy import fcluster, linkage  # noqa: PLC0415
    from scipy.spatial.distance import squareform  # noqa: PLC0415

    from pipeline.compare.identify import run_identify  # noqa: PLC0415
    from pipeline.compare.motif_clusters import average_linkage, symmetric_evalues  # noqa: PLC0415

    ms = load_targets("vertebrates")
    stem = shared_data() / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.metadata.tsv"
    with open(stem) as f:
        fam = {r["matrix_id"]: set(r["family"].split(";")) for r in csv.DictReader(f, delimiter="\t")}
    families = [fam.get(m.id, set()) for m in ms]
    t0 = time.perf_counter()
    e = symmetric_evalues(run_identify(ms, ms, top=1, device=device, exclude_self=True, keep_pvalues=True).pvalue)
    out = {"motifs": len(ms), "seconds_all_pairs": round(time.perf_counter() - t0, 3), "runs": []}
    n = len(ms)
    share = np.array([[bool(families[i] & families[j]) for j in range(n)] for i in range(n)])
    d = np.log10(np.maximum(e, 1e-300)) + 300
    np.fill_diagonal(d, 0)

    def leader(cut):
        adj = e <= cut
        np.fill_diagonal(adj, False)
        lab = np.full(n, -1)
        for i in np.lexsort((np.arange(n), -adj.sum(1))):
            if lab[i] < 0:
                lab[i] = i
                lab[np.flatnonzero(adj[i] & (lab < 0))] = i
        return lab

    runs = [("leader", c, leader(c)) for c in (0.01, 1.0)]
    runs += [("average", c, average_linkage(e, c)) for c in (0.01, 0.1, 1.0, 10.0)]
    for method in ("complete", "single"):
        z = linkage(squareform(d, checks=False), method)
        runs += [(method, c, fcluster(z, np.log10(c) + 300, criterion="distance")) for c in (0.01, 1.0)]
    for method, cut, lab in runs:
        same = lab[:, None] == lab[None, :]
        np.fill_diagonal(same, False)
        pairs = share & ~np.eye(n, dtype=bool)
        row = {"method": method, "evalue": cut, "clusters": int(np.unique(lab).size),
               "precision": round(float((same & share).sum() / max(same.sum(), 1)), 3),
               "recall": round(float((same & pairs).sum() / max(pairs.sum(), 1)), 3)}
        for key, fam_name in (("GATA", "C4-GATA-related"), ("SOX", "SOX-related factors"), ("FOX", "FOX"),
                              ("Jun", "Jun-related"), ("Fos", "Fos-related")):
            idx = [i for i in range(n) if fam_name in families[i]]
            row[key] = f"{np.unique(lab[idx], return_counts=True)[1].max()}/{len(idx)}"
        out["runs"].append(row)
    return out


def all_pairs(device: str) -> dict:
    """JASPAR 2024 CORE (all taxa, 2,346 matrices) against itself: seconds and pairs."""
    from pipeline.compare.identify import match_all  # noqa: PLC0415

    core = load_targets("all")
    t0 = time.perf_counter()
    m = match_all(core, core, device=device, exclude_self=True)
    return {"motifs": len(core), "pairs": int(m.pvalue.size), "seconds": round(time.perf_counter() - t0, 3)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=80)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--sites", type=int, default=25)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compare-queries", type=int, default=8)
    ap.add_argument("--no-memelite", action="store_true")
    ap.add_argument("--all-pairs", action="store_true")
    ap.add_argument("--workers", type=int, default=2, help="workers of the end-to-end `motifgrid compare` run")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end `motifgrid compare` run")
    ap.add_argument("--clusters", action="store_true", help="also evaluate clusterings against JASPAR families")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    targets = load_targets("vertebrates")
    clean, noisy, pool = make_queries(targets, a.queries, a.width, a.sites, a.seed)
    res = {"setup": {"targets": len(targets), "pool": pool, "queries": len(noisy), "width": a.width,
                     "sites": a.sites, "seed": a.seed, "device": a.device, "cpus": os.cpu_count()}}
    for label, qs in (("noisy", noisy), ("clean", clean)):
        r = res[label] = {}
        for dist in ("ed", "pearson"):
            r[f"motifgrid_tomtom_{dist}"] = run_motifgrid(qs, targets, dist, a.device)
        if not a.no_memelite:
            r["memelite_first_call"], r["memelite"] = run_memelite(qs, targets)
        if not a.no_cli:
            with tempfile.TemporaryDirectory() as tmp:
                r["motifgrid_compare_cli"] = run_cli(qs, targets, Path(tmp), a.workers)
        if a.compare_queries > 0:
            with tempfile.TemporaryDirectory() as tmp:
                r["compare_subset"] = run_compare(qs[:a.compare_queries], targets, Path(tmp))
    if a.all_pairs:
        res["all_pairs"] = all_pairs(a.device)
    if a.clusters:
        res["clusters"] = cluster_families(a.device)
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
