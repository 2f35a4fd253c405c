"""FASTA → Zarr genome store (format 2), and its reader.

Layout (a Zarr v3 group, see ``docs/formats.md``)::

    STORE/zarr.json                 group attributes: format, sizes, source + checksum, base counts, background
    STORE/blocks                    uint8 (n_blocks, B + H): row b = packed positions [b*B, b*B + B + H)
    STORE/n_fraction                float32 (n_blocks,): share of code 4 in each row (all-N rows are skipped)
    STORE/records/{name,length,offset}   the record table: where each record's bases sit in the packed sequence

Every record of the FASTA is laid into one *packed sequence*, in file order, separated by one code 4
(``record_gap``): no window ever spans two records, because no window holding a code 4 is reported.
A record longer than half a block ends its block (the next record starts at a block boundary), so the
blocks of a chromosome are its own; short records (peaks, promoters) share blocks.  The number of arrays
and files grows with the bases, never with the number of records.  Codes: A=0 C=1 G=2 T=3, anything else
(N, IUPAC, gaps) = 4; soft-masking is dropped.  A hit belongs to the block whose core ``[b*B, (b+1)*B)``
holds its start, so blocks need no deduplication; the halo H must be at least the longest motif
length − 1 (checked at scan time).  Everything is written and read through zarr's API (a sharded array
when rows are short, so that small blocks do not become one file each).

Ingest reads the FASTA once, front to back (:mod:`pipeline.io.fasta`), a few blocks in memory whatever the
record lengths or count.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from pipeline import MotifgridError
from pipeline.io import storage
from pipeline.io.fasta import CODE, FastaReader, sniff_fasta
from pipeline.io.schema import STORE_FORMAT_VERSION

DEFAULT_BLOCK_SIZE = 1 << 20   # 1 Mi positions per block core
DEFAULT_HALO = 127             # enough for motifs up to 128 columns
RECORD_GAP = 1                 # codes 4 between two records of the packed sequence

LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
MAX_NAME_BYTES = 240   # a record name becomes one percent-encoded folder name of a hits dataset


class GenomeError(MotifgridError, ValueError):
    """Bad genome input or store; ``str(e)`` is one line naming the file and the problem."""


def encode(seq: bytes | str) -> np.ndarray:
    """Sequence text → uint8 codes (A=0 C=1 G=2 T=3, else 4)."""
    if isinstance(seq, str):
        seq = seq.encode("ascii", "replace")
    return CODE[np.frombuffer(seq, dtype=np.uint8)]


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
# --------------------------------------------------------------------------------------- writer
class _Packer:
    """Lays records end to end into overlapping block rows and writes them through zarr, a batch at a time.

    ``start_record(name)`` / ``add(codes)`` (any number of times) / ``end_record()``, then ``close()``.
    Holds one row (B + H codes) plus the batch of finished rows waiting for their write.
    """

    def __init__(self, root, block_size: int, halo: int, gap: int = RECORD_GAP, compress: bool = True,
                 write_bytes: int = 4 << 20):
        self.B, self.H, self.gap = block_size, halo, gap
        self.W = block_size + halo
        self.rows_per_write = max(1, int(write_bytes) // self.W)     # rows per zarr write
        self.shard_rows = max(1, (1 << 20) // self.W)          # short rows: many chunks in one shard file
        self.blocks = _create_blocks(root, self.W, self.shard_rows, compress)
        self.buf = np.full(self.W, 4, dtype=np.uint8)
        self.filled = 0                     # codes in buf; buf[0] is packed position self.base
        self.base = 0
        self.batch = np.empty((self.rows_per_write, self.W), dtype=np.uint8)
        self.n_batch = 0
        self.n_rows = 0
        self.n_fraction: list = []
        self.counts = np.zeros(5, dtype=np.int64)
        self.names: list = []
        self.offsets: list = []
        self.lengths: list = []
        self._len = 0

    @property
    def pos(self) -> int:
        """Packed position of the next code."""
        return self.base + self.filled

    def start_record(self, name: str) -> None:
        if self.names:
            prev = self.lengths[-1]
            self._put_fill(self.gap)
            if prev > self.B // 2 and self.pos % self.B:            # a long record ends its block
                self._put_fill(self.B - self.pos % self.B)
        self.names.append(name)
        self.offsets.append(self.pos)
        self._len = 0

    def add(self, codes: np.ndarray) -> None:
        """Append codes to the current record (the caller adds them to ``counts``)."""
        self._len += codes.size
        self._put(codes)

    def end_record(self) -> None:
        self.lengths.append(self._len)

    def add_records(self, names: list, codes: np.ndarray, offsets: np.ndarray) -> None:
        """Whole records, laid out as ``start_record``/``add``/``end_record`` each would lay them (the caller adds
        the codes to ``counts``); a run of records of at most half a block each is put as one piece, its gaps
        inserted in one step (per-record calls cost ~10 µs: 2 s for 2·10⁵ peaks and their shuffles)."""
        lengths = np.diff(offsets)
        i = 0
        for stop in np.flatnonzero(lengths > self.B // 2).tolist() + [len(names)]:
            if i < stop:
                self._add_run(names[i:stop], codes[offsets[i]:offsets[stop]], offsets[i:stop + 1] - offsets[i])
            if stop < len(names):
                self.start_record(names[stop])
                self.add(codes[offsets[stop]:offsets[stop + 1]])
                self.end_record()
            i = stop + 1

    def _add_run(self, names: list, codes: np.ndarray, rel: np.ndarray) -> None:
        self.start_record(names[0])                  # the gap (or a long record's block end) before the run
        first = self.pos
        self._put(np.insert(codes, np.repeat(rel[1:-1], self.gap), 4) if len(names) > 1 else codes)
        lengths = np.diff(rel)
        self.names.extend(names[1:])
        self.offsets.extend((first + rel[1:-1] + self.gap * np.arange(1, len(names))).tolist())
        self.lengths.extend(lengths.tolist())

    def _put_fill(self, n: int) -> None:
        while n > 0:
            k = min(n, self.W - self.filled)
            self.buf[self.filled:self.filled + k] = 4
            self.filled += k
            n -= k
            if self.filled == self.W:
                self._emit()

    def _put(self, codes: np.ndarray) -> None:
        i = 0
        while i < codes.size:
            k = min(codes.size - i, self.W - self.filled)
            self.buf[self.filled:self.filled + k] = codes[i:i + k]
            self.filled += k
            i += k
            if self.filled == self.W:
                self._emit()

    def _emit(self) -> None:
        """Row ``base // B`` is complete: queue it; its halo is the next row's first H codes."""
        row = self.batch[self.n_batch]
        row[:self.filled] = self.buf[:self.filled]
        row[self.filled:] = 4
        self.n_batch += 1
        self.n_fraction.append(float(np.count_nonzero(row == 4)) / self.W)
        keep = max(self.filled - self.B, 0)          # codes already past this row's core: the next row's
        self.buf[:keep] = self.buf[self.B:self.B + keep].copy()
        self.filled = keep
        self.base += self.B
        if self.n_batch == self.rows_per_write:
            self._flush()

    def _flush(self) -> None:
        if not self.n_batch:
            return
        n0, n1 = self.n_rows, self.n_rows + self.n_batch
        self.blocks.resize((n1, self.W))
        self.blocks[n0:n1] = self.batch[:self.n_batch]
        self.n_rows, self.n_batch = n1, 0

    def close(self) -> int:
        """Emit the last rows; return the packed length."""
        end = self.pos
        while self.base < end:
            self._emit()
        self._flush()
        return end


