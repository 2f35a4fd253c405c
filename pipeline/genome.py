"""FASTA → Zarr genome store, and its reader.

Layout (a Zarr v3 group, see ``docs/formats.md``)::

    STORE/zarr.json              group attributes: format and version (pipeline.schema.STORE_FORMAT_VERSION),
                                 source and checksum, B, H, base counts, background, contigs
    STORE/c000000/               one uint8 array per contig, shape (n_blocks, B + H), chunk (1, B + H)
    ...

Row ``b`` of a contig's array holds the codes of positions ``[b*B, b*B + B + H)``, padded with 4 past
the contig end.  Codes: A=0 C=1 G=2 T=3, anything else (N, IUPAC, gaps) = 4.  Soft-masking is dropped.
A hit belongs to the block whose core ``[b*B, (b+1)*B)`` holds its start, so blocks need no
deduplication; the halo H must be at least the longest motif length − 1 (checked at scan time).

Ingest reads one block at a time through pyfaidx (plain, gzip or bgzip FASTA), so memory stays at a
few blocks whatever the chromosome length.  The index pyfaidx reads by is built by each ingest in its own
temporary folder (beside the new store), never taken from beside the input, and checked against the
records and bases that the checksum pass counts; compressed inputs are decompressed once into that folder
(it needs room for the uncompressed FASTA).
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline import MotifgridError
from pipeline import storage
from pipeline.schema import STORE_FORMAT_VERSION

DEFAULT_BLOCK_SIZE = 1 << 20   # 1 Mi positions per block core
DEFAULT_HALO = 127             # enough for motifs up to 128 columns

# byte → code lookup: ACGT (either case) → 0..3, everything else → 4
_CODE = np.full(256, 4, dtype=np.uint8)
for _i, _c in enumerate(b"ACGT"):
    _CODE[_c] = _i
    _CODE[_c + 32] = _i
LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
# bytes a nucleotide sequence may hold: IUPAC codes (U as T, X as N), gaps; anything else is refused at ingest
_NUCLEOTIDE = np.zeros(256, dtype=bool)
for _c in b"ACGTUNRYSWKMBDHVX":
    _NUCLEOTIDE[_c] = _NUCLEOTIDE[_c + 32] = True
_NUCLEOTIDE[list(b"-.")] = True
MAX_NAME_BYTES = 240   # a contig name becomes one percent-encoded folder name (chrom=...) of a hits dataset


class GenomeError(MotifgridError, ValueError):
    """Bad genome input or store; ``str(e)`` is one line naming the file and the problem."""


def encode(seq: bytes | str) -> np.ndarray:
    """Sequence text → uint8 codes (A=0 C=1 G=2 T=3, else 4)."""
    if isinstance(seq, str):
        seq = seq.encode("ascii", "replace")
    return _CODE[np.frombuffer(seq, dtype=np.uint8)]


def decode(codes: np.ndarray) -> str:
    """uint8 codes → upper-case text (4 → N)."""
    return LETTERS[np.minimum(np.asarray(codes), 4)].tobytes().decode()


def file_checksum(path: str | os.PathLike, algo: str = "sha256") -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return f"{algo}:{h.hexdigest()}"


# --------------------------------------------------------------------------------------- ingest
def sniff_fasta(path: Path) -> str:
    """Return 'plain', 'gzip' or 'bgzip'; raise GenomeError when it is not a FASTA file."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except FileNotFoundError:
        raise GenomeError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise GenomeError(f"{path}: is a directory, not a FASTA file") from None
    except PermissionError:
        raise GenomeError(f"{path}: not readable (permission denied)") from None
    kind = "plain"
    if head[:2] == b"\x1f\x8b":
        kind = "bgzip" if len(head) >= 16 and head[12:14] == b"BC" else "gzip"
        try:
            with gzip.open(path, "rb") as f:
                first = f.read(4096)
        except (OSError, EOFError) as e:
            raise GenomeError(f"{path}: unreadable gzip data ({e})") from None
    else:
        with open(path, "rb") as f:
            first = f.read(4096)
    stripped = first.lstrip(b"\r\n\t ")
    if not stripped:
        raise GenomeError(f"{path}: empty file, no FASTA records")
    if not stripped.startswith(b">"):
        if b"\x00" in first:
            raise GenomeError(f"{path}: binary data, not a FASTA file")
        raise GenomeError(f"{path}: not a FASTA file (the first record does not start with '>')")
    return kind


