"""Discovery's inputs: the sequences (FASTA, checked, in one code array with offsets; windows without N) and
``DiscoverSettings`` (algorithm, model, width, trials and chains, every default and its check)."""
from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline import MotifgridError


ALGORITHMS = ("gibbs", "projection", "both")


MODELS = ("oops", "zoops")


class DiscoverError(MotifgridError, RuntimeError):
    """Bad discovery input or settings; ``str(e)`` is one line for the user."""


@dataclass
class SequenceSet:
    """Sequences as codes ``(T, Lmax)`` uint8 padded with 4, their names and lengths."""
    source: str
    checksum: str
    names: list
    codes: np.ndarray
    lengths: np.ndarray

    @property
    def T(self) -> int:
        return len(self.names)


_ALLOWED = set(b"ACGTUNRYSWKMBDHVacgtunryswkmbdhv-.*")


def read_sequences(path: str | os.PathLike) -> SequenceSet:
    """Read a FASTA file (plain or gzip) of DNA sequences; strict, errors name the file, line and record.

    Letters other than A C G T (N, IUPAC codes, ``-``) become code 4 and no window holding one is used.
    """
    from pipeline.io.genome import encode  # noqa: PLC0415

    src = os.fspath(path)
    p = Path(src)
    if not p.exists():
        raise DiscoverError(f"{src}: no such file")
    if p.is_dir():
        raise DiscoverError(f"{src}: is a directory, not a FASTA file")
    data = p.read_bytes()
    checksum = "sha256:" + hashlib.sha256(data).hexdigest()
    if data[:2] == b"\x1f\x8b":
        if data[12:14] == b"BC":
            from pipeline.io.fasta import check_bgzf_end  # noqa: PLC0415

            check_bgzf_end(src, error=DiscoverError)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DiscoverError(f"{src}: corrupt gzip data ({e})") from None
    if b"\x00" in data[:65536]:
        raise DiscoverError(f"{src}: binary file, not FASTA")
    names, seqs, cur, header_line, seen = [], [], None, 0, {}
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    for ln, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s.startswith(b">"):
            if cur is not None and not cur:
                raise DiscoverError(f"{src} line {header_line}: record {names[-1]!r} has no sequence")
            words = s[1:].split()
            if not words:
                raise DiscoverError(f"{src} line {ln}: empty FASTA header")
            name = words[0].decode("utf-8", "replace")
            if name in seen:        # the sites name their sequence: two of one name could not be told apart
                raise DiscoverError(f"{src} line {ln}: duplicate record name {name!r} (records {seen[name]:,} and "
                                    f"{len(names) + 1:,}); give each sequence its own name")
            seen[name] = len(names) + 1
            names.append(name)
            cur = []
            seqs.append(cur)
            header_line = ln
            continue
        if s.startswith(b";"):
            continue
        if cur is None:
            raise DiscoverError(f"{src} line {ln}: sequence before the first '>' header (not FASTA)")
        bad = set(s) - _ALLOWED
        if bad:
            ch = chr(min(bad))
            raise DiscoverError(f"{src} line {ln}: record {names[-1]!r} has the character {ch!r}, "
                                "not a DNA letter")
        cur.append(s)
    if cur is not None and not cur:
        raise DiscoverError(f"{src} line {header_line}: record {names[-1]!r} has no sequence")
    if not names:
        raise DiscoverError(f"{src}: no FASTA records")
    joined = [b"".join(c) for c in seqs]
    lengths = np.array([len(c) for c in joined], np.int64)
    codes = np.full((len(joined), int(lengths.max())), 4, np.uint8)
    for i, c in enumerate(joined):
        codes[i, :len(c)] = encode(c)
    return SequenceSet(source=src, checksum=checksum, names=names, codes=codes, lengths=lengths)