def _create_blocks(root, width: int, shard_rows: int, compress: bool = True):
    """The ``blocks`` array: zstd level 1, or no codec for a scratch store read once (``compress=False``)."""
    from zarr.codecs import ZstdCodec  # noqa: PLC0415

    kw = dict(shards=(shard_rows, width)) if shard_rows > 1 else {}
    # every row is written, all-N ones too: zarr's default (write_empty_chunks=False) first compares each chunk with
    # the fill value, ~4 ms a 1 MB row on the VM (72 uncompressed rows: 0.42 s against 0.10 s; enrich's scratch
    # store of 10⁵ peaks and shuffles 1.40 -> 1.08 s, their FASTA's ingest 1.54 -> 1.41 s, medians of 5 interleaved),
    # and a store has few all-N rows (a chunk of a few bytes each once compressed)
    return root.create_array("blocks", shape=(0, width), chunks=(1, width), dtype="uint8", fill_value=4,
                             compressors=ZstdCodec(level=1, checksum=False) if compress else None,
                             config={"write_empty_chunks": True}, **kw)


def _write_records(root, names: list, offsets: list, lengths: list) -> None:
    """The record table as three 1-D arrays of group ``records`` (names as zarr's variable-length strings)."""
    g = root.create_group("records")
    n = len(names)
    chunk = max(1, min(n, 1 << 20))
    g.create_array("name", shape=(n,), chunks=(chunk,), dtype=str)[:] = np.asarray(names, dtype=object)
    g.create_array("offset", shape=(n,), chunks=(chunk,), dtype="int64")[:] = np.asarray(offsets, np.int64)
    g.create_array("length", shape=(n,), chunks=(chunk,), dtype="int64")[:] = np.asarray(lengths, np.int64)


