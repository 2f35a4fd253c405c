"""The pictures of ``motifgrid enrich``: the top motifs with their logos and enrichment bars.

Two files from an enrichment table (:func:`pipeline.enrich.stats.enrichment_table`, best first) and the
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

from pipeline import MotifgridError
from pipeline.io import storage

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


def _sci_value(x: float) -> str:
    """A value in [0, 1] written as :func:`sci` writes p and E (``5.2e-6``; 1 and 0 as they are)."""
    return "1" if x >= 1 else ("0" if x <= 0 else sci(math.log10(x)))


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


def _logo_paths(ppm, place) -> tuple[list, list]:
    """The letters of the logo of ``ppm`` (stacked by height, the tallest on top; column ``i`` spans x ``i - 0.5 ..
    i + 0.5``, heights in bits) as outline paths under the affine map ``place`` (logo → drawing coordinates), with
    their colours: plain paths for one collection (a ``PathPatch`` artist per letter was half of a report's time)."""
    from matplotlib.transforms import Affine2D  # noqa: PLC0415

    paths, colors = [], []
    for i, col in enumerate(information(ppm)):
        y = 0.0
        for j in np.argsort(col, kind="stable"):
            if col[j] > 1e-3:
                glyph = Affine2D().scale(0.9, col[j]).translate(i - 0.45, y) + place
                paths.append(glyph.transform_path(_glyph("ACGT"[j])))
                colors.append(_COLORS["ACGT"[j]])
                y += col[j]
    return paths, colors


def _rectangle(xy, width: float, height: float):
    """The outline path of a rectangle in drawing coordinates (as a collection of patches would take it)."""
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    r = Rectangle(xy, width, height)
    return r.get_transform().transform_path(r.get_path())


def _collection(paths: list, colors: list):
    from matplotlib.collections import PathCollection  # noqa: PLC0415

    return PathCollection(paths, facecolors=colors, edgecolors="none", linewidths=0)


class _LogoPainter:
    """One figure and axes reused for every logo image of a page (an Axes costs ~12 ms to make: 20 logos and 60
    panels were 1 s of a report)."""

    def __init__(self):
        from matplotlib.figure import Figure  # noqa: PLC0415
        from matplotlib.transforms import Affine2D  # noqa: PLC0415

        self.fig = Figure()
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_axis_off()
        self.ax.set_ylim(0, 2)
        self.identity = Affine2D()

    def png(self, ppm, dpi: int = 80) -> bytes:
        self.fig.set_size_inches(max(1.2, 0.22 * len(ppm)), 0.7)
        coll = self.ax.add_collection(_collection(*_logo_paths(ppm, self.identity)))
        self.ax.set_xlim(-0.5, len(ppm) - 0.5)
        buf = io.BytesIO()
        try:
            self.fig.savefig(buf, format="png", dpi=dpi, transparent=True)
        finally:
            coll.remove()
        return buf.getvalue()


def preload() -> None:
    """Load what drawing the pictures needs (matplotlib's modules, the Agg canvas and its PNG writer, the font, the
    four glyphs) by drawing a tiny picture.  :mod:`pipeline.enrich.run` runs it on a thread while its scan runs (on a GPU
    the command only waits then); nothing else may draw meanwhile (matplotlib is not thread-safe)."""
    if not available():
        return
    from matplotlib.figure import Figure  # noqa: PLC0415

    fig = Figure(figsize=(1, 1))
    ax = fig.add_axes((0, 0, 1, 1))
    paths, colors = _logo_paths(np.full((1, 4), 0.25) + np.eye(4)[:1] * 0.5, ax.transData)
    ax.add_collection(_collection(paths + [_rectangle((0, 0), 1, 1)], colors + ["#255C99"]))
    ax.text(0, 0, "A", fontsize=8, bbox={"facecolor": "white", "alpha": 0.7, "linewidth": 0, "pad": 1})
    fig.savefig(io.BytesIO(), format="png", dpi=20)


def _rows(table, top: int) -> list[dict]:
    return table.slice(0, min(int(top), table.num_rows)).to_pylist()


#: the overview's panels: widths (logo, −log10 p bar, shares) and the gap between them, in drawing units; a row is
#: one unit high, of which ``_ROW_FILL`` is drawn
_WIDTHS, _GAP, _ROW_FILL = (3.2, 4.0, 2.2), 0.05 * 9.4 / 3, 1 / 1.35


def write_png(path, rows: list[dict], probabilities: dict, title: str) -> None:
    """The overview picture: logo, −log10 p bar and target/control shares of each row, drawn on one axes (row ``i``
    centred at ``y = n - 1 - i``; panels side by side)."""
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.transforms import Affine2D  # noqa: PLC0415

    n = max(len(rows), 1)
    height = 0.62 * n + 1.0
    fig = Figure(figsize=(11, height))
    ax = fig.add_axes((0.02, 0.35 / height, 0.96, 1 - 0.9 / height))
    fig.suptitle(title, fontsize=11)
    x_logo, x_bar = 0.0, _WIDTHS[0] + _GAP
    x_share = x_bar + _WIDTHS[1] + _GAP
    best = max([-r["log10_pvalue"] for r in rows] + [1e-9])
    columns = max([len(probabilities[r["motif_id"]]) for r in rows if r["motif_id"] in probabilities] + [1])
    half = _ROW_FILL / 2
    paths, colors = [], []
    for i, r in enumerate(rows):
        yc = n - 1 - i
        ppm = probabilities.get(r["motif_id"])
        if ppm is not None:        # logo x -0.5 .. columns-0.5, y 0 .. 2 bits → its panel
            place = (Affine2D().translate(0.5, 0).scale(_WIDTHS[0] / columns, _ROW_FILL / 2)
                     .translate(x_logo, yc - half))
            more, cols = _logo_paths(ppm, place)
            paths += more
            colors += cols
        paths.append(_rectangle((x_bar, yc - 0.3 * _ROW_FILL), _WIDTHS[1] * -r["log10_pvalue"] / (best * 1.02),
                                  0.6 * _ROW_FILL))
        colors.append("#255C99")
        ax.text(x_bar + 0.01 * _WIDTHS[1], yc,
                f"{r['rank']}. {r['motif_name']} ({r['motif_id']})   p = {sci(r['log10_pvalue'])}",
                va="center", fontsize=8, color="black", bbox={"facecolor": "white", "alpha": 0.7, "linewidth": 0,
                                                               "pad": 1})
        unit = _WIDTHS[2] / 1.45              # the shares' panel spans 0 .. 1.45 (room for the labels)
        for share, dy, color, label in ((r["pos_seqs"] / r["pos_total"], 0.2, "#D62839", "targets"),
                                        (r["neg_seqs"] / r["neg_total"], -0.2, "#999999", "controls")):
            paths.append(_rectangle((x_share, yc + (dy - 0.175) * _ROW_FILL), unit * share, 0.35 * _ROW_FILL))
            colors.append(color)
            ax.text(x_share + 1.03 * unit, yc + dy * _ROW_FILL, f"{100 * share:.0f}% {label}", va="center",
                    fontsize=7)
    ax.add_collection(_collection(paths, colors))
    ax.set_xlim(0, x_share + _WIDTHS[2])
    ax.set_ylim(-0.5, n - 0.5)
    ax.set_axis_off()
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
    painter = _LogoPainter() if any(r["motif_id"] in probabilities for r in rows) else None
    for r in rows:
        ppm = probabilities.get(r["motif_id"])
        logo = (f'<img alt="logo of {e(r["motif_id"])}" src="data:image/png;base64,'
                f'{base64.b64encode(painter.png(ppm)).decode()}">' if ppm is not None else "")
        pos, neg = r["pos_seqs"] / r["pos_total"], r["neg_seqs"] / r["neg_total"]
        cluster = "" if r.get("cluster") is None else f'{r["cluster"]} ({e(str(r.get("representative")))})'
        body.append(
            f'<tr><td>{r["rank"]}</td><td class="l">{e(r["motif_name"])}</td><td class="l">{e(r["motif_id"])}</td>'
            f'<td class="l">{logo}</td>'
            f'<td class="l"><div class="bar" style="width:{200 * -r["log10_pvalue"] / best:.1f}px"></div></td>'
            f'<td>{sci(r["log10_pvalue"])}</td><td>{sci(r["log10_pvalue"] + log_tests)}</td>'
            f'<td>{_sci_value(r["qvalue"])}</td><td>{r["odds_ratio"]:.3g}</td>'
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
