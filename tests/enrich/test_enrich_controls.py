"""pipeline.enrich.controls: GC-matched genomic controls on a real genome slice (human chrX 20-22 Mb held in
memory), shuffled controls as FASTA, a genome store read through the same interface."""
import gzip
from pathlib import Path

import numpy as np
import pytest

from pipeline.discover.inputs import read_sequences
from pipeline.enrich.controls import (ControlError, composition, gc_bins, genome_access, in_memory, read_regions,
                                      sample_genomic_controls, shuffled_controls, write_bed, write_fasta)
from pipeline.io.genome import encode
from workers.enrich.shuffle import doublet_counts

stats = pytest.importorskip("scipy.stats")

SLICE = Path(__file__).resolve().parents[2] / "pipeline" / "data" / "hs37_chrX_20-22Mb.fa.gz"


@pytest.fixture(scope="module")
def genome():
    """The slice as two records, the second with N runs (a 30 kb gap and short runs) put in."""
    text = gzip.open(SLICE, "rt").read().split("\n", 1)[1].replace("\n", "")
    codes = encode(text)
    a, b = codes[:1_200_000].copy(), codes[1_200_000:].copy()
    b[300_000:330_000] = 4
    for s in range(5_000, 800_000, 40_000):
        b[s:s + 7] = 4
    return in_memory(["chrXa", "chrXb"], [a, b], "hs37_chrX_20-22Mb")


@pytest.fixture(scope="module")
def targets(genome):
    """300 regions of 150-600 bases leaning to GC-rich ones, as peaks do."""
    rng = np.random.default_rng(0)
    n = 3000
    rec = rng.integers(0, 2, n)
    L = rng.integers(150, 601, n)
    st = rng.integers(0, genome.lengths[rec] - L)
    codes, off = read_regions(genome, rec, st, st + L)
    gc, nn = composition(codes, off)
    w = np.where(nn == 0, np.exp(12 * gc), 1e-300)
    pick = []
    for i in rng.choice(n, n, replace=False, p=w / w.sum())[:1500]:   # peaks do not overlap each other
        if len(pick) < 300 and not _overlaps(rec[pick + [i]], st[pick + [i]], st[pick + [i]] + L[pick + [i]]):
            pick.append(i)
    return rec[pick], st[pick], st[pick] + L[pick], gc[pick]


def _overlaps(rec, s, e):
    """Whether any two intervals of one record overlap (records laid end to end, 10^9 apart)."""
    s, e = np.asarray(s) + np.asarray(rec) * 10**9, np.asarray(e) + np.asarray(rec) * 10**9
    o = np.argsort(s, kind="stable")
    return bool((s[o][1:] < np.maximum.accumulate(e[o])[:-1]).any())


def test_read_regions_and_composition(genome):
    rec, st, en = np.array([1, 0, 1, 1]), np.array([299_990, 10, 5_000, 100]), np.array([300_020, 500, 5_010, 150])
    codes, off = read_regions(genome, rec, st, en, span=4096)
    for i in range(4):
        want = genome.fetch(rec[i], st[i], en[i])
        assert np.array_equal(codes[off[i]:off[i + 1]], want)
        acgt = want[want < 4]
        gc, n = composition(codes[off[i]:off[i + 1]], np.array([0, en[i] - st[i]]))
        assert n[0] == (want == 4).sum()
        assert gc[0] == pytest.approx(np.isin(acgt, (1, 2)).mean() if acgt.size else 0.0)
    with pytest.raises(ControlError, match="outside its record"):
        read_regions(genome, [0], [1_199_990], [1_200_010])


def test_controls_match_targets(genome, targets):
    rec, st, en, gc = targets
    K = 2
    c = sample_genomic_controls(genome, en - st, gc, copies=K, exclude=(rec, st, en), seed=3, chunk=1 << 18)
    assert c.target.size == K * rec.size
    assert np.array_equal(np.bincount(c.target, minlength=rec.size), np.full(rec.size, K))
    assert np.array_equal(c.end - c.start, (en - st)[c.target])          # each control has its target's length
    codes, off = read_regions(genome, c.record, c.start, c.end)
    cgc, cn = composition(codes, off)
    assert cn.sum() == 0                                                 # no N
    np.testing.assert_allclose(cgc, c.gc)
    assert not _overlaps(np.r_[rec, c.record], np.r_[st, c.start], np.r_[en, c.end])   # none overlap
    same_bin = gc_bins(cgc) == gc_bins(gc[c.target])
    assert same_bin.sum() == c.target.size - c.widened and c.widened < 0.1 * c.target.size
    # the GC distributions agree ...
    assert stats.ks_2samp(np.repeat(gc, K), cgc).pvalue > 0.01
    bins = np.arange(0, 1.0001, 0.05)
    t_hist, _ = np.histogram(gc, bins)
    c_hist, _ = np.histogram(cgc, bins)
    keep = (t_hist + c_hist) > 0
    assert stats.chi2_contingency(np.array([t_hist[keep], c_hist[keep]])).pvalue > 0.01
    # ... where random windows of the genome do not: the check can fail
    rng = np.random.default_rng(1)
    rr = rng.integers(0, 2, 600)
    rs = rng.integers(0, 800_000, 600)
    rcodes, roff = read_regions(genome, rr, rs, rs + (en - st)[c.target])
    assert stats.ks_2samp(np.repeat(gc, K), composition(rcodes, roff)[0]).pvalue < 1e-6