def _write_store(store, source: str, block_size: int, halo: int, fill, compress: bool = True,
                 write_bytes: int = 4 << 20) -> "GenomeStore":
    """Write a genome store: ``fill(packer)`` lays the records into the packer and returns the source checksum.
    Built under a temporary name beside ``store`` and renamed when complete (a URL: built locally and uploaded
    with the root ``zarr.json`` last), so an interrupted write never leaves something that looks finished."""
    import zarr  # noqa: PLC0415

    remote = storage.is_url(store)
    if remote:
        tmp_store = Path(tempfile.mkdtemp(prefix=".motifgrid-store.", suffix=".partial"))
    else:
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp_store = Path(tempfile.mkdtemp(prefix=f".{store.name}.", suffix=".partial", dir=store.parent))
    try:
        root = zarr.open_group(str(tmp_store), mode="w", zarr_format=3)
        packer = _Packer(root, block_size, halo, compress=compress, write_bytes=write_bytes)
        checksum = fill(packer)
        packed = packer.close()
        root.create_array("n_fraction", shape=(packer.n_rows,), chunks=(max(1, packer.n_rows),),
                          dtype="float32")[:] = np.asarray(packer.n_fraction, np.float32)
        _write_records(root, packer.names, packer.offsets, packer.lengths)
        counts = packer.counts
        acgt = counts[:4].astype(np.float64)
        root.attrs.update({
            "format": "motifgrid-genome",
            "format_version": STORE_FORMAT_VERSION,
            "source": source,
            "source_checksum": checksum,
            "block_size": int(block_size),
            "halo": int(halo),
            "record_gap": RECORD_GAP,
            "records": len(packer.names),
            "total_length": int(sum(packer.lengths)),
            "packed_length": int(packed),
            "blocks": int(packer.n_rows),
            "base_counts": dict(zip("ACGTN", (int(x) for x in counts))),
            "background": [float(x) for x in ((acgt / acgt.sum()) if acgt.sum() else np.full(4, 0.25))],
        })
        if remote:
            upload_store(tmp_store, str(store))
            shutil.rmtree(tmp_store, ignore_errors=True)
        else:
            os.replace(tmp_store, store)
    except BaseException:
        shutil.rmtree(tmp_store, ignore_errors=True)
        raise
    return GenomeStore(store)


def upload_store(local: Path, url: str) -> None:
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


# --------------------------------------------------------------------------------------- ingest
def code_counts(codes: np.ndarray) -> np.ndarray:
    """How many of each code 0..4 (codes are at most 4), (5,) int64: one comparison pass per letter
    (``np.bincount`` first widens every uint8 to an int64, eight times the memory traffic)."""
    acgt = [np.count_nonzero(codes == k) for k in range(4)]
    return np.array(acgt + [codes.size - sum(acgt)], np.int64)


