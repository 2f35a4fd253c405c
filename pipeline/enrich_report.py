"""The pictures of ``motifgrid enrich``: the top motifs with their logos and enrichment bars.

Two files from an enrichment table (:func:`pipeline.enrich_stats.enrichment_table`, best first) and the
motifs' letter probabilities:

- ``enrichment.png``: one row per top motif: its logo (information content), a bar of
  −log10 p, and the share of targets and controls with a site;
- ``enrichment.html``: a self-contained page (no links out, logos as PNG data URIs, bars as CSS) with the
  same rows and every column of the table's head, the run parameters from the table's metadata.

Drawing needs matplotlib, of the ``report`` extra (``pip install 'motifgrid[report]'``): the plotting stack
stays off the scan workers and out of installs that only scan; :func:`available` says whether it is here,
and :class:`ReportUnavailable` is the one-line error when it is not.  Logos are drawn here from one outline
per letter under affine maps: logomaker lays out each glyph's text anew (~3 ms a letter), which made the
20 logos of a report (drawn twice: PNG and page) 8 s of a 10-second enrichment.
"""
from __future__ import annotations

import base64
import functools
import html
import io
import json
import math
import os

import numpy as np

from pipeline import MotifgridError, storage

PNG_NAME = "enrichment.png"
HTML_NAME = "enrichment.html"
DEFAULT_TOP = 20
_COLORS = {"A": "#109648", "C": "#255C99", "G": "#F7B32B", "T": "#D62839"}


class ReportUnavailable(MotifgridError, RuntimeError):
    """matplotlib is not installed (the ``report`` extra)."""


def available() -> bool:
    """Whether the pictures can be drawn here (matplotlib importable)."""
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _need() -> None:
    if not available():
        raise ReportUnavailable("the enrichment pictures need matplotlib: pip install 'motifgrid[report]'")


def sci(log10_value: float, digits: int = 2) -> str:
    """``10 ** log10_value`` written as ``m.me-N`` without going through a float (valid far below 1e-308)."""
    if not math.isfinite(log10_value):
        return "0" if log10_value < 0 else "inf"
    e = math.floor(log10_value)
    m = 10.0 ** (log10_value - e)
    if round(m, digits - 1) >= 10.0:
        m, e = m / 10.0, e + 1
    return f"{m:.{digits - 1}f}e{e:+d}".replace("e+", "e")


def information(ppm) -> np.ndarray:
    """Letter heights of a sequence logo, ``(w, 4)`` float64 bits: each column's probabilities times its information
    content ``2 + Σ p log2 p`` (uniform background, no small-sample correction; logomaker's ``information``)."""
    p = np.asarray(ppm, dtype=np.float64)
    p = p / p.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log2(p), 0.0)
    return p * (2.0 + plogp.sum(axis=1, keepdims=True))


@functools.lru_cache(maxsize=None)
def _glyph(letter: str):
    """The letter's outline (bold sans-serif) scaled to the unit square: every letter of every logo is this path
    under an affine map (laying out each glyph's text anew cost ~3 ms a letter: 8 s for 20 logos drawn twice)."""
    from matplotlib.font_manager import FontProperties  # noqa: PLC0415
    from matplotlib.textpath import TextPath  # noqa: PLC0415
    from matplotlib.transforms import Affine2D  # noqa: PLC0415

    path = TextPath((0, 0), letter, size=1, prop=FontProperties(family="DejaVu Sans", weight="bold"))
    ext = path.get_extents()
    return Affine2D().translate(-ext.x0, -ext.y0).scale(1 / ext.width, 1 / ext.height).transform_path(path)


def _draw_logo(ax, ppm, columns: int | None = None) -> None:
    """The logo of ``ppm`` on ``ax`` (letters stacked by height, the tallest on top); with ``columns``, letters as
    wide as in a logo of that many columns."""
    from matplotlib.collections import PatchCollection  # noqa: PLC0415
    from matplotlib.patches import PathPatch  # noqa: PLC0415
    from matplotlib.transforms import Affine2D  # noqa: PLC0415

    heights = information(ppm)
    patches, colors = [], []
    for i, col in enumerate(heights):
        y = 0.0
        for j in np.argsort(col, kind="stable"):
            if col[j] > 1e-3:
                patches.append(PathPatch(Affine2D().scale(0.9, col[j]).translate(i - 0.45, y)
                                         .transform_path(_glyph("ACGT"[j]))))
                colors.append(_COLORS["ACGT"[j]])
                y += col[j]
    ax.add_collection(PatchCollection(patches, facecolors=colors, edgecolors="none", linewidths=0))
    ax.set_ylim(0, 2)
    ax.set_xlim(-0.5, max(columns or 0, len(heights)) - 0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)


def _logo_png(ppm, dpi: int = 80) -> bytes:
    from matplotlib.figure import Figure  # noqa: PLC0415

    fig = Figure(figsize=(max(1.2, 0.22 * len(ppm)), 0.7))
    ax = fig.add_axes((0, 0, 1, 1))
    _draw_logo(ax, ppm)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, transparent=True)
    return buf.getvalue()


def _rows(table, top: int) -> list[dict]:
    return table.slice(0, min(int(top), table.num_rows)).to_pylist()


