"""Tests for pipeline.motifs: motif readers, validation and the FIMO-compatible PWM model."""
from __future__ import annotations

import gzip
import hashlib
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from pipeline.motifs import (
    NRDB_DNA,
    Motif,
    MotifError,
    duplicate_ids,
    motif_probabilities,
    motifs_checksum,
    pwm_from_motif,
    read_background,
    read_motifs,
    reverse_complement,
)

HERE = Path(__file__).resolve().parents[1]
DATA = HERE / "data"
FORMATS_DIR = DATA / "motifs" / "formats"
BAD_DIR = DATA / "motifs" / "bad"
FIMO_DIR = DATA / "fimo_reference"

SHARED = Path(os.environ.get("MOTIFGRID_SHARED_DATA") or HERE.parents[1] / "shared" / "data")
MOTIF_DIR = SHARED / "motifs"
needs_shared = pytest.mark.skipif(
    not (MOTIF_DIR.is_dir() and (SHARED / "MANIFEST.md").exists()),
    reason=f"shared data not found at {SHARED} (set MOTIFGRID_SHARED_DATA)",
)

# Motif counts stated in shared/data/MANIFEST.md section 2.
MANIFEST_COUNTS = {
    "JASPAR2024_CORE_vertebrates_non-redundant.jaspar": 879,
    "JASPAR2024_CORE_vertebrates_non-redundant.meme": 879,
    "JASPAR2024_CORE_vertebrates_non-redundant.transfac": 879,
    "JASPAR2024_CORE_non-redundant.jaspar": 2346,
    "JASPAR2024_CORE_non-redundant.meme": 2346,
    "JASPAR2024_CORE_non-redundant.transfac": 2346,
    "JASPAR2024_CORE_redundant_all_versions.jaspar.gz": 4279,
    "JASPAR2024_CORE_redundant_all_versions.meme.gz": 4279,
    "JASPAR2024_CORE_redundant_all_versions.transfac.gz": 4279,
    "HOCOMOCOv11_HUMAN.pfm": 401,
    "HOMER.pfm": 436,
    "ENCODE.pfm.gz": 2065,
    "SwissRegulon.pfm": 684,
    "factorbook.pfm": 410,
    "RSAT_vertebrates.pfm": 2233,
    "RSAT_insects.pfm": 350,
    "RSAT_plants.pfm": 306,
    "IMAGE.pfm": 1611,
    "gimme.vertebrate.v5.0.pfm": 1796,
    "yetfasco_all.meme": 1883,
    "YEASTRACT_20130918.meme": 732,
    "SwissRegulon_s_cer.meme": 158,
    "macisaac_yeast.v1.meme": 124,
    "yeast_uniprobe_GR09.meme": 89,
    "scpd_matrix.meme": 24,
    "jaspar-insecta.jaspar": 126,
    "example.transfac": 2,
    "MA0001.1.pfm": 1,
}
# RSAT_vertebrates.pfm motif cluster_2047 has the row "0.2 0.2 0.2 0.2" (sum 0.8): a real defect of the file,
# renormalised with a warning (test_rsat_vertebrates_short_row_is_renormalised_with_a_warning).
SHORT_ROWS = {"RSAT_vertebrates.pfm": 1}


def _shared_motif_files() -> list[Path]:
    if not MOTIF_DIR.is_dir():
        return []
    return sorted(
        p for p in MOTIF_DIR.rglob("*")
        if p.is_file() and not p.name.endswith((".metadata.tsv", ".metadata.tsv.gz", ".motif2factors.txt"))
    )


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8", "replace")


def _grep_count(path: Path) -> int:
    """Independent, grep-like record count."""
    text = _text(path)
    name = path.name.removesuffix(".gz")
    if name.endswith(".meme"):
        return len(re.findall(r"(?m)^MOTIF\s", text))
    if name.endswith(".transfac"):
        return len(re.findall(r"(?m)^P[O0]\s", text))
    n = len(re.findall(r"(?m)^>", text))
    return n or 1  # a bare single matrix has no header


# ------------------------------------------------------------------------------------------------
# Real motif collections
# ------------------------------------------------------------------------------------------------


@needs_shared
def test_shared_motif_files_found():
    files = _shared_motif_files()
    names = {p.name for p in files}
    assert len(files) >= 29
    assert set(MANIFEST_COUNTS) <= names, set(MANIFEST_COUNTS) - names


@needs_shared
@pytest.mark.parametrize("path", _shared_motif_files(), ids=lambda p: p.name)
def test_shared_motif_file_counts(path: Path):
    import warnings

    from pipeline.motifs.sniff import ShortRowsWarning

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        motifs = read_motifs(path)
    said = [str(w.message) for w in seen if w.category is ShortRowsWarning]
    assert len(said) == (1 if path.name in SHORT_ROWS else 0)
    assert all(f": {SHORT_ROWS[path.name]} probability row(s)" in x for x in said)
    assert len(motifs) == _grep_count(path)
    if path.name in MANIFEST_COUNTS:
        assert len(motifs) == MANIFEST_COUNTS[path.name]
    assert [m.record for m in motifs] == list(range(1, len(motifs) + 1))
    for m in motifs:
        assert isinstance(m, Motif)
        assert m.matrix.dtype == np.float64 and m.matrix.ndim == 2 and m.matrix.shape[1] == 4
        assert m.matrix.shape[0] > 0 and np.all(np.isfinite(m.matrix))
        assert m.kind in ("counts", "probabilities", "logodds")
        assert m.source == os.fspath(path)
        if m.kind == "probabilities":
            assert (m.matrix.sum(axis=1) <= 1.0 + 0.02 + 1e-9).all()