def _check_name(fasta, name: str) -> None:
    if len(name) * 12 <= MAX_NAME_BYTES:        # 4 UTF-8 bytes a character at most, each percent-encoded in 3
        return
    from urllib.parse import quote  # noqa: PLC0415

    if len(quote(name, safe="")) > MAX_NAME_BYTES:
        raise GenomeError(f"{fasta}: record name {name[:30]!r}... is too long ({len(name)} characters; "
                          f"at most {MAX_NAME_BYTES} bytes percent-encoded)")


def _fill_from_fasta(fasta: Path):
    """The ``fill`` of :func:`_write_store` for a FASTA file: one pass, checksum included."""
    reader = FastaReader(fasta, error=GenomeError)

    def fill(packer: _Packer) -> str:
        for names, starts, codes in reader.batches():        # bytes checked: no nucleotide code is an error
            packer.counts += code_counts(codes)
            bounds = starts + [len(codes)]
            if bounds[0]:
                packer.add(codes[:bounds[0]])        # the open record goes on
            if names:
                for name in names:
                    _check_name(fasta, name)
                if packer.names:
                    packer.end_record()
                # the batch's whole records at once (a Python step per record cost 1 s for 100,000 peaks),
                # then its last record, left open for the next batch
                offsets = np.asarray(bounds[:-1], dtype=np.int64)
                packer.add_records(names[:-1], codes[offsets[0]:offsets[-1]], offsets - offsets[0])
                packer.start_record(names[-1])
                packer.add(codes[bounds[-2]:])
        if not packer.names:
            raise GenomeError(f"{fasta}: empty file, no FASTA records")
        packer.end_record()
        if not any(packer.lengths):
            raise GenomeError(f"{fasta}: no sequence in any of its {len(packer.names)} record(s)")
        return reader.checksum
    return fill


def ingest(fasta: str | os.PathLike, store: str | os.PathLike, block_size: int = DEFAULT_BLOCK_SIZE,
           halo: int = DEFAULT_HALO) -> "GenomeStore":
    """Ingest ``fasta`` (plain, gzip or bgzip) into a new store at ``store`` (a path or URL); return its reader.

    One pass over the file; memory holds a few blocks and the record table, whatever the sizes."""
    fasta = Path(fasta)
    store = str(store) if storage.is_url(store) else Path(store)
    _check_new_store(store, block_size, halo)
    sniff_fasta(fasta, error=GenomeError)
    return _write_store(store, str(fasta), block_size, halo, _fill_from_fasta(fasta))


def store_from_codes(store: str | os.PathLike, names: list, codes: np.ndarray, offsets: np.ndarray, source: str,
                     checksum: str, block_size: int = DEFAULT_BLOCK_SIZE, halo: int = DEFAULT_HALO,
                     compress: bool = True) -> "GenomeStore":
    """A new store of records held in memory, laid out as :func:`ingest` lays out a FASTA's (enrichment's
    targets and controls, scanned together).  Record ``i`` is ``names[i]`` with codes
    ``codes[offsets[i]:offsets[i + 1]]`` (uint8, A=0 C=1 G=2 T=3, 4 = anything else); ``source`` and
    ``checksum`` say where they came from (the store's provenance).  ``compress=False``: blocks without a codec
    (a scratch store, written and read once: zstd cost more than the bytes it saves)."""
    store = Path(store)
    _check_new_store(store, block_size, halo)
    codes = np.minimum(np.asarray(codes, dtype=np.uint8), 4)
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.size != len(names) + 1 or not len(names):
        raise GenomeError(f"{source}: {len(names)} record names for {offsets.size - 1} records")

    def fill(packer: _Packer) -> str:
        for name in names:
            _check_name(source, name)
        packer.counts += code_counts(codes)
        packer.add_records(list(names), codes, offsets)
        return checksum

    # the records are in memory already: ~32 MB of rows per zarr write instead of ingest's bounded 4 MB (each write
    # resizes the array and waits on zarr's event loop; enrich's scratch store of 10⁵ peaks and shuffles, 72 rows:
    # 1.34-1.40 s at 4 MB a write, 1.15-1.38 s at 32 MB on the VM)
    return _write_store(store, source, block_size, halo, fill, compress, write_bytes=32 << 20)


