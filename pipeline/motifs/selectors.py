"""Choosing motifs by id or name from what was read (``--motif``, the selection part of a release name): the
rules are :mod:`pipeline.motifs.selection`'s, the errors (with near ids and names) are :class:`MotifError`."""
from __future__ import annotations

from pipeline.motifs.model import Motif, MotifError


def unknown_error(src: str, unknown: list[str], ids: list[str], names: list[str]) -> MotifError:
    """The MotifError for selectors that match nothing, with the near ids and names."""
    from pipeline.motifs.selection import describe_unknown  # noqa: PLC0415

    return MotifError(src, describe_unknown(unknown, ids, names))


def select_motifs(motifs: list[Motif], selectors, src: str | None = None) -> list[Motif]:
    """The motifs that ``selectors`` (ids or names, see :mod:`pipeline.motifs.selection`) choose, in source order.

    An id selects that motif; an id without its ``.version`` every version present; a name every motif of that
    name; case is ignored when nothing matches as written.  A selector that matches nothing is a
    :class:`MotifError` listing near ids and names."""
    from pipeline.motifs.selection import select  # noqa: PLC0415

    if isinstance(selectors, str):
        selectors = [selectors]
    src = src if src is not None else (motifs[0].source if motifs else None)
    keep, unknown = select(list(selectors), [m.id for m in motifs], [m.name for m in motifs])
    if unknown:
        raise unknown_error(src, unknown, [m.id for m in motifs], [m.name for m in motifs])
    return [motifs[i] for i in keep]