@needs_shared
def test_rsat_vertebrates_short_row_is_renormalised_with_a_warning():
    """The database's one row of 0.2 0.2 0.2 0.2 (record 1164, cluster_2047, position 13) is named in one warning
    and divided by its sum; refusing it refused all 2,233 motifs."""
    from pipeline.motifs.sniff import ShortRowsWarning

    path = MOTIF_DIR / "gimmemotifs_dbs" / "RSAT_vertebrates.pfm"
    with pytest.warns(ShortRowsWarning) as seen:
        motifs = read_motifs(path)
    assert [str(w.message) for w in seen if w.category is ShortRowsWarning] == [
        f"{path}: 1 probability row(s) in 1 motif(s) sum to less than 1 - 0.02 (first: record 1164 (cluster_2047) "
        "position 13 sums to 0.8); each is divided by its sum"]
    m = motifs[1163]
    assert m.id == "cluster_2047" and m.matrix[12].tolist() == [0.2] * 4
    np.testing.assert_allclose(motif_probabilities(m, np.full(4, 0.25), 0.0)[12], [0.25] * 4)


@needs_shared
def test_encode_consensus_letter_rows_are_kept():
    # Bio.motifs 'pfm-four-columns' drops rows that start with A/C/G/T (SIX5_disc1 comes out 2 long).
    motifs = read_motifs(MOTIF_DIR / "gimmemotifs_dbs" / "ENCODE.pfm.gz")
    text = _text(MOTIF_DIR / "gimmemotifs_dbs" / "ENCODE.pfm.gz")
    block = text.split(">SIX5_disc1 ", 1)[1].split("\n>", 1)[0].strip().split("\n")[1:]
    assert motifs[0].id == "SIX5_disc1" and motifs[0].length == len(block) == 10
    assert np.allclose(motifs[0].matrix[0], [0.008511, 0.004255, 0.987234, 0.0])


@needs_shared
@pytest.mark.parametrize(
    "stem", ["JASPAR2024_CORE_vertebrates_non-redundant", "JASPAR2024_CORE_redundant_all_versions"]
)
def test_same_motifs_in_three_formats(stem):
    gz = ".gz" if "redundant_all" in stem else ""
    jas = read_motifs(MOTIF_DIR / f"{stem}.jaspar{gz}")
    tra = read_motifs(MOTIF_DIR / f"{stem}.transfac{gz}")
    mem = read_motifs(MOTIF_DIR / f"{stem}.meme{gz}")
    assert len(jas) == len(tra) == len(mem) > 800
    for a, b, c in zip(jas, tra, mem):
        assert a.id == b.id == c.id and a.name == b.name == c.name
        assert a.kind == b.kind == "counts" and c.kind == "probabilities"
        assert np.array_equal(a.matrix, b.matrix)
        np.testing.assert_allclose(a.matrix / a.matrix.sum(axis=1, keepdims=True), c.matrix, atol=1e-6)
        assert a.nsites == b.nsites == a.matrix.sum(axis=1).max()
        assert c.nsites == pytest.approx(a.nsites, abs=0.5)  # .meme export rounds (SP1 MA0079.5: 1000.0007)


@needs_shared
def test_meme_text_output_and_logodds_sections():
    crp = read_motifs(SHARED / "benchmarks" / "classic_sets" / "crp0.meme_output.txt")
    assert [m.id for m in crp] == ["1", "2", "3", "4", "5"]
    assert crp[0].name == "MEME-1" and crp[0].length == 19 and crp[0].nsites == 17
    assert crp[0].kind == "probabilities"
    np.testing.assert_allclose(crp[0].matrix[0], [0.0, 0.176471, 0.0, 0.823529])
    # macisaac has a log-odds AND a letter-probability matrix per motif: the probabilities are used
    mac = read_motifs(MOTIF_DIR / "yeast_meme_dbs" / "macisaac_yeast.v1.meme")
    assert mac[0].id == "ABF1" and mac[0].kind == "probabilities" and mac[0].length == 15
    np.testing.assert_allclose(mac[0].matrix[0], [0.230603, 0.132401, 0.118831, 0.518165])


# ------------------------------------------------------------------------------------------------
# Named JASPAR releases (pyjaspar)
# ------------------------------------------------------------------------------------------------


def test_pyjaspar_release_counts():
    vert = read_motifs("JASPAR2024:CORE:vertebrates")
    core = read_motifs("JASPAR2024:CORE")
    assert len(vert) == 879
    assert len(core) == 2346
    assert len(read_motifs("JASPAR2024")) == 2346
    assert all(m.kind == "counts" and m.source == "JASPAR2024:CORE:vertebrates" for m in vert)
    assert len({m.id.split(".")[0] for m in core}) == 2346  # non-redundant: one version per base id