# --------------------------------------------------------------------------------------- reader
@dataclass(frozen=True)
class Block:
    """One unit of scan work: row ``index`` of the store, packed positions ``[start, core_end)`` its core."""
    index: int
    start: int        # packed position of row position 0 (= index * block_size)
    core_end: int     # end of the core, clipped to the packed length

    @property
    def block_id(self) -> str:
        return f"b{self.index:07d}"


class Records:
    """The record table: ``names`` (list of str), ``offsets`` and ``lengths`` (int64 arrays, packed positions),
    in file order (offsets ascending)."""

    def __init__(self, names, offsets: np.ndarray, lengths: np.ndarray):
        self.names = list(names)
        self.offsets = np.asarray(offsets, np.int64)
        self.lengths = np.asarray(lengths, np.int64)
        self.ends = self.offsets + self.lengths

    def __len__(self) -> int:
        return len(self.names)

    @cached_property
    def index(self) -> dict:
        """name → record number."""
        return {n: i for i, n in enumerate(self.names)}

    def locate(self, pos: np.ndarray) -> np.ndarray:
        """Record number holding each packed position (positions in a gap get the record before it)."""
        return np.searchsorted(self.offsets, pos, side="right") - 1

    def bases(self, lo: int, hi: int) -> int:
        """Record bases (gaps and padding not counted) in packed ``[lo, hi)``."""
        i0, i1 = self.overlapping(lo, hi)
        s = np.maximum(self.offsets[i0:i1], lo)
        e = np.minimum(self.ends[i0:i1], hi)
        return int(np.maximum(e - s, 0).sum())

    def overlapping(self, lo: int, hi: int) -> tuple[int, int]:
        """Records ``i0 <= i < i1`` that have bases in packed ``[lo, hi)``."""
        i0 = int(np.searchsorted(self.ends, lo, side="right"))
        i1 = int(np.searchsorted(self.offsets, hi, side="left"))
        return i0, max(i0, i1)