class _Tally:
    """Records and sequence characters of FASTA text fed in order, in any pieces: what pyfaidx's index of the
    same text must say (a header is a line starting with '>'; a sequence character is any byte of a later line
    but a line end; text before the first header is not sequence, as pyfaidx skips it)."""

    def __init__(self):
        self.records = 0
        self.bases = 0
        self._bol = True          # the next byte starts a line
        self._in_header = False   # inside a header line (it may span pieces)

    def update(self, b: bytes) -> None:
        pos, n = 0, len(b)
        while pos < n:
            if self._in_header:
                j = b.find(b"\n", pos)
                if j < 0:
                    break
                self._in_header, pos = False, j + 1
                continue
            if b[pos] == 0x3E and (b[pos - 1] == 0x0A if pos else self._bol):     # '>' starting a line
                nxt = pos
            else:
                k = b.find(b"\n>", pos)
                nxt = -1 if k < 0 else k + 1
            end = n if nxt < 0 else nxt
            if self.records:                         # bytes.count with bounds: no copy of the piece
                self.bases += (end - pos) - b.count(b"\n", pos, end) - b.count(b"\r", pos, end)
            if nxt < 0:
                break
            self.records += 1
            self._in_header, pos = True, nxt + 1
        if n:
            self._bol = b[-1] == 0x0A


class _HashingReader(io.RawIOBase):
    """A binary file read through, hashing every byte read (gzip reads the raw bytes through it)."""

    def __init__(self, f, h):
        self._f, self._h = f, h

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._f.readinto(b)
        if n:
            self._h.update(memoryview(b)[:n])
        return n


def _read_pass(path: Path, kind: str, copy: Path | None) -> tuple[str, _Tally]:
    """One sequential read of the FASTA: the checksum of its bytes as stored, the records and sequence
    characters of its (decompressed) text, and with ``copy`` that text written there as plain text with LF
    line ends (for FASTAs not indexed in place: compressed, CRLF).  Nothing is re-wrapped."""
    h = hashlib.sha256()
    tally = _Tally()
    try:
        with open(path, "rb") as raw, (open(copy, "wb") if copy else contextlib.nullcontext()) as dst:
            src = gzip.GzipFile(fileobj=_HashingReader(raw, h)) if kind != "plain" else None
            pending_cr = False
            while True:
                chunk = src.read(1 << 22) if src else raw.read(1 << 22)
                if not chunk:
                    break
                if src is None:
                    h.update(chunk)
                tally.update(chunk)
                if dst is None:
                    continue
                if pending_cr and not chunk.startswith(b"\n"):
                    dst.write(b"\n")
                pending_cr = chunk.endswith(b"\r")
                chunk = chunk.replace(b"\r\n", b"\n")
                if pending_cr:
                    chunk = chunk[:-1]
                dst.write(chunk.replace(b"\r", b"\n"))
            if pending_cr:
                dst.write(b"\n")
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise GenomeError(f"{path}: truncated or corrupt compressed data ({e})") from None
    except OSError as e:              # a full disk or an unreadable file
        raise GenomeError(f"{path}: cannot read it{f' into {copy}' if copy else ''} ({e.strerror or e})") from None
    return f"sha256:{h.hexdigest()}", tally


def _has_crlf(path: Path) -> bool:
    with open(path, "rb") as f:
        return b"\r" in f.read(1 << 16)