@needs_shared
def test_pyjaspar_release_matches_exported_file():
    rel = {m.id: m for m in read_motifs("JASPAR2024:CORE:vertebrates")}
    fil = read_motifs(MOTIF_DIR / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar")
    assert set(rel) == {m.id for m in fil}
    for m in fil:
        assert rel[m.id].name == m.name and np.array_equal(rel[m.id].matrix, m.matrix)


@pytest.mark.parametrize(
    "src, problem",
    [("JASPAR2099", "unknown JASPAR release"), ("JASPAR2024:CORE:martians", "0 motifs"),
     ("JASPAR2024:CORE:x'y", "bad tax group")],
)
def test_bad_release_names(src, problem):
    with pytest.raises(MotifError, match=problem):
        read_motifs(src)


SUBSET = DATA / "jaspar2024_subset.jaspar"          # 12 matrices exported from JASPAR 2024 (an independent copy)


@pytest.mark.parametrize("src, ids", [
    ("JASPAR2024:MA0139.2", ["MA0139.2"]),
    ("JASPAR2024:MA0139.2,MA0079.5", ["MA0139.2", "MA0079.5"]),                 # in the order given
    ("JASPAR2024:MA0079.5, ma0139.2", ["MA0079.5", "MA0139.2"]),
    ("JASPAR2024:MA0139", ["MA0139.2"]),                                         # a base id: its latest version
    ("JASPAR2024:MA0139.1", ["MA0139.1"]),                                       # an older version too
    ("JASPAR2024:CTCF", ["MA0139.2", "MA0531.2", "MA1929.2", "MA1930.2"]),       # every CORE matrix of the name
    ("JASPAR2024:Ahr::Arnt,SP1", ["MA0006.2", "MA0079.5"]),                      # names with '::'; not mouse Sp1
    ("JASPAR2024:sp1", ["MA0079.5", "MA2279.1"]),                                # no 'sp1': SP1 and Sp1
    ("JASPAR2024:CORE:vertebrates:CTCF", ["MA0139.2", "MA1929.2", "MA1930.2"]),  # within a tax group (insects out)
    ("JASPAR2024:CORE::MA0079,Arnt", ["MA0004.1", "MA0079.5"]),                  # within a collection: release order
])
def test_release_selection(src, ids):
    """Single matrices of a release by id or name: the matrices are those of the exported JASPAR 2024 file, and the
    source (the provenance of a scan) is the whole string."""
    got = read_motifs(src)
    assert [m.id for m in got] == ids
    assert all(m.source == src and m.kind == "counts" for m in got)
    ref = {m.id: m for m in read_motifs(SUBSET)}
    for m in got:
        if m.id in ref:
            assert m.name == ref[m.id].name and np.array_equal(m.matrix, ref[m.id].matrix)
    if src == "JASPAR2024:MA0139.1":                       # not the current CTCF matrix
        assert not np.array_equal(got[0].matrix, ref["MA0139.2"].matrix)
    assert motifs_checksum(src) != motifs_checksum("JASPAR2024")


@pytest.mark.parametrize("src, problem", [
    ("JASPAR2024:CTFC", "no motif with the id or name 'CTFC' (near: "),
    ("JASPAR2024:MA0139.9", "'MA0139.9' (near: MA0139.2, MA0139.1"),
    ("JASPAR2024:CORE:vertebrates:MA0531", "'MA0531' (near:"),                  # insect CTCF: not a vertebrate
    ("JASPAR2024:MA0139.2,,CTCF", "empty motif id or name"),
])
def test_bad_release_selection(src, problem):
    with pytest.raises(MotifError, match=re.escape(problem)) as e:
        read_motifs(src)
    assert str(e.value).startswith(f"{src}: ")
    if "CTFC" in src:
        assert "CTCF" in str(e.value).split("near: ")[1]


def test_select_from_a_file():
    """``select=`` (--motif): ids, base ids and names, any case, in file order; unknown ones listed with near ones."""
    assert [m.id for m in read_motifs(SUBSET, select=["ctcf"])] == ["MA0139.2", "MA1930.2"]
    assert [m.id for m in read_motifs(SUBSET, select=["SP1", "MA0004.1", "MA0014"])] == \
        ["MA0004.1", "MA0014.4", "MA0079.5"]
    assert [m.id for m in read_motifs("JASPAR2024:CORE:vertebrates", select="MA0139")] == ["MA0139.2"]
    with pytest.raises(MotifError, match=r"jaspar2024_subset.jaspar: no motif with the id or name 'PAX' \(near: PAX5\), "
                                         r"'X1' \(nothing near it\) among its 12 motifs"):
        read_motifs(SUBSET, select=["CTCF", "PAX", "X1"])


def test_unknown_format_hint():
    """The library's advice for a file whose format cannot be told is for Python callers; the CLI puts its flag."""
    with pytest.raises(MotifError) as e:
        read_motifs(BAD_DIR / "unknown_format.xyz")
    assert str(e.value).endswith("*.transfac (or pass format= to read_motifs)")
    assert e.value.with_hint("or pass --motif-format FORMAT").endswith("*.transfac (or pass --motif-format FORMAT)")


# ------------------------------------------------------------------------------------------------
# Small committed files: every format gives the same matrices
# ------------------------------------------------------------------------------------------------

ARNT = np.array([[4, 16, 0, 0], [19, 0, 1, 0], [0, 20, 0, 0], [0, 0, 20, 0], [0, 0, 0, 20], [0, 0, 20, 0]], float)
ARNT_AHR = np.array([[3, 8, 2, 11], [0, 0, 23, 1], [0, 23, 0, 1], [0, 0, 23, 1], [0, 0, 0, 24], [0, 0, 24, 0]], float)


@pytest.mark.parametrize(
    "name, fmt, kind, atol",
    [
        ("arnt.jaspar", "jaspar", "counts", 0),
        ("arnt.jaspar.gz", "jaspar", "counts", 0),
        ("arnt_blocks.txt", "jaspar", "counts", 0),
        ("arnt.transfac", "transfac", "counts", 0),
        ("arnt.meme", "meme", "probabilities", 1e-6),
        ("arnt.motif", "homer", "probabilities", 5e-4),
        ("arnt_gimme.pfm", "pfm", "probabilities", 5e-5),
    ],
)
def test_formats_agree(name, fmt, kind, atol):
    for f in (None, fmt):  # auto-detected and explicit
        motifs = read_motifs(FORMATS_DIR / name, format=f)
        assert [m.id for m in motifs] == ["MA0004.1", "MA0006.1"]
        for m, counts in zip(motifs, (ARNT, ARNT_AHR)):
            assert m.kind == kind
            want = counts if kind == "counts" else counts / counts.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(m.matrix, want, rtol=0, atol=atol)
    if fmt in ("jaspar", "transfac", "homer"):
        assert [m.name for m in motifs] == ["Arnt", "Arnt::Ahr"]
    if fmt in ("jaspar", "transfac", "meme"):
        assert [m.nsites for m in motifs] == [20.0, 24.0]


def test_bare_matrix_gets_file_stem_as_id():
    (m,) = read_motifs(FORMATS_DIR / "MA0004.1.pfm")
    assert m.id == m.name == "MA0004.1" and m.kind == "counts" and m.record == 1
    assert np.array_equal(m.matrix, ARNT)


def test_duplicate_ids_are_kept_and_counted():
    motifs = read_motifs(FORMATS_DIR / "duplicate_ids.jaspar")
    assert [(m.id, m.name) for m in motifs] == [("M1", "first"), ("M1", "second")]
    assert duplicate_ids(motifs) == {"M1": 2}
    assert duplicate_ids(read_motifs(FORMATS_DIR / "arnt.jaspar")) == {}


def test_motif_is_frozen_and_read_only():
    m = read_motifs(FORMATS_DIR / "arnt.jaspar")[0]
    with pytest.raises(ValueError):
        m.matrix[0, 0] = 1.0
    with pytest.raises(AttributeError):
        m.id = "x"


# ------------------------------------------------------------------------------------------------
# Malformed inputs: MotifError naming the file (and line)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, line, problem",
    [
        ("ragged.jaspar", 3, "row 'C' has 7 values, row 'A' has 8"),
        ("ragged.pfm", 3, "row has 3 values"),
        ("three_base_rows.pfm", 2, "row has 6 values, expected 4 (A C G T); a matrix of one row per base (A C G T) "
                                   "needs exactly 4 rows"),
        ("short_row.meme", 8, "row has 3 values"),
        ("negative.jaspar", 3, "negative value '-2'"),
        ("nan.pfm", 4, "value 'nan' is not finite"),
        ("inf.motif", 3, "value 'inf' is not finite"),
        ("nonnumeric.transfac", 5, "non-numeric value 'x'"),
        ("zero_length.jaspar", 1, "zero-length motif"),
        ("header_without_rows.jaspar", 1, "zero-length motif"),  # Bio.motifs drops it silently
        ("zero_sum.jaspar", 1, "position 2 sums to 0"),
        ("prob_sum.meme", 8, "sums to 1.2"),
        ("truncated.meme", 8, "ends after 2 of w=4 rows"),
        ("truncated.jaspar", 4, "has 3 matrix rows, expected 4"),  # Bio.motifs drops it silently
        ("truncated.transfac", 5, "not terminated by '//'"),
        ("no_matrix.transfac", 11, "has no P0/PO matrix"),  # Bio.motifs repeats the previous motif
        ("empty.jaspar", None, "empty"),
        ("zero_motifs.meme", None, "no motifs found"),
        ("not_meme.meme", None, "not a MEME file"),
        ("unknown_format.xyz", None, "cannot tell the motif format"),
        ("corrupt.jaspar.gz", None, "corrupt gzip"),
    ],
)
def test_malformed_inputs(name, line, problem):
    path = BAD_DIR / name
    with pytest.raises(MotifError) as ei:
        read_motifs(path)
    msg = str(ei.value)
    assert "\n" not in msg
    assert name in msg and problem in msg, msg
    assert ei.value.line == line
    if line is not None:
        assert f"{name} line {line}" in msg


