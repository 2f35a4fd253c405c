"""``--like fimo`` against FIMO 5.4.1's own output (tests/data/fimo_reference), and the default mode's stated
differences from FIMO, checked on the same reference with exact enumeration.

References: FIMO's ``results.tsv`` (both strands) and ``results-norc.tsv`` (``--norc``); meet-in-the-middle
enumeration of all 4^15 words (exact p-values of float64 and of integer matrices); naive float64 scoring
of every window.
"""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from pipeline.cli.command import main
from pipeline.io.genome import ingest
from pipeline.motifs import NRDB_DNA, pwm_from_motif, read_motifs, reverse_complement
from pipeline.scan.read import read_hits
from tests.conftest import DATA
from tests.distribution.test_distribution import MITM
from workers.distribution.fimo_lattice import lattice_pvalues, lattice_thresholds, LatticeMatrix, scale_pssm

REF = DATA / "fimo_reference"
MOTIF = str(REF / "prodoric_mx000001_meme.txt")
RESULTS = {"both": "results.tsv", "+": "results-norc.tsv"}
CODE = {c: i for i, c in enumerate("ACGT")}


def fimo_rows(strand: str) -> list[dict]:
    """FIMO's rows: every column as printed."""
    names = ["motif_id", "motif_alt_id", "sequence_name", "start", "stop", "strand", "score", "p-value", "q-value",
             "matched_sequence"]
    rows = []
    for line in (REF / RESULTS[strand]).read_text().splitlines():
        if line and not line.startswith(("#", "motif_id")):
            rows.append(dict(zip(names, line.split("\t"))))
    return rows


def read_fasta(path) -> dict[str, str]:
    seqs, name = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith(">"):
            name = line[1:].split()[0]
            seqs[name] = []
        elif line:
            seqs[name].append(line.upper())
    return {k: "".join(v) for k, v in seqs.items()}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("fimo_ref")
    shutil.copy(REF / "mibig-genes.fna", d)          # pyfaidx writes its .fai beside the FASTA
    return ingest(d / "mibig-genes.fna", d / "g.zarr", halo=20)


@pytest.fixture(scope="module")
def seqs():
    return read_fasta(REF / "mibig-genes.fna")


def scan(store, out, *extra, device="cpu"):
    assert main(["scan", store.path, MOTIF, "--out", str(out), "--no-progress", "--device", device, *extra]) == 0
    t = read_hits(str(out))
    cols = {c: t.column(c).to_pylist() for c in ("chrom", "start", "end", "strand", "score", "pvalue")}
    return [dict(zip(cols, v)) for v in zip(*cols.values())]


# ------------------------------------------------------------------------------------------------
# MEME's integer lattice and p-value table (workers.distribution.fimo_lattice)


def test_scale_pssm_rounds_as_meme():
    """offset = floor(min), scale = floor(1000/(max - offset)), entries nint((x - offset)*scale) with halves up
    (NumPy's rint would round 2.5 to 2); all-equal entries lower the minimum by one first."""
    x = -1 + 2.5 / 512                   # exactly 2.5 lattice steps above the offset: scale is 512
    lat = scale_pssm([[-1.0, x, 0.953125, 0.0]])
    assert (lat.scale, lat.offset) == (512.0, -1.0)
    assert lat.q.tolist() == [[0, 3, 1000, 512]]
    flat = scale_pssm([[0.5, 0.5, 0.5, 0.5]])
    assert (flat.scale, flat.offset, flat.q.tolist()) == (666.0, -1.0, [[999] * 4])
    assert np.allclose(lat.pwm, lat.q / 512 - 1) and lat.base == -1.0


def test_lattice_pvalues_equal_enumeration():
    """FIMO's table pv[x] = P(S >= x) against all 4^6 words of a random integer matrix."""
    rng = np.random.default_rng(7)
    q = rng.integers(0, 1001, size=(6, 4))
    bg = rng.dirichlet([3, 3, 3, 3])
    pv = lattice_pvalues(q, bg)
    assert pv.shape == (6001,)
    words = np.stack(np.meshgrid(*[np.arange(4)] * 6, indexing="ij"), -1).reshape(-1, 6)
    s = q[np.arange(6), words].sum(axis=1)
    p = bg[words].prod(axis=1)
    for x in np.unique(s):
        assert pv[x] == pytest.approx(p[s >= x].sum(), rel=1e-12)
    assert pv[0] == 1.0 and pv[s.max() + 1:].max() == 0.0