def _open_fasta(path: Path, kind: str, tmpdir: Path):
    """``(pyfaidx.Fasta, checksum, tally)`` of the FASTA at ``path``.

    Its index is always built afresh in ``tmpdir``: an index beside the input (``.fai``, ``.gzi``) is never
    read (pyfaidx reuses one older than a changed FASTA with only a warning, and one that looks newer
    silently) and nothing is written into the input's folder (shared, read-only or other people's).
    Compressed and CRLF inputs are read from a plain LF copy in ``tmpdir``, written by the same pass that
    computes the checksum: pyfaidx reads plain gzip not at all, and bgzip written in full 64 KiB blocks
    (Biopython's writer) not at a record that starts on a block boundary; reading the copy is also faster
    than its BGZF reader (docs/benchmarks.md).  ``tally`` counts the records and bases of the text, for
    :func:`_check_tally`."""
    import pyfaidx  # noqa: PLC0415

    copy = tmpdir / "input.fa" if kind != "plain" or _has_crlf(path) else None
    checksum, tally = _read_pass(path, kind, copy)
    target = copy or path
    try:
        fa = pyfaidx.Fasta(str(target), as_raw=True, sequence_always_upper=False, read_long_names=False,
                           rebuild=True, duplicate_action="stop", indexname=str(tmpdir / "input.fai"))
    except UnicodeDecodeError as e:
        raise GenomeError(f"{path}: not a FASTA text file (byte 0x{e.object[e.start]:02x} is not UTF-8 text)") from None
    except ValueError as e:
        msg = str(e)
        m = re.search(r"Duplicate key \"?([^\"]+)\"?", msg)
        if m or "uplicate" in msg:
            name = m.group(1) if m else "?"
            raise GenomeError(f"{path}: duplicate contig name {name!r}") from None
        raise GenomeError(f"{path}: {msg.splitlines()[0]}") from None
    except pyfaidx.FastaIndexingError as e:
        raise GenomeError(f"{path}: cannot index FASTA: {str(e).splitlines()[0]}") from None
    except (OSError, EOFError) as e:
        raise GenomeError(f"{path}: cannot read FASTA: {e}") from None
    return fa, checksum, tally


def _check_tally(fasta, tally: _Tally, lengths: dict) -> None:
    """The index ingest reads by must describe the file: same records, same bases as one pass counted."""
    bases = sum(lengths.values())
    if tally.records != len(lengths) or tally.bases != bases:
        raise GenomeError(f"{fasta}: the file holds {tally.records:,} records and {tally.bases:,} bases but its "
                          f"index says {len(lengths):,} records and {bases:,} bases (did the file change while "
                          "ingest read it?); nothing was written, run ingest again")


@dataclass
class ContigInfo:
    name: str
    length: int
    key: str
    n_blocks: int
    n_fraction: list[float]


_ZSTD_LEVEL = 1          # the stores' chunk codec level (any level reads back the same)


def _direct_layout(meta: dict, width: int) -> bool:
    """True when an array's ``zarr.json`` says its chunks are plain files ``KEY/c/<row>/0`` holding the zstd
    compression of the row's bytes: what :func:`_write_store` writes and :meth:`GenomeStore.read_block` decodes
    itself, both without zarr's per-chunk machinery (~1-3 ms a chunk, which dominates stores of many small contigs)."""
    return (meta.get("data_type") == "uint8" and meta.get("fill_value") == 4
            and meta.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape") == [1, width]
            and meta.get("chunk_key_encoding") == {"name": "default", "configuration": {"separator": "/"}}
            and [c.get("name") for c in meta.get("codecs", [])] == ["bytes", "zstd"]
            and not meta.get("storage_transformers"))