@pytest.mark.parametrize("name", ["arnt.jaspar", "arnt.transfac"])
def test_bio_parser_result_is_cross_checked(monkeypatch, name):
    """The Bio.motifs result must match the independent scan: a dropped or altered motif is an error."""
    import Bio.motifs

    monkeypatch.setenv("MOTIFGRID_NO_CACHE", "1")          # parsed here, not the earlier tests' cached result
    real_parse = Bio.motifs.parse

    def drop_last(handle, fmt, *args, **kwargs):
        return list(real_parse(handle, fmt, *args, **kwargs))[:-1]

    monkeypatch.setattr(Bio.motifs, "parse", drop_last)
    with pytest.raises(MotifError, match=r"Bio\.motifs returned 1 motifs but the file has 2"):
        read_motifs(FORMATS_DIR / name)

    def alter(handle, fmt, *args, **kwargs):
        out = list(real_parse(handle, fmt, *args, **kwargs))
        out[1].counts["A"][0] += 1
        return out

    monkeypatch.setattr(Bio.motifs, "parse", alter)
    with pytest.raises(MotifError, match=r"record 2 \(MA0006\.1\): Bio\.motifs and the line scan disagree"):
        read_motifs(FORMATS_DIR / name)


def test_unknown_format_name_and_missing_paths(tmp_path):
    with pytest.raises(MotifError, match=r"arnt\.jaspar: unknown motif format 'fasta'"):
        read_motifs(FORMATS_DIR / "arnt.jaspar", format="fasta")
    with pytest.raises(MotifError, match=r"nope\.meme: no such file"):
        read_motifs(tmp_path / "nope.meme")
    with pytest.raises(MotifError, match="is a directory"):
        read_motifs(tmp_path)
    with pytest.raises(TypeError):
        read_motifs(42)


