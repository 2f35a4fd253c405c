"""pipeline.enrich.report: the PNG and the self-contained HTML page of the top motifs."""
import re

import numpy as np
import pytest

from pipeline.enrich.report import HTML_NAME, PNG_NAME, sci, write_report
from pipeline.enrich.stats import enrichment_table

pytest.importorskip("matplotlib")
pytest.importorskip("logomaker")


def test_sci_far_below_double_range():
    assert sci(-1234.5) == "3.2e-1235"
    assert sci(-3.0) == "1.0e-3"
    assert sci(np.log10(9.99)) == "1.0e1"
    assert sci(0.0) == "1.0e0"


def test_report_files(tmp_path):
    rng = np.random.default_rng(0)
    M = 30
    ids = [f"MA{i:04d}.1" for i in range(M)]
    names = [f"TF<{i}>" if i == 3 else f"TF{i}" for i in range(M)]
    pos = rng.integers(0, 500, M)
    pos[3] = 500                                                   # p far below 1e-300
    t = enrichment_table(ids, names, pos, 500, np.full(M, 40), 1000, params={"pvalue": 1e-4})
    ppms = {i: rng.dirichlet(np.ones(4) * 0.3, size=int(rng.integers(6, 20))) for i in ids}
    png, page = write_report(t, ppms, tmp_path, top=12)
    assert png.endswith(PNG_NAME) and page.endswith(HTML_NAME)
    data = (tmp_path / PNG_NAME).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    text = (tmp_path / HTML_NAME).read_text()
    top = t.slice(0, 12).column("motif_id").to_pylist()
    assert top[0] == "MA0003.1"
    at = [text.index(f">{i}<") for i in top]                      # the top motifs, in rank order
    assert at == sorted(at)
    assert t.column("motif_id")[12].as_py() not in text            # not below the top
    assert "TF&lt;3&gt;" in text and "TF<3>" not in text           # names escaped
    assert len(re.findall(r'src="data:image/png;base64,', text)) == 12
    assert "http" not in text                                      # self-contained
    assert sci(t.column("log10_pvalue")[0].as_py()) in text
    assert "pvalue=0.0001" in text


def test_report_writes_q_as_p_and_e(tmp_path):
    """q-values written as p and E are (5.2e-6, not 5.2e-06 or 0.00048 beside them)."""
    ids = [f"M{i}" for i in range(6)]
    t = enrichment_table(ids, ids, np.array([60, 70, 80, 90, 100, 45]), 500, np.full(6, 40), 1000, params={})
    rng = np.random.default_rng(1)
    write_report(t, {i: rng.dirichlet(np.ones(4), size=8) for i in ids}, tmp_path, top=6)
    text = (tmp_path / HTML_NAME).read_text()
    qs = [q for q in t.column("qvalue").to_pylist() if 1e-9 < q < 1e-2]
    assert qs and all(f"<td>{sci(np.log10(q))}</td>" in text for q in qs)
    assert not re.search(r"<td>\d\.\de-0\d</td>|<td>0\.00\d+</td>", text)


def test_logo_heights_are_logomakers_information():
    """The logos' letter heights equal logomaker's probability → information transform."""
    import logomaker
    import pandas as pd

    from pipeline.enrich.report import information

    rng = np.random.default_rng(1)
    ppm = rng.dirichlet(np.ones(4) * 0.4, size=15)
    ppm[3] = [1.0, 0.0, 0.0, 0.0]                                   # a certain column: 2 bits on one letter
    want = logomaker.transform_matrix(pd.DataFrame(ppm, columns=list("ACGT")), from_type="probability",
                                      to_type="information").to_numpy()
    np.testing.assert_allclose(information(ppm), want, atol=1e-12)
    assert information(ppm)[3].tolist() == [2.0, 0.0, 0.0, 0.0]