def _write_store(store: Path, source: str, checksum: str, block_size: int, halo: int, contigs) -> "GenomeStore":
    """Write a genome store from ``contigs``: an iterable of ``(name, length, rows)`` where ``rows`` yields the
    uint8 row (length B + H, padded with 4) of each block.  Built under a temporary name beside ``store``
    and renamed when complete, so an interrupted write never leaves something that looks finished."""
    import zarr  # noqa: PLC0415
    from numcodecs import Zstd  # noqa: PLC0415
    from zarr.codecs import ZstdCodec  # noqa: PLC0415

    remote = storage.is_url(store)
    if remote:          # built locally, then uploaded with the root zarr.json (the "finished" mark) last
        tmp_store = Path(tempfile.mkdtemp(prefix=".motifgrid-store.", suffix=".partial"))
    else:
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp_store = Path(tempfile.mkdtemp(prefix=f".{store.name}.", suffix=".partial", dir=store.parent))
    width = block_size + halo
    zstd = Zstd(level=_ZSTD_LEVEL)
    try:
        root = zarr.open_group(str(tmp_store), mode="w", zarr_format=3)

        def create(key, nb, attrs):
            return root.create_array(key, shape=(nb, width), chunks=(1, width), dtype="uint8", fill_value=4,
                                     attributes=attrs, compressors=ZstdCodec(level=_ZSTD_LEVEL, checksum=False))

        counts = np.zeros(5, dtype=np.int64)
        infos: list[ContigInfo] = []
        direct = template = None
        for ci, (name, length, rows) in enumerate(contigs):
            nb = -(-length // block_size) if length else 0
            key = f"c{ci:06d}"
            attrs = {"name": name, "length": length}
            if template is None:
                arr = create(key, nb, attrs)
                with open(tmp_store / key / "zarr.json") as f:
                    template = json.load(f)
                direct = _direct_layout(template, width)      # every array is created alike: checked once
            elif direct:
                # zarr's own metadata of the first array, with this contig's shape and attributes: creating each
                # array through zarr cost ~1 ms (26,454 promoters: 2/3 of the ingest after the chunk writes)
                (tmp_store / key).mkdir()
                meta = dict(template, shape=[nb, width], attributes=attrs)
                (tmp_store / key / "zarr.json").write_text(json.dumps(meta, indent=2))
            else:
                arr = create(key, nb, attrs)
            nfrac = []
            for b, row in enumerate(rows):
                if not direct:
                    arr[b, :] = row
                elif (row != 4).any():            # as zarr: a chunk equal to the fill value is not written
                    # the chunk file zarr would write (bytes codec, then zstd), without its per-call machinery:
                    # ~3 ms a chunk through zarr, 0.2 ms here (26,454 promoters: most of a 125 s ingest)
                    d = tmp_store / key / "c" / str(b)
                    d.mkdir(parents=True, exist_ok=True)
                    (d / "0").write_bytes(zstd.encode(np.ascontiguousarray(row, dtype=np.uint8)))
                core_len = min(block_size, length - b * block_size)
                counts += np.bincount(row[:core_len], minlength=5)
                nfrac.append(float(np.count_nonzero(row == 4)) / width)
            infos.append(ContigInfo(name, length, key, nb, nfrac))
        acgt = counts[:4].astype(np.float64)
        total = acgt.sum()
        root.attrs.update({
            "format": "motifgrid-genome",
            "format_version": STORE_FORMAT_VERSION,
            "source": source,
            "source_checksum": checksum,
            "block_size": int(block_size),
            "halo": int(halo),
            "base_counts": dict(zip("ACGTN", (int(x) for x in counts))),
            "background": [float(x) for x in ((acgt / total) if total else np.full(4, 0.25))],
            "contigs": [{"name": c.name, "length": c.length, "key": c.key, "n_blocks": c.n_blocks,
                         "n_fraction": c.n_fraction} for c in infos],
        })
        if remote:
            _upload_store(tmp_store, str(store))
            shutil.rmtree(tmp_store, ignore_errors=True)
        else:
            os.replace(tmp_store, store)
    except BaseException:
        shutil.rmtree(tmp_store, ignore_errors=True)
        raise
    return GenomeStore(store)


def _upload_store(local: Path, url: str) -> None:
    """Copy a finished local store to ``url``: every chunk and array first, the root ``zarr.json`` last, so
    that a store whose upload was interrupted is not a genome store (GenomeStore refuses it)."""
    fs, root = storage.url_to_fs(url)
    lpaths, rpaths = [], []
    for dirpath, _, files in os.walk(local):
        for f in files:
            lp = os.path.join(dirpath, f)
            rel = os.path.relpath(lp, local).replace(os.sep, "/")
            if rel != "zarr.json":
                lpaths.append(lp)
                rpaths.append(f"{root.rstrip('/')}/{rel}")
    if lpaths:
        fs.put(lpaths, rpaths)
    fs.put_file(str(local / "zarr.json"), f"{root.rstrip('/')}/zarr.json")


def _check_new_store(store, block_size: int, halo: int) -> None:
    if block_size < 1 or halo < 0:
        raise GenomeError(f"block size must be ≥ 1 and halo ≥ 0 (got {block_size}, {halo})")
    if storage.is_url(store):
        if storage.listdir(store):
            raise GenomeError(f"{store}: already exists; remove it or choose another store URL")
    elif Path(store).exists():
        raise GenomeError(f"{store}: already exists; remove it or choose another store path")


def _check_records(fasta, lengths: dict) -> None:
    """Refuse FASTA files without any sequence, and contig names too long to name a folder."""
    from urllib.parse import quote  # noqa: PLC0415

    if not any(lengths.values()):
        raise GenomeError(f"{fasta}: no sequence in any of its {len(lengths)} record(s)")
    for name in lengths:
        if len(quote(name, safe="")) > MAX_NAME_BYTES:
            raise GenomeError(f"{fasta}: contig name {name[:30]!r}... is too long ({len(name)} characters; "
                              f"at most {MAX_NAME_BYTES} bytes percent-encoded)")


def ingest(fasta: str | os.PathLike, store: str | os.PathLike, block_size: int = DEFAULT_BLOCK_SIZE,
           halo: int = DEFAULT_HALO) -> "GenomeStore":
    """Ingest ``fasta`` into a new Zarr store at ``store`` and return its reader, one block in memory at a time."""
    fasta = Path(fasta)
    store = str(store) if storage.is_url(store) else Path(store)
    _check_new_store(store, block_size, halo)
    kind = sniff_fasta(fasta)
    if isinstance(store, Path):
        store.parent.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(prefix=".motifgrid-ingest-", dir=store.parent))
    else:
        tmpdir = Path(tempfile.mkdtemp(prefix=".motifgrid-ingest-"))
    width = block_size + halo

    def rows(name, rec, length):
        for lo in range(0, length, block_size):
            raw = rec[lo:min(lo + width, length)]
            raw = (raw if isinstance(raw, str) else str(raw)).encode("ascii", "replace")
            bad = np.flatnonzero(~_NUCLEOTIDE[np.frombuffer(raw, dtype=np.uint8)])
            if bad.size:
                raise GenomeError(f"{fasta}: record {name!r} position {lo + int(bad[0]) + 1}: "
                                  f"{chr(raw[bad[0]])!r} is not a nucleotide code (protein or binary data?)")
            codes = encode(raw)
            row = np.full(width, 4, dtype=np.uint8)
            row[: codes.size] = codes
            yield row

    try:
        fa, checksum, tally = _open_fasta(fasta, kind, tmpdir)
        lengths = {name: len(fa[name]) for name in fa.keys()}
        _check_records(fasta, lengths)
        _check_tally(fasta, tally, lengths)
        contigs = ((name, len(fa[name]), rows(name, fa[name], len(fa[name]))) for name in fa.keys())
        return _write_store(store, str(fasta), checksum, block_size, halo, contigs)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