def test_prob_tolerance_is_explicit():
    with pytest.raises(MotifError):
        read_motifs(BAD_DIR / "prob_sum.meme")
    (m,) = read_motifs(BAD_DIR / "prob_sum.meme", prob_tolerance=0.25)
    assert m.kind == "probabilities"


# ------------------------------------------------------------------------------------------------
# PWM model
# ------------------------------------------------------------------------------------------------


def _motif(matrix, kind, nsites=None):
    mat = np.array(matrix, dtype=np.float64)
    return Motif("T1", "T1", mat, kind, nsites, "test", 1)


def test_pseudocount_counts_by_hand():
    bg = np.array([0.3, 0.2, 0.2, 0.3])
    m = _motif([[3, 1, 0, 0], [0, 0, 0, 8]], "counts", nsites=8)
    p = motif_probabilities(m, bg, 0.1)
    # row 1: N = 4 -> (count + 0.1*bg) / 4.1; row 2: N = 8 -> (count + 0.1*bg) / 8.1
    want = np.array([[3.03 / 4.1, 1.02 / 4.1, 0.02 / 4.1, 0.03 / 4.1],
                     [0.03 / 8.1, 0.02 / 8.1, 0.02 / 8.1, 8.03 / 8.1]])
    np.testing.assert_allclose(p, want, rtol=1e-12)
    pwm = pwm_from_motif(m, bg, 0.1)
    np.testing.assert_allclose(pwm, np.log2(want / bg), rtol=1e-12)
    assert pwm[0, 0] == pytest.approx(1.300659, abs=1e-6)  # log2((3.03/4.1)/0.3)
    np.testing.assert_allclose(motif_probabilities(m, bg, 0), [[0.75, 0.25, 0, 0], [0, 0, 0, 1]])


def test_pseudocount_probabilities_by_hand():
    bg = np.full(4, 0.25)
    row = [[0.5, 0.5, 0.0, 0.0]]
    # nsites known: N = 2 -> (p*2 + 0.1*0.25) / 2.1
    p2 = motif_probabilities(_motif(row, "probabilities", nsites=2), bg, 0.1)
    np.testing.assert_allclose(p2, [[1.025 / 2.1, 1.025 / 2.1, 0.025 / 2.1, 0.025 / 2.1]], rtol=1e-12)
    # nsites unknown: MEME's DEFAULT_SITE_COUNT 20 -> (p*20 + 0.025) / 20.1
    p20 = motif_probabilities(_motif(row, "probabilities"), bg, 0.1)
    np.testing.assert_allclose(p20, [[10.025 / 20.1, 10.025 / 20.1, 0.025 / 20.1, 0.025 / 20.1]], rtol=1e-12)
    # pseudocount 0: probabilities as given; log2(0) is floored at log2(1e-10/bg)
    pwm0 = pwm_from_motif(_motif(row, "probabilities", nsites=2), bg, 0)
    np.testing.assert_allclose(pwm0, [[1.0, 1.0, math.log2(1e-10 / 0.25), math.log2(1e-10 / 0.25)]])
    assert np.all(np.isfinite(pwm0))
    with pytest.raises(ValueError):
        motif_probabilities(_motif(row, "probabilities"), bg, -0.1)
    with pytest.raises(ValueError):
        pwm_from_motif(_motif(row, "probabilities"), np.array([0.5, 0.5, 0.0, 0.0]))


