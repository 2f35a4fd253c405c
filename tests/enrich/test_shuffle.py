"""workers.enrich.shuffle: exact doublet counts, uniform over Eulerian trails (enumerated), reproducible
streams."""
from collections import Counter

import numpy as np
import pytest

from workers.enrich.shuffle import doublet_counts, shuffle_dinucleotides

stats = pytest.importorskip("scipy.stats")


def _records(rng, n, lo, hi, n_rate=0.0):
    lens = rng.integers(lo, hi, size=n)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    codes = rng.integers(0, 4, size=int(off[-1])).astype(np.uint8)
    codes[rng.random(codes.size) < n_rate] = 4
    return codes, off


def _trails(seq):
    """Every sequence with the doublet counts of ``seq`` starting with its first letter (depth-first)."""
    left = Counter(zip(seq[:-1], seq[1:]))
    out, path = [], [seq[0]]

    def walk():
        if len(path) == len(seq):
            out.append(tuple(path))
            return
        for y in range(5):
            if left[(path[-1], y)]:
                left[(path[-1], y)] -= 1
                path.append(y)
                walk()
                path.pop()
                left[(path[-1], y)] += 1

    walk()
    return out


def test_doublets_first_and_last_letters_kept():
    rng = np.random.default_rng(11)
    codes, off = _records(rng, 300, 0, 60, n_rate=0.1)      # lengths 0, 1, 2 included; N runs
    codes[off[7]:off[7] + 5] = 4
    K = 4
    out, oo = shuffle_dinucleotides(codes, off, K, seed=5)
    assert oo[-1] == K * codes.size
    want = doublet_counts(codes, off)
    got = doublet_counts(out, oo).reshape(len(off) - 1, K, 5, 5)
    assert (got == want[:, None]).all()
    for i in range(len(off) - 1):
        a = codes[off[i]:off[i + 1]]
        for k in range(K):
            b = out[oo[i * K + k]:oo[i * K + k + 1]]
            assert b.size == a.size
            if a.size:
                assert b[0] == a[0] and b[-1] == a[-1]
    # the shuffles do move letters
    assert not np.array_equal(out[:codes.size], codes)


def test_doublet_counts_against_plain_loop():
    rng = np.random.default_rng(2)
    codes, off = _records(rng, 20, 0, 30, n_rate=0.2)
    got = doublet_counts(codes, off)
    for i in range(20):
        s = codes[off[i]:off[i + 1]]
        want = np.zeros((5, 5), int)
        for x, y in zip(s[:-1], s[1:]):
            want[x, y] += 1
        assert (got[i] == want).all()


@pytest.mark.parametrize("text", ["ACGTTGCAACG", "AACGNNTACGA", "ACAGCATGCANA", "GATTACAGATTACA"])
def test_uniform_over_eulerian_trails(text):
    seq = ["ACGTN".index(c) for c in text]
    trails = _trails(seq)
    assert len(trails) == len(set(trails)) > 1
    K = 300 * len(trails)
    out, _ = shuffle_dinucleotides(np.array(seq, np.uint8), np.array([0, len(seq)]), K, seed=3)
    seen = Counter(tuple(out[i * len(seq):(i + 1) * len(seq)]) for i in range(K))
    assert set(seen) <= set(trails)                  # every shuffle is a trail
    obs = np.array([seen[t] for t in trails])
    assert stats.chisquare(obs).pvalue > 1e-3
    # the test has the power to see a 20 % tilt over half the trails at this sample size
    tilt = np.where(np.arange(len(trails)) % 2 == 0, 1.2, 1.0)
    biased = np.random.default_rng(0).multinomial(K, tilt / tilt.sum())
    assert stats.chisquare(biased).pvalue < 1e-3