# --------------------------------------------------------------------------------------- reader
@dataclass(frozen=True)
class Block:
    """One unit of scan work: block ``index`` of contig ``chrom``."""
    chrom: str
    key: str
    index: int
    start: int        # genome coordinate of row position 0 (= index * block_size)
    core_end: int     # end of the core, clipped to the contig length
    length: int       # contig length

    @property
    def block_id(self) -> str:
        return f"{self.key}-{self.index:06d}"


class GenomeStore:
    """Read side of a genome store (cheap to pickle: it holds the path and the attributes)."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        try:
            attrs = json.loads(storage.read_bytes(storage.join(self.path, "zarr.json"))).get("attributes", {})
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise GenomeError(f"{self.path}: not a motifgrid genome store (no zarr.json); "
                              "run `motifgrid ingest` first") from None
        except ValueError:
            raise GenomeError(f"{self.path}: not a motifgrid genome store (unreadable zarr.json)") from None
        if attrs.get("format") != "motifgrid-genome":
            raise GenomeError(f"{self.path}: not a motifgrid genome store")
        if attrs.get("format_version") != STORE_FORMAT_VERSION:
            raise GenomeError(f"{self.path}: store format version {attrs.get('format_version')} "
                              f"is not {STORE_FORMAT_VERSION}; re-ingest the FASTA")
        self.attrs = attrs
        self.block_size = int(attrs["block_size"])
        self.halo = int(attrs["halo"])
        self.contigs = attrs["contigs"]
        self._index()

    def _index(self) -> None:
        self._arrays: dict = {}
        self._direct: dict = {}
        self._by_key = {c["key"]: c for c in self.contigs}
        self._by_name = {c["name"]: c for c in self.contigs}

    def __getstate__(self):
        return {"path": self.path, "attrs": self.attrs}

    def __setstate__(self, state):
        self.path = state["path"]
        self.attrs = state["attrs"]
        self.block_size = int(self.attrs["block_size"])
        self.halo = int(self.attrs["halo"])
        self.contigs = self.attrs["contigs"]
        self._index()

    @property
    def checksum(self) -> str:
        return self.attrs["source_checksum"]

    @property
    def background(self) -> np.ndarray:
        return np.asarray(self.attrs["background"], dtype=np.float64)

    @property
    def total_length(self) -> int:
        return sum(c["length"] for c in self.contigs)

    def blocks(self, skip_all_n: bool = True) -> list[Block]:
        """Every block of every contig, in genome order (all-N blocks left out by default)."""
        out = []
        B = self.block_size
        for c in self.contigs:
            for b in range(c["n_blocks"]):
                if skip_all_n and c["n_fraction"][b] >= 1.0:
                    continue
                out.append(Block(c["name"], c["key"], b, b * B, min((b + 1) * B, c["length"]), c["length"]))
        return out

    def _direct_chunks(self, key: str) -> bool:
        """True when the contig's chunks are plain files ``KEY/c/<row>/0`` of zstd-compressed bytes (what
        :func:`_write_store` writes), which :meth:`read_block` then decodes itself: zarr's per-call
        machinery costs ~1 ms a block, which dominates on stores of many small contigs."""
        ok = self._direct.get(key)
        if ok is None and storage.is_url(self.path):
            ok = self._direct[key] = False           # a URL: zarr (fsspec) reads it
        if ok is None and self._direct.get("*"):
            ok = self._direct[key] = True            # every array of a store is written alike: checked once
        if ok is None:
            try:
                with open(os.path.join(self.path, key, "zarr.json")) as f:
                    ok = _direct_layout(json.load(f), self.block_size + self.halo)
            except (OSError, ValueError):
                ok = False
            self._direct[key] = ok
            if ok:                                   # a motifgrid store (checked on opening): written alike
                self._direct["*"] = True
        return ok

    def read_block(self, block: Block) -> np.ndarray:
        """Codes of positions ``[start, start + B + H)`` of the block's contig, shape (B + H,) uint8."""
        if self._direct_chunks(block.key):
            from numcodecs import Zstd  # noqa: PLC0415

            width = self.block_size + self.halo
            out = np.empty(width, dtype=np.uint8)
            try:
                with open(os.path.join(self.path, block.key, "c", str(block.index), "0"), "rb") as f:
                    raw = f.read()
            except FileNotFoundError:          # never written: the fill value
                out.fill(4)
                return self._check_filled(block, out)
            try:
                Zstd().decode(raw, out=out)
            except Exception as e:   # noqa: BLE001  (a corrupt chunk)
                raise self._corrupt(block, e) from None
            return out
        import zarr  # noqa: PLC0415

        arr = self._arrays.get(block.key)
        if arr is None:
            opts = storage.storage_options(self.path)
            try:
                arr = zarr.open_array(f"{self.path.rstrip('/')}/{block.key}", mode="r",
                                      **({"storage_options": opts} if opts else {}))
            except Exception as e:   # noqa: BLE001  (zarr raises many kinds for a damaged store)
                raise GenomeError(f"{self.path}: contig {block.chrom!r} ({block.key}) is unreadable "
                                  f"({type(e).__name__}: {e}); re-ingest the FASTA") from None
            self._arrays[block.key] = arr
        try:
            row = np.asarray(arr[block.index, :])
        except Exception as e:   # noqa: BLE001  (a corrupt chunk: decompression or format errors)
            raise self._corrupt(block, e) from None
        return self._check_filled(block, row) if row[0] == 4 else row

    def _corrupt(self, block: Block, e: Exception) -> GenomeError:
        return GenomeError(f"{self.path}: block {block.index} of contig {block.chrom!r} is corrupt "
                           f"({type(e).__name__}: {e}); re-ingest the FASTA")

    def _check_filled(self, block: Block, row: np.ndarray) -> np.ndarray:
        """A missing chunk reads as the fill value (all N): an error unless the store says the block is all N."""
        if not (row != 4).any():
            c = self._by_key.get(block.key)
            if c and block.index < len(c["n_fraction"]) and c["n_fraction"][block.index] < 1.0:
                raise GenomeError(f"{self.path}: block {block.index} of contig {block.chrom!r} is missing from "
                                  f"the store (its chunk file is gone); re-ingest the FASTA")
        return row

    def fetch(self, chrom: str, start: int, end: int) -> np.ndarray:
        """Codes of ``chrom[start:end]`` (for tests, exports and spot checks)."""
        c = self._by_name.get(chrom)       # a dict: exports call this once per file (26 k contigs: a scan each)
        if c is None:
            raise GenomeError(f"{self.path}: no contig named {chrom!r}")
        end = min(end, c["length"])
        out = np.full(max(end - start, 0), 4, dtype=np.uint8)
        B = self.block_size
        pos = start
        while pos < end:
            b = pos // B
            blk = Block(chrom, c["key"], b, b * B, min((b + 1) * B, c["length"]), c["length"])
            row = self.read_block(blk)
            take = min(end, (b + 1) * B) - pos
            out[pos - start: pos - start + take] = row[pos - b * B: pos - b * B + take]
            pos += take
        return out