def test_meme_logodds_only_motif():
    # Bio.motifs 'minimal' returns ONE motif here: 'LO' carrying P2's matrix.
    lo, p2 = read_motifs(FORMATS_DIR / "logodds_only.meme")
    assert (lo.id, lo.name, lo.kind, lo.nsites) == ("LO", "only_logodds", "logodds", None)
    np.testing.assert_array_equal(lo.matrix, [[100, -100, -100, -100], [-100, 100, -100, -100]])
    assert (p2.id, p2.kind, p2.nsites) == ("P2", "probabilities", 20.0)
    np.testing.assert_array_equal(p2.matrix, [[0.1, 0.2, 0.3, 0.4]])


def test_logodds_returned_as_is_and_rc():
    lo = _motif([[-40, -57, -72, 77], [116, -353, 59, -493]], "logodds")
    out = pwm_from_motif(lo, np.full(4, 0.25))
    assert np.array_equal(out, lo.matrix) and out is not lo.matrix and out.flags.writeable
    with pytest.raises(ValueError, match="log-odds"):
        motif_probabilities(lo, np.full(4, 0.25))
    pwm = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(reverse_complement(pwm), [[7, 6, 5, 4], [3, 2, 1, 0]])
    with pytest.raises(ValueError):
        reverse_complement(np.zeros((3, 5)))


def _read_fasta(path: Path) -> dict[str, str]:
    seqs, name = {}, None
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            name = line[1:].split()[0]
            seqs[name] = []
        elif line.strip():
            seqs[name].append(line.strip().upper())
    return {k: "".join(v) for k, v in seqs.items()}


def _fimo_rows(path: Path):
    for line in path.read_text().splitlines():
        if not line or line.startswith(("#", "motif_id")):
            continue
        f = line.split("\t")
        yield f[2], int(f[3]), int(f[4]), f[5], float(f[6]), f[9]


@pytest.mark.parametrize("results, both_strands", [("results.tsv", True), ("results-norc.tsv", False)])
def test_scores_reproduce_fimo(results, both_strands):
    """FIMO 5.4.1 defaults: pseudocount 0.1 and MEME's NRDB background (not uniform), averaged with its
    complement when both strands are scanned.  FIMO reports scores on an integer lattice
    (PSSM range 1000, offset floor(min), scale floor(1000/(max-offset))): emulating it reproduces the
    reported scores exactly; the raw scores lie within w*0.5/scale of them."""
    (motif,) = read_motifs(FIMO_DIR / "prodoric_mx000001_meme.txt")
    assert (motif.id, motif.name, motif.length, motif.nsites) == ("MX000001", "MexR", 15, 2.0)
    seqs = _read_fasta(FIMO_DIR / "mibig-genes.fna")
    bg = read_background("nrdb")
    if both_strands:
        bg = (bg + bg[::-1]) / 2
    pwm = pwm_from_motif(motif, bg, pseudocount=0.1)
    offset = math.floor(pwm.min())
    scale = math.floor(1000 / (pwm.max() - offset))
    lattice = np.floor((pwm - offset) * scale + 0.5)
    index = {c: i for i, c in enumerate("ACGT")}
    comp = str.maketrans("ACGT", "TGCA")
    rows = list(_fimo_rows(FIMO_DIR / results))
    assert len(rows) == (6 if both_strands else 1)
    raw_dev = []
    for seq, start, stop, strand, score, matched in rows:
        window = seqs[seq][start - 1:stop]  # FIMO: 1-based inclusive
        assert (window if strand == "+" else window.translate(comp)[::-1]) == matched
        p = pwm if strand == "+" else reverse_complement(pwm)
        q = lattice if strand == "+" else lattice[::-1, ::-1]
        codes = [index[c] for c in window]
        raw = float(sum(p[i, c] for i, c in enumerate(codes)))
        emulated = sum(q[i, c] for i, c in enumerate(codes)) / scale + len(codes) * offset
        assert emulated == pytest.approx(score, abs=1e-4)  # FIMO prints 6 significant digits
        raw_dev.append(abs(raw - score))
    assert max(raw_dev) <= motif.length * 0.5 / scale + 1e-4
    # max deviation seen: 0.0076 (results.tsv), 0.0119 (results-norc.tsv)
    assert max(raw_dev) < (0.01 if both_strands else 0.015)


# ------------------------------------------------------------------------------------------------
# Backgrounds and checksums
# ------------------------------------------------------------------------------------------------