def write_png(path, rows: list[dict], probabilities: dict, title: str) -> None:
    """The overview picture: logo, −log10 p bar and target/control shares of each row."""
    from matplotlib.figure import Figure  # noqa: PLC0415

    n = max(len(rows), 1)
    fig = Figure(figsize=(11, 0.62 * n + 1.0))
    grid = fig.add_gridspec(n, 3, width_ratios=(3.2, 4.0, 2.2), left=0.02, right=0.98, top=1 - 0.55 / (0.62 * n + 1),
                            bottom=0.35 / (0.62 * n + 1), hspace=0.35, wspace=0.05)
    fig.suptitle(title, fontsize=11)
    best = max([-r["log10_pvalue"] for r in rows] + [1e-9])
    columns = max([len(probabilities[r["motif_id"]]) for r in rows if r["motif_id"] in probabilities] + [1])
    for i, r in enumerate(rows):
        ax = fig.add_subplot(grid[i, 0])
        ppm = probabilities.get(r["motif_id"])
        if ppm is not None:
            _draw_logo(ax, ppm, columns)
        else:
            ax.set_axis_off()
        bar = fig.add_subplot(grid[i, 1])
        bar.barh([0], [-r["log10_pvalue"]], color="#255C99", height=0.6)
        bar.set_xlim(0, best * 1.02)
        bar.set_ylim(-0.5, 0.5)
        bar.set_axis_off()
        bar.text(0.01, 0.5, f"{r['rank']}. {r['motif_name']} ({r['motif_id']})   p = {sci(r['log10_pvalue'])}",
                 transform=bar.transAxes, va="center", fontsize=8, color="black",
                 bbox={"facecolor": "white", "alpha": 0.7, "linewidth": 0, "pad": 1})
        share = fig.add_subplot(grid[i, 2])
        pos, neg = r["pos_seqs"] / r["pos_total"], r["neg_seqs"] / r["neg_total"]
        share.barh([0.2, -0.2], [pos, neg], height=0.35, color=["#D62839", "#999999"])
        share.set_xlim(0, 1.45)
        share.set_ylim(-0.5, 0.5)
        share.set_axis_off()
        share.text(1.03, 0.2, f"{100 * pos:.0f}% targets", va="center", fontsize=7)
        share.text(1.03, -0.2, f"{100 * neg:.0f}% controls", va="center", fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    storage.atomic_write_bytes(path, buf.getvalue())


_CSS = """body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}
td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;font-size:13px}
td.l,th.l{text-align:left}.bar{background:#255C99;height:12px}.pos{background:#D62839;height:6px}
.neg{background:#999;height:6px}caption{text-align:left;font-size:12px;color:#555;padding-bottom:6px}"""


def html_page(rows: list[dict], probabilities: dict, title: str, params: dict) -> str:
    """The self-contained HTML page of the rows."""
    best = max([-r["log10_pvalue"] for r in rows] + [1e-9])
    log_tests = math.log10(max(int(params.get("n_tests", 1)), 1))     # E = p × motifs tested
    e = html.escape
    body = []
    for r in rows:
        ppm = probabilities.get(r["motif_id"])
        logo = (f'<img alt="logo of {e(r["motif_id"])}" src="data:image/png;base64,'
                f'{base64.b64encode(_logo_png(ppm)).decode()}">' if ppm is not None else "")
        pos, neg = r["pos_seqs"] / r["pos_total"], r["neg_seqs"] / r["neg_total"]
        cluster = "" if r.get("cluster") is None else f'{r["cluster"]} ({e(str(r.get("representative")))})'
        body.append(
            f'<tr><td>{r["rank"]}</td><td class="l">{e(r["motif_name"])}</td><td class="l">{e(r["motif_id"])}</td>'
            f'<td class="l">{logo}</td>'
            f'<td class="l"><div class="bar" style="width:{200 * -r["log10_pvalue"] / best:.1f}px"></div></td>'
            f'<td>{sci(r["log10_pvalue"])}</td><td>{sci(r["log10_pvalue"] + log_tests)}</td>'
            f'<td>{r["qvalue"]:.2g}</td><td>{r["odds_ratio"]:.3g}</td>'
            f'<td class="l"><div class="pos" style="width:{100 * pos:.1f}px"></div>'
            f'<div class="neg" style="width:{100 * neg:.1f}px"></div></td>'
            f'<td>{r["pos_seqs"]}/{r["pos_total"]}</td><td>{r["neg_seqs"]}/{r["neg_total"]}</td>'
            f'<td class="l">{cluster}</td></tr>')
    head = ("<tr><th>rank</th><th class='l'>motif</th><th class='l'>id</th><th class='l'>logo</th>"
            "<th class='l'>−log10 p</th><th>p-value</th><th>E-value</th><th>q-value</th><th>odds ratio</th>"
            "<th class='l'>targets / controls with a site</th><th>targets</th><th>controls</th>"
            "<th class='l'>cluster</th></tr>")
    cap = e(", ".join(f"{k}={v}" for k, v in params.items() if k != "motifgrid_version"))
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>{_CSS}</style>"
            f"</head><body><h2>{e(title)}</h2><table><caption>{cap}</caption>{head}{''.join(body)}</table>"
            "</body></html>")


def write_report(table, probabilities: dict, out_dir, *, top: int = DEFAULT_TOP,
                 title: str = "motifgrid enrich: top motifs") -> tuple[str, str]:
    """Write ``enrichment.png`` and ``enrichment.html`` of the ``top`` first rows of ``table`` into
    ``out_dir``; ``probabilities`` maps motif id → (w, 4) letter probabilities.  Returns both paths."""
    _need()
    meta = (table.schema.metadata or {}).get(b"motifgrid.enrich")
    params = json.loads(meta) if meta else {}
    rows = _rows(table, top)
    png = storage.join(os.fspath(out_dir), PNG_NAME)
    page = storage.join(os.fspath(out_dir), HTML_NAME)
    write_png(png, rows, probabilities, title)
    storage.atomic_write_bytes(page, html_page(rows, probabilities, title, params).encode())
    return png, page
