"""The HTML report without a browser: structure, escaping, offline, reductions, CLI."""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import run_cli
from report_fakes import (
    EXAMPLES,
    HOSTILE,
    HOSTILE_NAME,
    hostile_capture,
    minimal_capture,
    sample_findings,
)

pytest.importorskip("plotly")

from nastriage.views.html import build_report, write_report
from nastriage.views.html.reduce import (
    envelope,
    nice_interval_ns,
    slowest,
)
from nastriage.views.html.streams import _dense_or_envelope
from nastriage.views.html.text import attr_num, json_for_script, ptext


class Page(html.parser.HTMLParser):
    """Elements, attributes and script bodies of a report."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None
        self._buf: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.elements.append((tag, a))
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "script":
            self._script = a
            self._buf = []

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._buf.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._buf)))
            self._script = None

    def data_block(self) -> Any:
        for attrs, body in self.scripts:
            if attrs.get("type") == "application/json":
                return json.loads(body)
        raise AssertionError("no data block")


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


@pytest.fixture(scope="module")
def stall_report() -> str:
    import nastriage

    path = EXAMPLES / "nfs3-receiver-stall.pcap.gz"
    if not path.exists():
        pytest.skip("example capture missing")
    try:
        cap = nastriage.open(str(path))
    except ImportError:
        pytest.skip("engine not built")
    return build_report(cap)


# -- structure ------------------------------------------------------------------------------


def test_sections_in_order_verdicts_first(stall_report: str) -> None:
    order = [stall_report.index(f'<section id="{s}"') for s in
             ("verdicts", "conversations", "streams", "protocols", "about")]  # fmt: skip
    assert order == sorted(order)
    assert stall_report.startswith("<!DOCTYPE html>")
    # the nav comes before the verdicts, nothing else does
    assert stall_report.index('<nav class="toc">') < order[0]


def test_every_chart_has_its_figure_and_ids_are_unique(stall_report: str) -> None:
    page = parse(stall_report)
    data = page.data_block()
    charts = [a["data-fig"] for tag, a in page.elements if tag == "div" and "data-fig" in a]
    assert charts, "no charts"
    assert set(charts) == set(data["figures"])
    assert len(page.ids) == len(set(page.ids))
    kinds = {c.split("-")[0] for c in charts}
    # per connection and per protocol views of a real NFS capture
    assert {"io", "seq", "inflight", "rtt", "limits", "heat", "outst", "brk"} <= kinds
    for fid, fig in data["figures"].items():
        assert fig["data"], f"{fid} has no traces"
        assert any(len(t.get("x") or t.get("z") or t.get("y") or []) for t in fig["data"]), fid


def test_sequence_graph_marks_zero_windows(stall_report: str) -> None:
    data = parse(stall_report).data_block()
    seq = [f for k, f in data["figures"].items() if k.startswith("seq-")]
    assert seq
    names = [t["name"] for f in seq for t in f["data"]]
    assert any(n.startswith("zero window") for n in names)
    assert any(n == "ACK" for n in names) and any(n.startswith("receive window") for n in names)


def test_io_graph_offers_wireshark_intervals(stall_report: str) -> None:
    data = parse(stall_report).data_block()
    assert data["io"]
    for entry in data["io"].values():
        assert entry["intervals"][0] == "1 ms" and entry["intervals"][-1] == "10 s"
        assert entry["default"] in entry["intervals"]
        for series in entry["series"].values():
            for d in ("c2s", "s2c"):
                if d in series:
                    s = series[d]
                    n = len(s["y"])
                    assert n and (("x" in s and len(s["x"]) == n) or "dx" in s)
    page = parse(stall_report)
    selects = [a for tag, a in page.elements if tag == "select"]
    assert selects and all("io-interval" in (a.get("class") or "") for a in selects)


def test_offline_and_content_security_policy(stall_report: str) -> None:
    page = parse(stall_report)
    for tag, attrs in page.elements:
        for name in ("src", "href", "action", "data", "poster", "srcset"):
            value = attrs.get(name)
            if value is None:
                continue
            assert not re.match(r"\s*(https?:|//|ftp:)", value, re.I), (tag, name, value)
            if name == "href":
                assert value.startswith("#"), (tag, value)
        assert tag not in ("link", "iframe", "object", "embed", "base")
    scripts = page.scripts
    assert [a.get("type") for a, _ in scripts] == ["application/json", None, None]
    assert all("src" not in a for a, _ in scripts)
    csp = next(
        a["content"] for t, a in page.elements
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    )  # fmt: skip
    assert csp is not None
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    assert (
        "unsafe-eval" not in csp
        and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    )
    for _, body in scripts[1:]:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "@import" not in stall_report.split("<script")[0]
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", stall_report.split("<script")[0])


def test_srt_tables_per_protocol(stall_report: str) -> None:
    assert 'id="srt-nfs-3"' in stall_report
    assert "tshark -q -z rpc,srt,100003,3" in stall_report


# -- escaping ---------------------------------------------------------------------------------


def _outside_plotly(text: str) -> str:
    """The page without plotly.js (whose source is not ours to check)."""
    page = parse(text)
    plotly = max((body for _, body in page.scripts), key=len)
    return text.replace(plotly, "")


@pytest.fixture(scope="module")
def hostile_report() -> str:
    try:
        cap = hostile_capture()
    except ImportError:
        pytest.skip("engine not built")
    stream = int(cap.conversations["stream"][0].as_py())
    t0 = min(int(c["first_time_ns"]) for c in cap.captures)
    return build_report(cap, findings=sample_findings(stream, t0, HOSTILE_NAME))


def test_hostile_names_never_reach_the_page_as_markup(hostile_report: str) -> None:
    ours = _outside_plotly(hostile_report)
    for needle in ("<img", "<svg", "<script>alert", 'onmouseover="', "\x1b", "\x07", "\u202e"):
        assert needle not in ours, needle
    # escaped text, visible as such
    assert "&lt;img src=x onerror=alert(1)&gt;" in ours
    assert "\\x1b]0;pwned\\x07" in ours  # control characters shown as escapes
    assert "{{7*7}}" in ours  # nothing here evaluates templates; shown literally


def test_hostile_names_in_chart_data_are_inert(hostile_report: str) -> None:
    page = parse(hostile_report)
    block = next(body for a, body in page.scripts if a.get("type") == "application/json")
    # nothing in the JSON can close the script element or start markup
    assert "<" not in block and ">" not in block and "&" not in block
    data = page.data_block()
    # strings for Plotly are entity-escaped: Plotly shows them literally
    found = json.dumps(data["figures"])
    assert ptext(HOSTILE[0]) == "&lt;img src=x onerror=alert(1)&gt;"
    assert ptext(HOSTILE[0]) in found
    assert "<img" not in found


def test_hostile_finding_text_is_escaped(hostile_report: str) -> None:
    ours = _outside_plotly(hostile_report)
    verdicts = ours[
        ours.index('<section id="verdicts"') : ours.index('<section id="conversations"')
    ]
    assert "Server stalls on zero windows" in verdicts
    assert verdicts.count("&lt;svg onload=alert(2)&gt;") >= 4  # title, text, steps, filter...
    assert "&quot; onmouseover=&quot;alert(4)" in verdicts
    # critical before info, whatever order the findings came in
    assert verdicts.index("sev-critical") < verdicts.index("sev-info")
    assert "Frames:" in verdicts and "12, 13, 14" in verdicts


def test_attr_num_and_script_json() -> None:
    assert attr_num(None) == "" and attr_num(float("nan")) == ""
    assert attr_num(3) == "3" and attr_num(1.5) == "1.5"
    out = json_for_script({"a": "</script><!-- \u2028 & x", "n": float("nan")})
    assert "<" not in out and ">" not in out and "&" not in out and "\u2028" not in out
    assert json.loads(out) == {"a": "</script><!-- \u2028 & x", "n": None}


# -- missing tables, findings -----------------------------------------------------------------


def test_report_without_engine_tables_says_what_is_missing() -> None:
    cap = minimal_capture()
    text = build_report(cap, findings=[], diagnosis_note="")
    assert "No finding" in text
    assert "No NFS or SMB requests" in text
    assert "Not available:" in text  # the per-connection charts that need other tables
    parse(text).data_block()


def test_no_diagnosis_says_so() -> None:
    text = build_report(minimal_capture(), findings=None, diagnosis_note="rules missing")
    assert "No verdicts: rules missing." in text


def test_finding_links_point_at_charts_and_ranges() -> None:
    import nastriage

    cap = nastriage.open(str(EXAMPLES / "nfs3-receiver-stall.pcap.gz"))
    stream = 3
    t0 = min(int(c["first_time_ns"]) for c in cap.captures)
    text = build_report(cap, findings=sample_findings(stream, t0))
    page = parse(text)
    links = [a for t, a in page.elements if t == "a" and "show-range" in (a.get("class") or "")]
    figs = set(page.data_block()["figures"])
    finding_links = [a for a in links if a.get("data-x0") == "0.001"]
    assert finding_links, links
    assert all(a["data-fig"] in figs for a in links)
    assert any(str(a["data-fig"]).startswith(f"seq-{stream}-") for a in finding_links)
    assert f'href="#stream-{stream}"' in text


# -- reductions -------------------------------------------------------------------------------


def test_envelope_keeps_extremes() -> None:
    n = 100_000
    x = [i * 0.001 for i in range(n)]
    y = [1.0] * n
    y[12_345] = 1000.0  # a spike
    y[67_890] = -5.0  # a drop
    r = envelope(x, y, 1000)
    assert r.reduced and r.total == n and len(r.x) <= 1000
    assert 1000.0 in r.y and -5.0 in r.y
    assert r.x == sorted(r.x)
    short = envelope([1.0, 2.0], [3.0, 4.0], 10)
    assert not short.reduced and short.y == [3.0, 4.0]


def test_dense_or_envelope_sees_empty_bins_as_zero() -> None:
    assert _dense_or_envelope([0, 1], [5.0, 6.0], 10, 100) is None
    xs, ys = _dense_or_envelope([3, 5000], [7.0, 9.0], 10_000, 100)  # type: ignore[misc]
    assert 9.0 in ys and 7.0 in ys and 0.0 in ys
    assert len(xs) <= 100


def test_slowest_and_intervals() -> None:
    assert slowest([5.0, 1.0, 9.0, 9.0, 2.0], 2) == [2, 3]
    assert nice_interval_ns(10_000_000_000, 100) == 100_000_000
    assert nice_interval_ns(1000, 100) == 1000


# -- CLI --------------------------------------------------------------------------------------


def test_cli_writes_report(tmp_path: Path, engine: None) -> None:
    out = tmp_path / "r.html"
    res = run_cli(["analyze", EXAMPLES / "nfs3-copy.pcap", "--html", out, "-q"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == b"" and res.stderr == b""
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert not list(tmp_path.glob(".nastriage-*"))  # no temporary left


def test_cli_html_bad_path_fails_before_analysis(tmp_path: Path, engine: None) -> None:
    res = run_cli(["analyze", EXAMPLES / "nfs3-copy.pcap", "--html", tmp_path / "no" / "r.html"])
    assert res.returncode == 2
    assert res.stderr.decode().startswith("nastriage: error: cannot write the HTML report")
    res = run_cli(["analyze", EXAMPLES / "nfs3-copy.pcap", "--html", "-"])
    assert res.returncode == 2 and b"needs a file name" in res.stderr


def test_write_report_is_atomic(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    info = write_report(minimal_capture(), str(out), findings=[])
    assert out.stat().st_size == info.size_bytes
    assert info.figures >= 0 and info.streams == [2, 1, 0]
    assert HOSTILE_NAME not in out.read_text(encoding="utf-8")