def test_read_background(tmp_path):
    np.testing.assert_array_equal(read_background("uniform"), np.full(4, 0.25))
    np.testing.assert_array_equal(read_background(None), np.full(4, 0.25))
    np.testing.assert_allclose(read_background("nrdb"), NRDB_DNA)
    np.testing.assert_allclose(read_background("0.3,0.2,0.2,0.3"), [0.3, 0.2, 0.2, 0.3])
    np.testing.assert_allclose(read_background("genome", np.array([30, 20, 20, 30])), [0.3, 0.2, 0.2, 0.3])
    bgfile = tmp_path / "bg.txt"
    bgfile.write_text("# order 0\nA 3.1e-01\nC 1.9e-01\nG 1.9e-01\nT 3.1e-01\n# order 1\nAA 0.1\nAC 0.05\n")
    bg = read_background(str(bgfile))
    assert bg.shape == (4,) and bg.dtype == np.float64 and bg.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(bg, [0.31, 0.19, 0.19, 0.31])
    with pytest.raises(MotifError, match="no genome background"):
        read_background("genome")
    with pytest.raises(MotifError, match="> 0"):
        read_background("0.5,0.5,0,0")
    with pytest.raises(MotifError, match="4 comma-separated"):
        read_background("0.5,0.5")
    bad = tmp_path / "bad_bg.txt"
    bad.write_text("A 0.3\nC 0.2\nG 0.2\n")
    with pytest.raises(MotifError, match=r"bad_bg\.txt: background file lacks T"):
        read_background(str(bad))
    bad.write_text("A 0.3\nC x\nG 0.2\nT 0.3\n")
    with pytest.raises(MotifError, match=r"bad_bg\.txt line 2: non-numeric"):
        read_background(str(bad))
    with pytest.raises(MotifError):
        read_background("no-such-background")