def test_controls_reproducible(genome, targets):
    rec, st, en, gc = targets
    args = (genome, en - st, gc)
    a = sample_genomic_controls(*args, exclude=(rec, st, en), seed=7, chunk=1 << 18)
    b = sample_genomic_controls(*args, exclude=(rec, st, en), seed=7, chunk=1 << 18)
    c = sample_genomic_controls(*args, exclude=(rec, st, en), seed=8, chunk=1 << 18)
    assert np.array_equal(a.start, b.start) and np.array_equal(a.record, b.record)
    assert not np.array_equal(a.start, c.start)


def test_genome_too_small(genome):
    tiny = in_memory(["t"], [genome.fetch(0, 0, 5000)])
    with pytest.raises(ControlError, match="placed .* of 40 .* too small"):
        sample_genomic_controls(tiny, np.full(20, 400), np.full(20, 0.4), copies=2, seed=1)
    with pytest.raises(ControlError, match="longer than every record"):
        sample_genomic_controls(tiny, [6000], [0.4])


def test_bed_written(tmp_path, genome, targets):
    rec, st, en, gc = targets
    c = sample_genomic_controls(genome, (en - st)[:5], gc[:5], copies=3, exclude=(rec, st, en), seed=1,
                                chunk=1 << 18)
    names = [f"peak{i}" for i in range(5)]
    write_bed(tmp_path / "control.bed", genome, c, names)
    lines = [ln.split("\t") for ln in (tmp_path / "control.bed").read_text().splitlines()]
    assert [ln[3] for ln in lines] == [f"peak{i}|ctl{k}" for i in range(5) for k in (1, 2, 3)]
    for (chrom, s, e, _), r, cs, ce in zip(lines, c.record, c.start, c.end):
        assert (chrom, int(s), int(e)) == (genome.names[r], cs, ce)


def test_genome_store_through_the_interface(tmp_path, genome):
    from pipeline.io.genome import GenomeStore, ingest

    fa = tmp_path / "g.fa"
    seqs = {"s1": genome.fetch(0, 0, 70_000), "s2": genome.fetch(1, 290_000, 340_000)}
    fa.write_text("".join(f">{k}\n" + "".join("ACGTN"[x] for x in v) + "\n" for k, v in seqs.items()))
    store = GenomeStore(ingest(fa, tmp_path / "g.zarr", block_size=1 << 14).path)
    g = genome_access(store)
    assert g.names == ["s1", "s2"] and g.lengths.tolist() == [70_000, 50_000]
    assert np.array_equal(g.fetch(1, 5_000, 45_000), seqs["s2"][5_000:45_000])
    c = sample_genomic_controls(g, [300] * 10, [0.4] * 10, seed=2, chunk=1 << 14)
    codes, off = read_regions(g, c.record, c.start, c.end)
    assert composition(codes, off)[1].sum() == 0


def test_shuffled_controls_fasta(tmp_path):
    rng = np.random.default_rng(3)
    off = np.array([0, 120, 120 + 250, 120 + 250 + 90])
    codes = rng.integers(0, 5, off[-1]).astype(np.uint8)
    names, out, oo = shuffled_controls(["a", "b", "c"], codes, off, copies=2, seed=4)
    assert names == ["a|shuf1", "a|shuf2", "b|shuf1", "b|shuf2", "c|shuf1", "c|shuf2"]
    assert (doublet_counts(out, oo) == np.repeat(doublet_counts(codes, off), 2, axis=0)).all()
    write_fasta(tmp_path / "control.fa", names, out, oo)
    back = read_sequences(tmp_path / "control.fa")
    assert back.names == names
    for i in range(6):
        assert np.array_equal(back.codes[i, :back.lengths[i]], out[oo[i]:oo[i + 1]])


def test_shuffled_controls_in_batches_equal_one_call():
    """The shuffles made on threads, in batches of records, are those of one call over every record."""
    from workers.enrich.shuffle import shuffle_dinucleotides

    rng = np.random.default_rng(8)
    off = np.r_[0, np.cumsum(rng.integers(0, 60, 5000))]
    codes = rng.integers(0, 5, off[-1]).astype(np.uint8)
    _, out, oo = shuffled_controls([str(i) for i in range(5000)], codes, off, copies=2, seed=11)
    one, one_off = shuffle_dinucleotides(codes, off, 2, 11)
    assert np.array_equal(out, one) and np.array_equal(oo, one_off)
