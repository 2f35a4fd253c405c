"""Choosing motifs by id or name: ``--motif ID_OR_NAME`` and the selection part of a release name
(``JASPAR2024:MA0139.2,MA0079.5``, ``JASPAR2024:CTCF``).

A selector matches a motif whose id equals it (``MA0139.2``), whose id without its ``.version`` suffix equals it
(``MA0139``: every version present), or whose name equals it (``CTCF``: every matrix of that name); case is
ignored when nothing matches as written.  Pure functions over ids and names: :mod:`pipeline.motifs` reads the
motifs and raises the errors.
"""
from __future__ import annotations

import difflib
import re

__all__ = ["split_selectors", "base_id", "select", "lookup", "near", "describe_unknown"]

_VERSIONED = re.compile(r"^(.+)\.(\d+)$")


def split_selectors(text: str) -> list[str]:
    """``"MA0139.2, CTCF"`` → ``["MA0139.2", "CTCF"]``; empty items are an error (a stray comma)."""
    items = [t.strip() for t in str(text).split(",")]
    if not all(items):
        raise ValueError(f"empty motif id or name in {text!r}")
    return items


def base_id(motif_id: str) -> str:
    """``MA0139.2`` → ``MA0139``; an id without a numeric version suffix is returned as it is."""
    m = _VERSIONED.match(motif_id)
    return m.group(1) if m else motif_id


def select(selectors: list[str], ids: list[str], names: list[str]) -> tuple[list[int], list[str]]:
    """Indices (in the given order) of every item some selector matches, and the selectors that match none.
    Case is ignored only when nothing matches as written (JASPAR's human ``SP1`` and mouse ``Sp1`` differ)."""
    exact: dict = {}
    folded: dict = {}
    for i, (mid, name) in enumerate(zip(ids, names)):
        for kind, word in (("id", mid), ("name", name), ("base", base_id(mid))):
            exact.setdefault((kind, word), set()).add(i)
            folded.setdefault((kind, word.casefold()), set()).add(i)
    hit: set = set()
    unknown = []
    for sel in selectors:
        kinds = ("id", "name") if _VERSIONED.match(sel) else ("id", "name", "base")
        found = set().union(*(exact.get((k, sel), set()) for k in kinds))
        if not found:
            found = set().union(*(folded.get((k, sel.casefold()), set()) for k in kinds))
        if not found:
            unknown.append(sel)
        hit |= found
    return sorted(hit), unknown


def near(selector: str, ids: list[str], names: list[str], n: int = 5) -> list[str]:
    """Ids and names that look like ``selector``: those it starts, then the closest by difflib's ratio."""
    words = list(dict.fromkeys([*ids, *names, *(base_id(i) for i in ids)]))
    folded = {}
    for w in words:
        folded.setdefault(w.casefold(), w)
    s = selector.casefold()
    prefix = [w for k, w in folded.items() if k.startswith(s) and k != s]
    close = [folded[k] for k in difflib.get_close_matches(s, list(folded), n=n, cutoff=0.6)]
    return list(dict.fromkeys(sorted(prefix, key=len)[:n] + close))[:n]


def lookup(rows, selectors: list[str]) -> tuple[list[str], list[str]]:
    """Matrix ids (``BASE.VERSION``) that ``selectors`` choose from a JASPAR database's ``(base id, version, name,
    collection)`` rows, in the order given, and the selectors that match none: an id with its version as it is
    (older versions too), a base id as its latest version, a name as the latest version of every CORE matrix of
    that name (of any collection when CORE has none).  Ids in any case; names in any case only when none is
    written so (JASPAR's human SP1 and mouse Sp1 are different)."""
    latest: dict = {}
    for b, v, _, _ in rows:
        latest[b] = max(latest.get(b, 0), int(v))
    full = {f"{b}.{v}".casefold(): f"{b}.{v}" for b, v, _, _ in rows}
    bases = {b.casefold(): b for b in latest}
    out: list[str] = []
    unknown = []
    for sel in selectors:
        key = sel.casefold()
        if key in full:
            found = [full[key]]
        elif key in bases and base_id(sel) == sel:
            found = [f"{bases[key]}.{latest[bases[key]]}"]
        else:
            named = ([(b, c) for b, _, n, c in rows if n == sel]
                     or [(b, c) for b, _, n, c in rows if (n or "").casefold() == key])
            core = [b for b, c in named if c == "CORE"] or [b for b, _ in named]
            found = [f"{b}.{latest[b]}" for b in dict.fromkeys(core)]
        out += found
        if not found:
            unknown.append(sel)
    return list(dict.fromkeys(out)), unknown


def describe_unknown(unknown: list[str], ids: list[str], names: list[str]) -> str:
    """``no motif with the id or name 'CTFC' (near: CTCF, ...) among its N motifs`` (the first three)."""
    parts = []
    for sel in unknown[:3]:
        close = near(sel, ids, names)
        parts.append(f"{sel!r} ({'near: ' + ', '.join(close) if close else 'nothing near it'})")
    more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
    return f"no motif with the id or name {', '.join(parts)}{more} among its {len(set(ids))} motifs"