def test_lattice_threshold_is_inclusive():
    """FIMO reports p-value <= --thresh: a score whose p-value equals the threshold is a hit."""
    lat = LatticeMatrix(np.array([[0, 0, 0, 1000], [0, 0, 0, 1000]]), 100.0, -2.0)
    t_eq, t_below = lattice_thresholds(lat, np.full(4, 0.25), [1 / 16, 0.0624])
    assert t_eq.reachable and t_eq.pvalue == 1 / 16
    assert t_eq.threshold < 2000 / 100 - 2 * 2 < t_eq.threshold + 1e-6
    assert not t_below.reachable and math.isinf(t_below.threshold)
    t_mid, = lattice_thresholds(lat, np.full(4, 0.25), [0.5])      # P(S >= 1000) = 7/16
    assert t_mid.pvalue == 7 / 16 and t_mid.threshold == pytest.approx(1000 / 100 - 4, abs=1e-8)


# ------------------------------------------------------------------------------------------------
# --like fimo end to end: motifgrid scan -> Parquet -> FIMO export, against FIMO's own output


def _printed(rows):
    return sorted((r["chrom"], r["start"] + 1, r["end"], r["strand"], f"{r['score']:.6g}", f"{r['pvalue']:.3g}")
                  for r in rows)


@pytest.mark.parametrize("strand", ["both", "+"])
def test_like_fimo_reproduces_fimo(store, tmp_path, strand):
    """The same hits, scores (FIMO's lattice) and p-values (FIMO's table) at FIMO's printed precision; through
    the FIMO export, the text columns too (names, 1-based coordinates, matched sequence)."""
    hits = scan(store, tmp_path / "hits", "--like", "fimo", "--strand", strand)
    want = fimo_rows(strand)
    assert _printed(hits) == sorted((r["sequence_name"], int(r["start"]), int(r["stop"]), r["strand"], r["score"],
                                     r["p-value"]) for r in want)
    assert len(hits) == (6 if strand == "both" else 1)
    assert main(["export", str(tmp_path / "hits"), "--format", "fimo", "-o", str(tmp_path / "h.tsv")]) == 0
    lines = (tmp_path / "h.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    got = sorted(tuple(v for k, v in zip(header, line.split("\t")) if k != "q-value") for line in lines[1:])
    assert got == sorted(tuple(v for k, v in r.items() if k != "q-value") for r in want)
    import pyarrow.parquet as pq  # noqa: PLC0415

    md = pq.read_schema(next((tmp_path / "hits").glob("*/**/part-*.parquet"))).metadata
    assert md[b"like"] == b"fimo" and md[b"strands"] == strand.encode()


@pytest.mark.gpu
@pytest.mark.parametrize("strand", ["both", "+"])
def test_like_fimo_reproduces_fimo_gpu(store, tmp_path, strand):
    """The GPU scans the same lattice matrices: the same rows as FIMO's."""
    hits = scan(store, tmp_path / "hits", "--like", "fimo", "--strand", strand, device="gpu")
    assert _printed(hits) == sorted((r["sequence_name"], int(r["start"]), int(r["stop"]), r["strand"], r["score"],
                                     r["p-value"]) for r in fimo_rows(strand))


def test_like_fimo_thresholds_against_enumerated_lattice(tmp_path, capsys):
    """`motifgrid thresholds --like fimo`: the weakest hit's lattice score and its p-value, checked against an
    independent emulation of FIMO's lattice (NRDB averaged with its complement, pseudocount 0.1) whose integer
    scores are enumerated exactly (all 4^15 words)."""
    out = tmp_path / "t.tsv"
    assert main(["thresholds", MOTIF, "--like", "fimo", "--pvalue", "1e-4", "1e-5", "-o", str(out)]) == 0
    rows = [dict(zip(*[line.split("\t") for line in (out.read_text().splitlines()[0], r)]))
            for r in out.read_text().splitlines()[1:]]
    assert [(r["strand"], r["requested_pvalue"], r["method"]) for r in rows] == [
        ("+", "0.0001", "fimo"), ("-", "0.0001", "fimo"), ("+", "1e-05", "fimo"), ("-", "1e-05", "fimo")]
    (motif,) = read_motifs(MOTIF)
    bg = (NRDB_DNA + NRDB_DNA[::-1]) / 2
    pwm = pwm_from_motif(motif, bg, 0.1)
    offset = math.floor(pwm.min())
    scale = math.floor(1000 / (pwm.max() - offset))
    q = np.floor((pwm - offset) * scale + 0.5)
    mm = MITM(q, bg)                     # integer scores: exact sums whatever the order
    attained = np.unique(np.add.outer(np.unique(mm.a.s), np.unique(mm.b.s)))
    for r in rows:
        p, thr = float(r["requested_pvalue"]), float(r["threshold"])
        k = int(round((thr - 15 * offset) * scale))        # the weakest hit's integer score
        assert thr == pytest.approx(k / scale + 15 * offset, abs=1e-8)
        assert k in attained and float(r["pvalue"]) == pytest.approx(mm.pv(k - 0.5), rel=1e-5)
        assert float(r["pvalue"]) <= p
        assert mm.pv(attained[attained < k][-1] - 0.5) > p


def test_like_fimo_resume_refuses_another_mode(store, tmp_path, capsys):
    """The mode and the strands are run parameters: --resume with others is refused (exit 2, one line)."""
    out = tmp_path / "hits"
    scan(store, out, "--like", "fimo")
    for extra, what in ((["--resume"], "background, background_spec, like"),
                        (["--resume", "--like", "fimo", "--strand", "+"], "background, strands")):
        capsys.readouterr()
        assert main(["scan", store.path, MOTIF, "--out", str(out), "--no-progress", *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"different parameters ({what})" in err[0]
    assert main(["scan", store.path, MOTIF, "--out", str(out), "--no-progress", "--resume", "--like", "fimo"]) == 0


@pytest.mark.parametrize("extra,msg", [
    (["--like", "fimo", "--strand", "-"], "--strand both or +"),
])
def test_like_fimo_bad_arguments(store, tmp_path, capsys, extra, msg):
    assert main(["scan", store.path, MOTIF, "--out", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]
    assert not (tmp_path / "o").exists()


def test_like_fimo_refuses_logodds_only_motif(store, tmp_path, capsys):
    f = tmp_path / "lo.meme"
    f.write_text("MEME version 4\n\nALPHABET= ACGT\n\nMOTIF M1\nlog-odds matrix: alength= 4 w= 2\n"
                 " 100 -100 -100 -100\n -100 100 -100 -100\n")
    assert main(["scan", store.path, str(f), "--out", str(tmp_path / "o"), "--like", "fimo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lo.meme" in err[0] and "only a log-odds matrix" in err[0]


# ------------------------------------------------------------------------------------------------
# The default mode: exact scores and p-values; how and why it differs from FIMO


def _window_scores(seqs, pwm):
    """Naive float64 scores of every window on both strands: {(seq, start0, strand): score}."""
    rc = reverse_complement(pwm)
    m = pwm.shape[0]
    out = {}
    for name, s in seqs.items():
        for i in range(len(s) - m + 1):
            w = s[i:i + m]
            if any(c not in CODE for c in w):
                continue
            for strand, mat in (("+", pwm), ("-", rc)):
                acc = 0.0
                for j, c in enumerate(w):
                    acc += float(mat[j][CODE[c]])
                out[(name, i, strand)] = acc
    return out


def test_default_mode_hits_are_the_exact_windows(store, seqs, tmp_path):
    """Default settings (uniform background, exact scores): the hits are exactly the windows whose exact
    p-value (naive float64 score, all 4^15 words enumerated) is <= 1e-4, with that p-value to 0.1 %.
    FIMO's weakest hit (CTTGACCTTGTCGAG, FIMO p = 9.32e-05 under NRDB) has an exact p-value of 1.09e-4 under the
    uniform background, so the default does not report it: the background, not the lattice, makes it differ."""
    hits = scan(store, tmp_path / "hits")
    (motif,) = read_motifs(MOTIF)
    bg = np.full(4, 0.25)
    pwm = pwm_from_motif(motif, bg, 0.1)
    mm = {"+": MITM(pwm, bg), "-": MITM(reverse_complement(pwm), bg)}
    scores = _window_scores(seqs, pwm)
    expected = {}
    for key, s in sorted(scores.items(), key=lambda kv: -kv[1]):
        p = mm[key[2]].pv(s - 1e-9)
        if p > 1e-3:                     # p-values rise as scores fall: nothing below can be a hit
            break
        if p <= 1e-4:
            expected[key] = (s, p)
    got = {(h["chrom"], h["start"], h["strand"]): (h["score"], h["pvalue"]) for h in hits}
    assert set(got) == set(expected) and len(got) == 5
    for k, (s, p) in expected.items():
        assert got[k][0] == s and got[k][1] == pytest.approx(p, rel=1e-3)
    weakest = next(r for r in fimo_rows("both") if r["matched_sequence"] == "CTTGACCTTGTCGAG")
    key = (weakest["sequence_name"], int(weakest["start"]) - 1, weakest["strand"])
    assert key not in got and mm["-"].pv(scores[key] - 1e-9) == pytest.approx(1.09e-4, rel=5e-3)


def test_default_mode_under_fimo_background_bounds_fimo(store, seqs, tmp_path):
    """With FIMO's background given explicitly, the default mode reports every FIMO hit; FIMO's lattice score is
    within w*0.5/scale bits of the exact score, and FIMO's p-value lies between the exact p-values at the exact
    score +- w/scale (docs/formats.md, "FIMO")."""
    from pipeline.distribution.fimo import fimo_background  # noqa: PLC0415

    bg = fimo_background(NRDB_DNA, both_strands=True)
    hits = scan(store, tmp_path / "hits", "--background", ",".join(repr(float(x)) for x in bg))
    got = {(h["chrom"], h["start"], h["strand"]): (h["score"], h["pvalue"]) for h in hits}
    (motif,) = read_motifs(MOTIF)
    pwm = pwm_from_motif(motif, bg, 0.1)
    offset = math.floor(pwm.min())
    scale = math.floor(1000 / (pwm.max() - offset))
    assert scale == 140
    w = pwm.shape[0]
    mm = {"+": MITM(pwm, bg), "-": MITM(reverse_complement(pwm), bg)}
    fimo = fimo_rows("both")
    devs = []
    for r in fimo:
        key = (r["sequence_name"], int(r["start"]) - 1, r["strand"])
        s, p = got[key]
        f_score, f_p = float(r["score"]), float(r["p-value"])
        assert abs(s - f_score) <= w * 0.5 / scale
        lo, hi = mm[r["strand"]].pv(s + w / scale), mm[r["strand"]].pv(s - w / scale)
        assert lo <= f_p * (1 + 5e-3) and f_p * (1 - 5e-3) <= hi       # FIMO prints 3 digits
        devs.append(abs(p / f_p - 1))
    assert len(got) == len(fimo) == 6
    assert 0.2 < max(devs) < 0.27     # the lattice moves FIMO's 12.5571 hit: exact 4.83e-6, FIMO 6.57e-6


def test_one_strand_scans_are_the_halves_of_both(store, tmp_path):
    """--strand + and --strand - (default mode): each the rows of its strand of the both-strands scan."""
    key = lambda h: (h["chrom"], h["start"], h["strand"], h["score"], h["pvalue"])     # noqa: E731
    both = sorted(map(key, scan(store, tmp_path / "both", "--pvalue", "1e-3")))
    plus = sorted(map(key, scan(store, tmp_path / "plus", "--pvalue", "1e-3", "--strand", "+")))
    minus = sorted(map(key, scan(store, tmp_path / "minus", "--pvalue", "1e-3", "--strand", "-")))
    assert plus and minus and {h[2] for h in plus} == {"+"} and {h[2] for h in minus} == {"-"}
    assert sorted(plus + minus) == both


def test_like_fimo_many_motifs_equal_integer_reference(tmp_path, chrx_slice):
    """12 JASPAR matrices (counts) on 60 kb of real chrX with N runs and IUPAC codes, both strands, p <= 1e-3: the
    hits are exactly the windows without N whose integer lattice sum S (NumPy, exact integers) has pv[S] <= p,
    with score S/scale + m*offset (FIMO's double) and p-value pv[S]."""
    from pipeline.distribution.fimo import fimo_background, fimo_matrix  # noqa: PLC0415

    seq = list(chrx_slice[:60_000])
    seq[20_000:20_300] = "N" * 300
    for i in range(7, 60_000, 4999):
        seq[i] = "R"
    seq = "".join(seq)
    (tmp_path / "g.fa").write_text(">c1\n" + seq + "\n")
    store = ingest(tmp_path / "g.fa", tmp_path / "g.zarr", block_size=16_384, halo=40)
    motifs_file = str(DATA / "jaspar2024_subset.jaspar")
    assert main(["scan", store.path, motifs_file, "--out", str(tmp_path / "hits"), "--no-progress", "--like", "fimo",
                 "--pvalue", "1e-3", "--background", "uniform"]) == 0
    t = read_hits(str(tmp_path / "hits"))
    got = {(r["motif_id"], r["start"], r["strand"]): (r["score"], r["pvalue"]) for r in t.to_pylist()}
    bg = fimo_background(np.full(4, 0.25), both_strands=True)
    codes = np.array([CODE.get(c, 4) for c in seq.upper()])
    want = {}
    for motif in read_motifs(motifs_file):
        lat = fimo_matrix(motif, bg, 0.1)
        m = lat.length
        pv = lattice_pvalues(lat.q, bg)
        win = codes[np.arange(len(seq) - m + 1)[:, None] + np.arange(m)]
        clean = (win < 4).all(axis=1)
        for strand, q in (("+", lat.q), ("-", lat.q[::-1, ::-1])):
            qq = np.vstack([q.T, np.zeros((1, m), np.int64)])          # row 4 (N) never used: windows dropped
            s = qq[win, np.arange(m)].sum(axis=1)
            for i in np.flatnonzero(clean & (pv[s] <= 1e-3)):
                want[(motif.id, int(i), strand)] = (int(s[i]) / lat.scale + m * lat.offset, float(pv[s[i]]))
    assert len(want) > 200 and set(got) == set(want)
    for k, (score, p) in want.items():
        assert got[k][0] == score and got[k][1] == pytest.approx(p, rel=1e-14)