# --------------------------------------------------------------------------------------- synthetic
def synthesize(store: str | os.PathLike, contigs: list, background, block_size: int = DEFAULT_BLOCK_SIZE,
               halo: int = DEFAULT_HALO, seed: int = 1) -> "GenomeStore":
    """A store of iid random sequence with the given base composition, written block by block.

    For benchmarks at genome scale where the real genome cannot travel (the composition should come
    from real sequence).  ``contigs`` is a list of (name, length).  Same layout and attributes as
    :func:`ingest`; the source is recorded as ``synthetic:...`` with the parameters.
    """
    store = Path(store)
    _check_new_store(store, block_size, halo)
    bg = np.asarray(background, dtype=np.float64)
    bg = bg / bg.sum()
    # uint16 → code lookup with the composition quantised to 1/65536
    edges = np.round(np.cumsum(bg) * 65536).astype(np.int64)
    lut = np.searchsorted(edges, np.arange(65536), side="right").astype(np.uint8)
    rng = np.random.default_rng(seed)
    desc = json.dumps({"contigs": contigs, "background": list(bg), "seed": seed})
    width = block_size + halo

    def draw(n):
        return lut[rng.integers(0, 65536, size=max(n, 0), dtype=np.uint16)]

    def rows(length):
        nxt = draw(min(block_size, length))
        for lo in range(0, length, block_size):
            core, nxt = nxt, draw(min(block_size, length - lo - block_size))   # the next core feeds the halo
            row = np.full(width, 4, dtype=np.uint8)
            row[:core.size] = core
            h = min(halo, nxt.size)
            row[block_size:block_size + h] = nxt[:h]
            yield row

    return _write_store(store, f"synthetic:{desc}", "sha256:" + hashlib.sha256(desc.encode()).hexdigest(),
                        block_size, halo, ((name, length, rows(length)) for name, length in contigs))