def test_motifs_checksum():
    path = FORMATS_DIR / "arnt.jaspar.gz"
    assert motifs_checksum(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert motifs_checksum("JASPAR2024:CORE:vertebrates") == hashlib.sha256(
        b"JASPAR2024:CORE:vertebrates").hexdigest()
    assert motifs_checksum("JASPAR2024") != motifs_checksum("JASPAR2024:CORE:vertebrates")
    with pytest.raises(MotifError, match="no such file"):
        motifs_checksum(FORMATS_DIR / "missing.jaspar")


def test_parsed_files_cached_by_their_bytes(tmp_path, monkeypatch):
    """A file read again comes from the cache (no parse), equal to the parse field by field with its source
    the path now given; other bytes, another tolerance or a corrupt entry parse again; the cache can be off."""
    import dask.config

    from pipeline.motifs import cache, sniff

    shared = Path(__file__).parents[2] / ".." / "shared" / "data" / "motifs"
    src = next((p for p in [shared / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"] if p.exists()), None)
    text = src.read_text() if src else ">MA0001.1 X\nA [ 1 2 3 ]\nC [ 4 5 6 ]\nG [ 7 8 9 ]\nT [ 1 1 1 ]\n"
    a, b = tmp_path / "a.jaspar", tmp_path / "b.jaspar"
    a.write_text(text)
    b.write_text(text)
    with dask.config.set({"motifgrid.motifs.cache-dir": str(tmp_path / "cache")}):
        parsed = read_motifs(a)
        calls = []
        monkeypatch.setitem(sniff._PARSERS, "jaspar", lambda *args: calls.append(1) or [])
        cached = read_motifs(b, select=[parsed[0].id])         # same bytes, another path
        assert not calls and len(cached) == 1 and cached[0].source == str(b)
        again = read_motifs(b)
        assert [(m.id, m.name, m.kind, m.nsites, m.record) for m in again] == \
            [(m.id, m.name, m.kind, m.nsites, m.record) for m in parsed]
        assert all(np.array_equal(x.matrix, y.matrix) and not y.matrix.flags.writeable for x, y in zip(parsed, again))
        read_motifs(b, prob_tolerance=0.05)                     # another key: parsed
        assert calls == [1]
        for entry in (tmp_path / "cache").glob("*.npz"):
            entry.write_bytes(b"not an npz")
        assert read_motifs(b) == [] and calls == [1, 1]        # a corrupt entry: parsed again
    with dask.config.set({"motifgrid.motifs.cache-dir": ""}):
        assert cache.cache_dir() is None
    monkeypatch.setenv("MOTIFGRID_NO_CACHE", "1")
    assert cache.cache_dir() is None


def test_named_releases_cached(tmp_path, monkeypatch):
    """A named release read again comes from the cache (no query), equal to the query
    field by field; a selection within it is made from its entry (no query); a selection from the whole release is
    another entry; a changed database file is read again."""
    import dask.config

    from pipeline.motifs import releases

    with dask.config.set({"motifgrid.motifs.cache-dir": str(tmp_path / "cache")}):
        queried = read_motifs("JASPAR2024:CORE:vertebrates")
        with monkeypatch.context() as m:
            m.setattr(releases, "_query_release", lambda src, spec: pytest.fail(f"{src} queried"))
            cached = read_motifs("JASPAR2024:CORE:vertebrates")
            ctcf = read_motifs("JASPAR2024:core:Vertebrates:CTCF")          # from the collection's entry
            assert [x.id for x in ctcf] == ["MA0139.2", "MA1929.2", "MA1930.2"]
            assert {x.source for x in ctcf} == {"JASPAR2024:core:Vertebrates:CTCF"}
            with pytest.raises(pytest.fail.Exception, match="MA0139.2 queried"):
                read_motifs("JASPAR2024:MA0139.2")             # not cached yet: queried
        assert [(x.id, x.name, x.kind, x.nsites, x.record, x.source) for x in cached] == \
            [(x.id, x.name, x.kind, x.nsites, x.record, x.source) for x in queried]
        assert all(np.array_equal(x.matrix, y.matrix) for x, y in zip(queried, cached))
        assert [x.id for x in read_motifs("JASPAR2024:MA0139.2")] == ["MA0139.2"]
        name = releases._cache_name(repr(("JASPAR2024", "CORE", ["vertebrates"], None)), "JASPAR2024")
        assert (tmp_path / "cache" / f"{name}.npz").exists()
        db = tmp_path / "JASPAR2024.sqlite"
        db.write_bytes(b"a database")
        monkeypatch.setattr(releases, "_database_file", lambda release: str(db))
        first = releases._cache_name("JASPAR2024:CORE:vertebrates", "JASPAR2024")
        os.utime(db, ns=(0, db.stat().st_mtime_ns + 10**9))
        assert releases._cache_name("JASPAR2024:CORE:vertebrates", "JASPAR2024") not in (first, name)
        monkeypatch.undo()
    assert releases._cache_name("JASPAR2099", "JASPAR2099") is None      # no such database: nothing cached


def test_motif_error_survives_pickling():
    """A MotifError crosses processes (Dask workers, enrich's input reader) with its fields and message."""
    import pickle

    from pipeline.motifs.model import MotifError

    e = MotifError("m.jaspar", "row 'C' has 7 values", line=14, record=2, motif_id="MA0001.1", hint="--format")
    f = pickle.loads(pickle.dumps(e))
    assert type(f) is MotifError and str(f) == str(e) == "m.jaspar line 14 record 2 (MA0001.1): row 'C' has 7 values (--format)"
    assert (f.source, f.line, f.record, f.motif_id, f.problem, f.hint) == ("m.jaspar", 14, 2, "MA0001.1",
                                                                             "row 'C' has 7 values", "--format")


def test_short_probability_rows_are_renormalised_with_one_warning(tmp_path):
    """Probability rows short of 1 (by more than the tolerance) in two motifs: one warning with their count and the
    first, each row divided by its sum (the matrix as read is kept); a row over 1 stays an error; the warning comes
    again when the parse is cached."""
    from pipeline.motifs.sniff import ShortRowsWarning

    meme = ("MEME version 4\n\nALPHABET= ACGT\n\nMOTIF A1\nletter-probability matrix: alength= 4 w= 2 nsites= 20\n"
            "0.1 0.2 0.3 0.4\n0.2 0.2 0.2 0.2\nMOTIF B2\nletter-probability matrix: alength= 4 w= 3 nsites= 20\n"
            "0.25 0.25 0.25 0.25\n0.3 0.3 0.2 0.1\n0.4 0.3 0.1 0.1\n")
    path = tmp_path / "short.meme"
    path.write_text(meme)
    for _ in range(2):                                              # parsed, then from the cache
        with pytest.warns(ShortRowsWarning) as seen:
            a, b = read_motifs(path)
        assert [str(w.message) for w in seen if w.category is ShortRowsWarning] == [
            f"{path}: 3 probability row(s) in 2 motif(s) sum to less than 1 - 0.02 (first: record 1 (A1) position 2 "
            "sums to 0.8); each is divided by its sum"]
    assert a.matrix[1].tolist() == [0.2] * 4
    np.testing.assert_allclose(motif_probabilities(b, np.full(4, 0.25), 0.0)[2], [4 / 9, 3 / 9, 1 / 9, 1 / 9])
    path.write_text(meme.replace("0.4 0.3 0.1 0.1", "0.4 0.3 0.3 0.1"))
    with pytest.raises(MotifError, match=r"position 3 of a probability matrix sums to 1.1 \(more than 1 \+ 0.02\)"):
        read_motifs(path)


def test_a_background_that_does_not_sum_to_one_is_renormalised_with_a_warning(recwarn):
    """`--background 0.3,0.2,0.2,0.2` was renormalised silently; it is still divided by its sum, with a one-line
    warning saying so (as motif rows short of 1 are); a sum within rounding of 1 says nothing."""
    from pipeline.motifs import read_background
    from pipeline.motifs.background import BackgroundWarning

    with pytest.warns(BackgroundWarning, match=r"^0\.3,0\.2,0\.2,0\.2: the background sums to 0\.9, not 1: each value "
                                               r"is divided by the sum \(A,C,G,T = 0\.3333,0\.2222,0\.2222,0\.2222\)"):
        bg = read_background("0.3,0.2,0.2,0.2")
    assert bg == pytest.approx([1 / 3, 2 / 9, 2 / 9, 2 / 9])
    recwarn.clear()
    read_background("0.295,0.205,0.205,0.296")
    assert not [w for w in recwarn if issubclass(w.category, BackgroundWarning)]