class GenomeStore:
    """Read side of a genome store (cheap to pickle: it holds the path and the attributes; arrays are opened
    on first use in each process)."""

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
        version = attrs.get("format_version")
        if version != STORE_FORMAT_VERSION:
            what = " (one array per record)" if version == 1 else ""
            raise GenomeError(f"{self.path}: store format version {version}{what} is not {STORE_FORMAT_VERSION}, the "
                              "one this motifgrid reads; re-ingest the FASTA with `motifgrid ingest`")
        self.attrs = attrs
        self._init()

    def _init(self) -> None:
        a = self.attrs
        self.block_size = int(a["block_size"])
        self.halo = int(a["halo"])
        self.n_blocks = int(a["blocks"])
        self.packed_length = int(a["packed_length"])
        self._arrays: dict = {}
        # the record table is read once per process: a worker's threads start their first tasks together, and
        # cached_property does not lock (Python 3.12): each read the 2·10⁵ names of an enrichment's store
        self._records: Records | None = None
        self._lock = threading.Lock()

    def __getstate__(self):
        return {"path": self.path, "attrs": self.attrs}

    def __setstate__(self, state):
        self.path, self.attrs = state["path"], state["attrs"]
        self._init()

    @property
    def checksum(self) -> str:
        return self.attrs["source_checksum"]

    @property
    def background(self) -> np.ndarray:
        return np.asarray(self.attrs["background"], dtype=np.float64)

    @property
    def total_length(self) -> int:
        """Bases of all records (gaps not counted)."""
        return int(self.attrs["total_length"])

    def _array(self, key: str):
        arr = self._arrays.get(key)
        if arr is None:
            import zarr  # noqa: PLC0415

            opts = storage.storage_options(self.path)
            try:
                arr = zarr.open_array(f"{self.path.rstrip('/')}/{key}", mode="r",
                                      **({"storage_options": opts} if opts else {}))
            except Exception as e:   # noqa: BLE001  (zarr raises many kinds for a damaged store)
                raise GenomeError(f"{self.path}: its array {key!r} is unreadable ({type(e).__name__}: {e}); "
                                  "re-ingest the FASTA") from None
            self._arrays[key] = arr
        return arr

    @property
    def records(self) -> Records:
        """The record table (read on first use; one read per process)."""
        if self._records is None:
            with self._lock:
                if self._records is None:          # another thread may have read it meanwhile
                    self._records = Records(self._array("records/name")[:].tolist(), self._array("records/offset")[:],
                                            self._array("records/length")[:])
        return self._records

    @cached_property
    def n_fraction(self) -> np.ndarray:
        """(n_blocks,) float32: share of code 4 in each block row."""
        return np.asarray(self._array("n_fraction")[:])

    def blocks(self, skip_all_n: bool = True) -> list[Block]:
        """Every block, in packed order (all-N blocks left out by default)."""
        B, end = self.block_size, self.packed_length
        nf = self.n_fraction
        return [Block(b, b * B, min((b + 1) * B, end)) for b in range(self.n_blocks)
                if not (skip_all_n and nf[b] >= 1.0)]

    def block(self, index: int) -> Block:
        return Block(index, index * self.block_size, min((index + 1) * self.block_size, self.packed_length))

    def block_records(self, index: int) -> tuple[int, int]:
        """Records ``i0 <= i < i1`` with bases in block ``index``'s core."""
        blk = self.block(index)
        return self.records.overlapping(blk.start, blk.core_end)

    def read_block(self, block: Block) -> np.ndarray:
        """Codes of packed positions ``[start, start + B + H)``, shape (B + H,) uint8."""
        arr = self._array("blocks")
        try:
            row = np.asarray(arr[block.index])
        except Exception as e:   # noqa: BLE001  (a corrupt chunk: decompression or format errors)
            raise GenomeError(f"{self.path}: block {block.index} is corrupt ({type(e).__name__}: {e}); "
                              "re-ingest the FASTA") from None
        if row[0] == 4 and not (row != 4).any() and self.n_fraction[block.index] < 1.0:
            # zarr reads a missing chunk as the fill value: an error unless the store says the block is all N
            raise GenomeError(f"{self.path}: block {block.index} is missing from the store (its chunk file is gone); "
                              "re-ingest the FASTA")
        return row

    def read_packed(self, start: int, end: int) -> np.ndarray:
        """Codes of packed positions ``[start, end)`` (4 past the packed end)."""
        out = np.full(max(end - start, 0), 4, dtype=np.uint8)
        B, pos = self.block_size, start
        while pos < min(end, self.packed_length):
            b = pos // B
            row = self.read_block(self.block(b))
            take = min(end, (b + 1) * B) - pos
            out[pos - start:pos - start + take] = row[pos - b * B:pos - b * B + take]
            pos += take
        return out

    def fetch(self, name: str, start: int, end: int) -> np.ndarray:
        """Codes of record ``name``'s ``[start, end)`` (clipped to the record)."""
        rec = self.records
        i = rec.index.get(name)
        if i is None:
            raise GenomeError(f"{self.path}: no record named {name!r}")
        start, end = max(start, 0), min(end, int(rec.lengths[i]))
        off = int(rec.offsets[i])
        return self.read_packed(off + start, off + end)


# --------------------------------------------------------------------------------------- synthetic
def synthesize(store: str | os.PathLike, contigs: list, background, block_size: int = DEFAULT_BLOCK_SIZE,
               halo: int = DEFAULT_HALO, seed: int = 1) -> "GenomeStore":
    """A store of iid random sequence with the given base composition, written a block at a time.

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

    def fill(packer: _Packer) -> str:
        for name, length in contigs:
            packer.start_record(name)
            for lo in range(0, length, block_size):
                codes = lut[rng.integers(0, 65536, size=min(block_size, length - lo), dtype=np.uint16)]
                packer.counts += code_counts(codes)
                packer.add(codes)
            packer.end_record()
        return "sha256:" + hashlib.sha256(desc.encode()).hexdigest()

    return _write_store(store, f"synthetic:{desc}", block_size, halo, fill)
