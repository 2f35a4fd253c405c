"""Named JASPAR releases shipped inside pyjaspar (``JASPAR2024``, ``JASPAR2024:CORE:vertebrates``,
``JASPAR2024:MA0139.2,CTCF``): parsing a release name, and reading its motifs."""
from __future__ import annotations

import os
import re

from pipeline.motifs.model import Motif, MotifError
from pipeline.motifs.records import Record, bio_matrix, finish
from pipeline.motifs.selectors import select_motifs, unknown_error

_RELEASE_RE = re.compile(r"JASPAR\d{4}(:.*)?")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

#: JASPAR's collections: a release name's second field is one of them, or else a selection of ids and names
JASPAR_COLLECTIONS = ("CORE", "CNE", "PHYLOFACTS", "SPLICE", "POLII", "FAM", "PBM", "PBM_HOMEO", "PBM_HLH",
                      "UNVALIDATED")
_RELEASE_FORM = ("JASPARyyyy[:COLLECTION[:tax_group[,tax_group]][:ID_OR_NAME,...]] or "
                 "JASPARyyyy:ID_OR_NAME[,ID_OR_NAME...]")


def parse_release(src: str) -> tuple[str, str | None, list[str] | None, list[str] | None] | None:
    """``(release, collection, tax groups, selectors)`` of a release name, None when ``src`` is not one.
    ``collection`` is None for a bare selection (``JASPAR2024:MA0139.2,CTCF``), looked up in the whole release."""
    if not _RELEASE_RE.fullmatch(src):
        return None
    release, _, rest = src.partition(":")
    head = rest.partition(":")[0]
    if rest and head.upper() not in JASPAR_COLLECTIONS:        # JASPAR2024:ID_OR_NAME,...  (names may hold '::')
        return release, None, None, _selectors(src, rest)
    parts = rest.split(":", 2) if rest else []
    collection = parts[0].upper() if parts else "CORE"
    tax = parts[1] if len(parts) > 1 and parts[1] else None
    sel = _selectors(src, parts[2]) if len(parts) > 2 else None
    taxa = None
    if tax is not None:
        taxa = [t.strip().lower() for t in tax.split(",")]
        if not all(_WORD_RE.fullmatch(t) for t in taxa):
            raise MotifError(src, f"bad tax group {tax!r} (a release name is {_RELEASE_FORM})")
    return release, collection, taxa, sel


def _selectors(src: str, text: str) -> list[str]:
    from pipeline.motifs.selection import split_selectors  # noqa: PLC0415

    try:
        return split_selectors(text)
    except ValueError as e:
        raise MotifError(src, f"{e} (a release name is {_RELEASE_FORM})") from None


def read_release(src: str, spec) -> list[Motif]:
    """The motifs of a release name parsed by :func:`parse_release` (``spec``), through pyjaspar, or from the
    parsed-motif cache (:mod:`pipeline.motifs.cache`): pyjaspar's SQL queries for the 879 JASPAR 2024
    vertebrates took 0.9 s on the 2-core VM, more than a warm scan of 300 peaks (docs/benchmarks.md).  A
    selection within a collection (``JASPAR2024:CORE::CTCF``) is made from the collection's entry, which every
    selection of it, and every spelling of it (``JASPAR2024``, ``JASPAR2024:CORE``), shares."""
    from pipeline.motifs import cache  # noqa: PLC0415

    release, collection, taxa, sel = spec
    whole = (release, collection, taxa, None) if collection is not None else spec
    name = _cache_name(repr(whole), release)
    motifs = cache.load(name, src) if name is not None else None
    if motifs is None:
        motifs = _query_release(src, whole)
        if name is not None:
            cache.store(name, motifs)
    return select_motifs(motifs, sel, src) if whole is not spec and sel else motifs


def _cache_name(key: str, release: str) -> str | None:
    """The cache entry of a release query (``key``: its parsed name, see :func:`read_release`): the key, pyjaspar's
    version and its database file's size and time; None where the file is not where pyjaspar keeps it (then
    nothing is cached)."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    from pipeline.motifs import cache  # noqa: PLC0415

    path = _database_file(release)
    if path is None:
        return None
    try:
        st = os.stat(path)
        ver = version("pyjaspar")
    except (OSError, PackageNotFoundError):
        return None
    return cache.key(repr((key, ver, st.st_size, st.st_mtime_ns)).encode(), "jaspar-release", 0.0)


def _database_file(release: str) -> str | None:
    """pyjaspar's SQLite file of ``release``, found without importing pyjaspar (which imports much of Biopython:
    0.08 s); None without pyjaspar."""
    import importlib.util  # noqa: PLC0415

    found = importlib.util.find_spec("pyjaspar")
    if found is None or not found.submodule_search_locations:
        return None
    return os.path.join(list(found.submodule_search_locations)[0], "data", f"{release}.sqlite")


def _query_release(src: str, spec) -> list[Motif]:
    release, collection, taxa, sel = spec
    try:
        import pyjaspar  # noqa: PLC0415
    except ImportError:
        raise MotifError(src, "pyjaspar is not installed; cannot read a named JASPAR release") from None
    releases = getattr(pyjaspar, "jaspar_releases", {})
    if release not in releases:
        raise MotifError(src, f"unknown JASPAR release {release!r} (pyjaspar has "
                         f"{', '.join(sorted(releases))})")
    import warnings  # noqa: PLC0415

    db = pyjaspar.jaspardb(release=release)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyjaspar warns on 0 motifs and unknown ids; we raise instead
        if collection is None:
            bio = [db.fetch_motif_by_id(mid) for mid in _release_lookup(db, src, sel)]
        else:
            bio = db.fetch_motifs(collection=collection, tax_group=taxa)
    recs = [Record(b.matrix_id, b.name or b.matrix_id, None, bio_matrix(b), None, "counts") for b in bio]
    if not recs:
        raise MotifError(src, "0 motifs in this release/collection/tax group" + _near_names(db, collection, taxa))
    return finish(recs, src)


def _near_names(db, collection: str | None, taxa: list | None) -> str:
    """What a release name with no motif may have meant: the collection or tax group not in the release, its near
    name (``vertebrate`` → ``vertebrates``) and the release's names."""
    import difflib  # noqa: PLC0415

    collections = sorted(r[0] for r in db.conn.execute("select distinct COLLECTION from MATRIX") if r[0])
    groups = sorted(r[0] for r in db.conn.execute("select distinct VAL from MATRIX_ANNOTATION where TAG='tax_group'")
                    if r[0])
    for kind, given, names in (("collection", [collection] if collection else [], collections),
                               ("tax group", taxa or [], groups)):
        for name in given:
            if name in names or name.upper() in names:
                continue
            near = difflib.get_close_matches(name, names, 1, 0.6)
            return (f": {kind} {name!r} is not in this release" + (f" (did you mean {near[0]!r}?)" if near else "")
                    + f"; its {kind}s: {', '.join(names)}")
    return ""


def _release_lookup(db, src: str, selectors: list[str]) -> list[str]:
    """Matrix ids (``BASE.VERSION``) of a selection from the whole release (:func:`pipeline.motifs.selection.lookup`)."""
    from pipeline.motifs.selection import lookup  # noqa: PLC0415

    rows = db.conn.execute("select BASE_ID, VERSION, NAME, COLLECTION from MATRIX").fetchall()
    found, unknown = lookup(rows, selectors)
    if unknown:
        raise unknown_error(src, unknown, [f"{b}.{v}" for b, v, _, _ in rows], [r[2] or "" for r in rows])
    return found
