"""Motif clustering on the identification statistic (pipeline/compare/motif_clusters.py): JASPAR families group, the parts
against their definitions (symmetric E-values, scipy's average linkage, medoids by brute force)."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from pipeline.compare.motif_clusters import (ClusterError, average_linkage, cluster_motifs, cluster_pvalues, medoids,
                                     symmetric_evalues)
from tests.conftest import SHARED, needs_shared

#: JASPAR 2024 family annotations of the families users expect to see grouped
FAMILIES = {"GATA": {"C4-GATA-related"}, "SOX": {"SOX-related factors"}, "FOX": {"FOX"},
            "AP-1": {"Fos-related", "Jun-related"}}


@needs_shared
def test_jaspar_families_group():
    """Every GATA, SOX, FOX and AP-1 (Fos/Jun) matrix of JASPAR 2024 vertebrates with 60 others: each family's
    largest cluster holds most of it and nothing else, and the four are different clusters."""
    from pipeline.motifs import read_motifs

    stem = SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant"
    ms = read_motifs(f"{stem}.jaspar")
    with open(f"{stem}.metadata.tsv") as f:
        family = {r["matrix_id"]: set(r["family"].split(";")) for r in csv.DictReader(f, delimiter="\t")}

    def fam(m):
        return [k for k, v in FAMILIES.items() if family[m.id] & v]

    others = [m for m in ms if not fam(m)]
    rng = np.random.default_rng(0)
    motifs = [m for m in ms if len(fam(m)) == 1] + [others[i] for i in sorted(rng.choice(len(others), 60, False))]
    labels, reps = cluster_motifs(motifs)
    assert labels.shape == (len(motifs),) and reps.shape == (labels.max() + 1,)
    assert (labels[reps] == np.arange(reps.size)).all()                 # a representative is in its cluster
    main = {}
    for name, least in (("GATA", 6 / 8), ("SOX", 15 / 21), ("FOX", 25 / 44), ("AP-1", 20 / 46)):
        idx = [i for i, m in enumerate(motifs) if fam(m) == [name]]
        counts = np.bincount(labels[idx])
        main[name] = int(counts.argmax())
        members = np.flatnonzero(labels == main[name])
        assert counts.max() >= least * len(idx), (name, counts.max(), len(idx))
        assert all(fam(motifs[i]) == [name] for i in members), (name, [motifs[i].name for i in members])
    assert len(set(main.values())) == 4
    ap1 = [motifs[i].name.upper() for i in np.flatnonzero(labels == main["AP-1"])]
    assert any(n.startswith("FOS") for n in ap1) and any("JUN" in n for n in ap1), ap1


def test_parts_against_their_definitions():
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    rng = np.random.default_rng(3)
    n = 30
    p = 10.0 ** -rng.uniform(0, 8, size=(n, n))
    np.fill_diagonal(p, 1.0)
    e = symmetric_evalues(p)
    assert (e == e.T).all() and (np.diag(e) == 0).all()
    assert e[2, 5] == n * max(p[2, 5], p[5, 2])
    labels = average_linkage(e, 1.0)
    d = np.log10(np.where(e > 0, e, 1.0))
    ref = fcluster(linkage(squareform(d - d.min(), checks=False), "average"), -d.min(), criterion="distance")
    # the same partition as scipy on log10 E (labels renumbered: largest cluster first)
    assert len(set(zip(labels, ref))) == len(set(labels)) == len(set(ref))
    sizes = np.bincount(labels)
    assert (np.diff(sizes) <= 0).all()
    reps = medoids(labels, e)
    for k, r in enumerate(reps):
        members = np.flatnonzero(labels == k)
        cost = [sum(np.log10(e[i, j]) for j in members if j != i) for i in members]
        assert r == members[int(np.argmin(cost))]
    labels2, reps2, to_rep = cluster_pvalues(p, 1.0)
    np.testing.assert_array_equal(labels2, labels)
    np.testing.assert_array_equal(to_rep, e[np.arange(n), reps[labels]])
    assert average_linkage(e, 1e-300).max() == n - 1 and average_linkage(e, 1e300).max() == 0
    with pytest.raises(ClusterError, match="cut-off must be > 0"):
        cluster_pvalues(p, 0.0)
    with pytest.raises(ClusterError, match="against itself"):
        symmetric_evalues(p[:3])