def clean_windows(codes: np.ndarray, width: int, rows: int = 4096) -> np.ndarray:
    """Windows of ``width`` letters without code 4 (N, IUPAC, padding) in each sequence, the only ones discovery
    uses.

    Parameters
    ----------
    codes : numpy.ndarray, shape (T, Lmax), uint8
        Padded with code 4 (:class:`SequenceSet`).
    width : int
    rows : int
        Sequences counted at a time (bounds the prefix sums' memory).

    Returns
    -------
    numpy.ndarray, shape (T,), int64
    """
    T, L = codes.shape
    out = np.zeros(T, np.int64)
    if L < width:
        return out
    for a in range(0, T, rows):
        n = np.zeros((min(rows, T - a), L + 1), np.int32)
        np.cumsum(codes[a:a + rows] == 4, axis=1, out=n[:, 1:])
        out[a:a + rows] = (n[:, width:] == n[:, :-width]).sum(axis=1)
    return out


@dataclass
class DiscoverSettings:
    width: int
    algorithm: str = "both"
    mutations: int | None = None          # d of an (l, d) problem: (l, d) ranking and PROJECTION's k
    model: str = "zoops"
    both_strands: bool = False
    motifs: int = 1
    seed: int = 0
    trials: int | None = None             # PROJECTION trials m (default: Buhler & Tompa's formula)
    projection_k: int | None = None
    bucket_threshold: int | None = None
    chains: int | None = None             # Gibbs chains (default by device)
    update: str = "best"                  # Gibbs update: best (deterministic) | sample
    max_sweeps: int = 20
    trials_per_task: int | None = None    # default 32 on CPU; on GPUs all trials split evenly over the workers
    chains_per_task: int | None = None    # default 2048 on CPU; on GPUs all chains split evenly over the workers
    em_iters: int = 5
    em_keep: int | None = None            # models per PROJECTION task that go on after the screen (default
    em_keep_per_trial: int = 128          # 256 on CPU; on GPUs max(4096, em_keep_per_trial x trials of the task))
    screen_sequences: int = 64            # the screen looks at this many sequences of larger sets
    return_per_task: int = 16             # distinct models each task sends back
    refine_top: int = 32                  # models of the merge that get the (l, d) local search
    polish_iters: int = 20
    ld_rank: bool = True                  # False: rank (l, d) problems by likelihood too (the papers' way)
    max_buckets: int = 1000
    device_chains: dict = field(default_factory=lambda: {"cpu": 4096, "gpu": 1048576})

    def check(self, seqs: SequenceSet) -> None:
        if self.algorithm not in ALGORITHMS:
            raise DiscoverError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.model not in MODELS:
            raise DiscoverError(f"--model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.update not in ("best", "sample"):
            raise DiscoverError(f"--update must be best or sample, got {self.update!r}")
        if self.width < 2:
            raise DiscoverError(f"--width must be >= 2, got {self.width}")
        if self.mutations is not None and not 0 <= self.mutations < self.width:
            raise DiscoverError(f"--mutations must be in [0, width), got {self.mutations} for width {self.width}")
        if self.projection_k is not None and not 1 <= self.projection_k <= min(self.width, 15):
            raise DiscoverError(f"--projection-k must be in [1, min(width, 15)], got {self.projection_k}")
        if seqs.T < 2:
            raise DiscoverError(f"{seqs.source}: motif discovery needs at least 2 sequences, got {seqs.T}")
        usable = int((seqs.lengths >= self.width).sum())
        if usable < 2:
            raise DiscoverError(f"{seqs.source}: fewer than 2 sequences are at least --width {self.width} long "
                                f"(longest {int(seqs.lengths.max())})")
        clean = clean_windows(seqs.codes, self.width)     # an all-N set would otherwise end with no motif, exit 0
        if int((clean > 0).sum()) < 2:
            raise DiscoverError(f"{seqs.source}: fewer than 2 sequences have a --width {self.width} window without N "
                                f"or another non-ACGT letter ({int((clean > 0).sum())} do; {int(clean.sum()):,} "
                                "such windows in all)")
        if self.motifs < 1:
            raise DiscoverError(f"--motifs must be >= 1, got {self.motifs}")

    @property
    def d_for_projection(self) -> int:
        """d used to choose PROJECTION's k (the given --mutations, else width/4 for real data)."""
        return self.mutations if self.mutations is not None else max(1, round(self.width / 4))