def test_reproducible_and_independent_of_batching():
    rng = np.random.default_rng(4)
    codes, off = _records(rng, 40, 5, 80, n_rate=0.05)
    a, ao = shuffle_dinucleotides(codes, off, 3, seed=9)
    b, _ = shuffle_dinucleotides(codes, off, 3, seed=9)
    assert np.array_equal(a, b)
    c, _ = shuffle_dinucleotides(codes, off, 3, seed=10)
    assert not np.array_equal(a, c)
    # records 25..39 alone, with their numbers in the whole set: the same shuffles
    part = codes[off[25]:]
    poff = off[25:] - off[25]
    p, po = shuffle_dinucleotides(part, poff, 3, seed=9, index=np.arange(25, 40))
    assert np.array_equal(p, a[ao[25 * 3]:])
    # copy k does not depend on how many copies are asked for
    d, do = shuffle_dinucleotides(codes, off, 1, seed=9)
    for i in range(40):
        assert np.array_equal(d[do[i]:do[i + 1]], a[ao[3 * i]:ao[3 * i + 1]])


def test_bad_input():
    with pytest.raises(ValueError, match="0-4"):
        shuffle_dinucleotides(np.array([0, 7], np.uint8), np.array([0, 2]))
    with pytest.raises(ValueError, match="offsets"):
        shuffle_dinucleotides(np.array([0, 1], np.uint8), np.array([0, 3]))
    with pytest.raises(ValueError, match="copies"):
        shuffle_dinucleotides(np.array([0, 1], np.uint8), np.array([0, 2]), copies=0)


@pytest.mark.parametrize("width", [60, 7, 1])
def test_control_fasta_lines(tmp_path, width):
    """control.fa from codes: each record's header, then its letters ``width`` a line (N for code 4), empty records
    a header alone, records exactly a line long and longer than the layout's chunk: as a plain loop writes them,
    and read back by the FASTA reader."""
    from pipeline.enrich.controls import write_fasta
    from pipeline.enrich.inputs import read_sequences

    rng = np.random.default_rng(width)
    lens = rng.integers(0, 300, 400)
    lens[[3, 9]], lens[17], lens[-1] = 0, width * 3, (1 << 22) + 5
    offsets = np.r_[0, np.cumsum(lens)]
    codes = rng.integers(0, 5, int(offsets[-1])).astype(np.uint8)
    names = [f"peak{i}|shuf{i % 2}" for i in range(lens.size)]
    write_fasta(tmp_path / "c.fa", names, codes, offsets, width)
    letters = np.frombuffer(b"ACGTN", np.uint8)[codes].tobytes()
    want = []
    for i, n in enumerate(names):
        seq = letters[offsets[i]:offsets[i + 1]]
        want.append(b">" + n.encode() + b"\n" + b"".join(seq[j:j + width] + b"\n" for j in range(0, len(seq), width)))
    assert (tmp_path / "c.fa").read_bytes() == b"".join(want)
    back = read_sequences(str(tmp_path / "c.fa"), None, "controls")
    assert list(back.names) == names and np.diff(back.offsets).tolist() == lens.tolist()


def test_load_kernels_loads_the_production_signatures(tmp_path):
    """``enrich_inputs.load_kernels`` (run by the CLI beside reading its inputs) leaves the shuffle and FASTA layout
    kernels compiled for the types the controls step then calls them with (no second load there)."""
    from pipeline.enrich.controls import write_fasta
    from pipeline.enrich.inputs import load_kernels
    from workers.enrich.fasta_numba import fasta_layout
    from workers.enrich.shuffle_numba import shuffle_records

    load_kernels()
    before = (len(shuffle_records.signatures), len(fasta_layout.signatures))
    codes = np.random.default_rng(0).integers(0, 5, 500).astype(np.uint8)
    offsets = np.array([0, 200, 500], np.int64)
    shuffle_dinucleotides(codes, offsets, 2, 7)
    write_fasta(tmp_path / "c.fa", ["a", "b"], codes, offsets)
    assert before[0] >= 1 and before[1] >= 1
    assert (len(shuffle_records.signatures), len(fasta_layout.signatures)) == before
