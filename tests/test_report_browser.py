"""HTML reports from real captures, loaded in headless Chromium (Playwright).

Needs the Debian ``chromium`` package (/usr/bin/chromium; ``playwright install`` is not
used) and the ``playwright`` Python package; skipped without them. Screenshots go to
tests/artifacts/. The hostile-name test builds real NFS and SMB traffic with the scenario
lab (root, lab/install.sh); NASTRIAGE_LARGE_CAPTURE=PATH times a report of a big capture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers import CAPTURES, ROOT, run_cli
from report_fakes import EXAMPLES, HOSTILE_NAME, hostile_capture, sample_findings

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("NASTRIAGE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "tests" / "artifacts"
LAB = ROOT / "lab"

REAL_CAPTURES = [
    EXAMPLES / "nfs3-receiver-stall.pcap.gz",
    EXAMPLES / "smb2-healthy-lan.pcap.gz",
    EXAMPLES / "nfs3-healthy-lan.pcap.gz",
    CAPTURES / "OISF__suricata-verify__smb2-async-read-input.pcap",
    CAPTURES / "epam__nfstrace__eth-ipv4-tcp-nfsv41.pcap",
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("plotly")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1300, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class Loaded:
    page: Any
    seconds: float
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        bad = [f"console {t}: {m}" for t, m in self.console if t in ("error", "warning")]
        bad += [f"page error: {e}" for e in self.errors]
        bad += [f"dialog: {d}" for d in self.dialogs]
        bad += [f"request: {r}" for r in self.requests]
        return bad


def load(browser: Any, path: Path, timeout_ms: int = 120_000) -> Loaded:
    """Open a report; wait until every chart is drawn. Records what went wrong."""
    page = browser.new_page()
    loaded = Loaded(page, 0.0)
    page.on("console", lambda m: loaded.console.append((m.type, m.text)))
    page.on("pageerror", lambda e: loaded.errors.append(str(e)))

    def on_dialog(d: Any) -> None:
        loaded.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)

    def on_request(r: Any) -> None:
        if not r.url.startswith(("file:", "data:", "blob:", "about:")):
            loaded.requests.append(r.url)

    page.on("request", on_request)
    # Anything that runs alert/prompt/confirm is recorded even if the dialog is suppressed.
    page.add_init_script(
        "window.__ran = [];"
        "['alert','confirm','prompt'].forEach(function (n) {"
        "  var f = window[n]; window[n] = function (m) { window.__ran.push(n + ':' + m);"
        "  return f.apply(window, arguments); }; });"
    )
    start = time.perf_counter()
    page.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
    page.wait_for_selector("body[data-ready='1']", timeout=timeout_ms)
    loaded.seconds = time.perf_counter() - start
    page.wait_for_selector("body[data-charts-drawn='all']", state="attached", timeout=timeout_ms)
    return loaded


CHART_STATE = """
() => Array.from(document.querySelectorAll('div.chart[data-fig]')).map(d => {
  const lines = Array.from(d.querySelectorAll('.scatterlayer path.js-line'))
    .filter(p => (p.getAttribute('d') || '').length > 4).length;
  const points = d.querySelectorAll('.scatterlayer .points path, .barlayer .point path').length;
  const heat = Array.from(d.querySelectorAll('.heatmaplayer image'))
    .filter(i => (i.getAttribute('href') || i.getAttribute('xlink:href') || '').length > 30).length;
  return {id: d.getAttribute('data-fig'), drawn: d.getAttribute('data-drawn') === '1',
          svg: !!d.querySelector('svg.main-svg'), lines: lines, points: points, heat: heat};
})
"""


def _name(path: Path) -> str:
    return path.name.split(".")[0].replace("__", "-")


def _screenshot(loaded: Loaded, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / f"report-{name}.png"
    loaded.page.screenshot(path=str(out), full_page=True)
    return out


@pytest.mark.parametrize("capture", REAL_CAPTURES, ids=_name)
def test_real_capture_report_renders(
    browser: Any, capture: Path, tmp_path: Path, engine: None
) -> None:
    if not capture.exists():
        pytest.skip(f"capture not found: {capture}")
    report = tmp_path / "report.html"
    res = run_cli(["analyze", capture, "--html", report, "-q"])
    assert res.returncode == 0, res.stderr.decode()
    loaded = load(browser, report)
    try:
        assert loaded.problems() == []
        charts = loaded.page.evaluate(CHART_STATE)
        assert charts, "no charts"
        for c in charts:
            assert c["drawn"] and c["svg"], c
            assert c["lines"] + c["points"] + c["heat"] > 0, f"empty chart {c}"
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for c in charts:
            by_kind.setdefault(c["id"].split("-")[0], []).append(c)
        assert "io" in by_kind and "seq" in by_kind, sorted(by_kind)
        assert any(c["lines"] > 2 for c in by_kind["seq"])  # data, ACK, window lines
        if "heat" in by_kind:
            assert all(c["heat"] >= 1 for c in by_kind["heat"])
        # the page opens on the verdicts
        first = loaded.page.evaluate("document.querySelector('main section').id")
        assert first == "verdicts"
        shot = _screenshot(loaded, _name(capture))
        assert shot.stat().st_size > 10_000
    finally:
        loaded.page.close()


def test_nfs_report_has_heatmap_and_sequence_graph(
    browser: Any, tmp_path: Path, engine: None
) -> None:
    report = tmp_path / "r.html"
    res = run_cli(["analyze", EXAMPLES / "nfs3-receiver-stall.pcap.gz", "--html", report, "-q"])
    assert res.returncode == 0
    loaded = load(browser, report)
    try:
        charts = {c["id"]: c for c in loaded.page.evaluate(CHART_STATE)}
        heat = [c for k, c in charts.items() if k.startswith("heat-nfs")]
        seq = [c for k, c in charts.items() if k.startswith("seq-3-")]
        assert heat and heat[0]["heat"] == 1
        assert seq and seq[0]["lines"] >= 3 and seq[0]["points"] > 0  # zero-window marks
        legend = loaded.page.evaluate(
            "Array.from(document.querySelectorAll('#chart-seq-3-c2s .legendtext'))"
            ".map(e => e.textContent)"
        )
        assert any(t.startswith("zero window") for t in legend), legend
    finally:
        loaded.page.close()


def test_report_from_standard_input_has_sequence_graph(
    browser: Any, tmp_path: Path, engine: None
) -> None:
    """`cat FILE | nastriage analyze - --html OUT`: the points come from the one pass."""
    report = tmp_path / "stdin.html"
    with open(EXAMPLES / "nfs3-receiver-stall.pcap.gz", "rb") as f:
        res = run_cli(["analyze", "-", "--html", report, "-q"], stdin=f)
    assert res.returncode == 0, res.stderr.decode()
    loaded = load(browser, report)
    try:
        assert loaded.problems() == []
        charts = {c["id"]: c for c in loaded.page.evaluate(CHART_STATE)}
        seq = [c for k, c in charts.items() if k.startswith("seq-")]
        assert seq and all(c["drawn"] for c in seq)
        assert any(c["lines"] >= 3 and c["points"] > 0 for c in seq), seq
        assert "standard input" not in loaded.page.inner_text("#chart-" + seq[0]["id"])
    finally:
        loaded.page.close()


def test_interactions_zoom_interval_sort(browser: Any, tmp_path: Path, engine: None) -> None:
    import nastriage
    from nastriage.views.html import write_report

    cap = nastriage.open(str(EXAMPLES / "nfs3-receiver-stall.pcap.gz"))
    t0 = min(int(c["first_time_ns"]) for c in cap.captures)
    report = tmp_path / "r.html"
    write_report(cap, str(report), findings=sample_findings(3, t0))
    loaded = load(browser, report)
    page = loaded.page
    try:
        # a finding's time range link zooms its chart to that range
        link = page.locator("#verdicts a.show-range[data-x0='0.001']").first
        fig = link.get_attribute("data-fig")
        link.click()
        page.wait_for_function(
            f"() => {{ const d = document.getElementById('chart-{fig}');"
            " return d && d.layout && d.layout.xaxis.range && d.layout.xaxis.range[1] < 0.01; }",
            timeout=10_000,
        )
        # the I/O graph's interval selector redraws with another interval
        select = page.locator("select.io-interval").first
        fid = select.get_attribute("data-fig")
        before = page.evaluate(f"document.getElementById('chart-{fid}').data[0].x.length")
        select.select_option("1 ms")
        page.wait_for_function(
            f"() => document.getElementById('chart-{fid}').data[0].x.length !== {before}",
            timeout=10_000,
        )
        # sorting the conversations table by bytes S->C, both ways
        header = page.locator("#conversations-table thead th button", has_text="Bytes S")
        header.click()
        col = page.evaluate(
            "Array.from(document.querySelectorAll('#conversations-table tbody tr'))"
            ".map(r => parseFloat(r.cells[6].getAttribute('data-v')))"
        )
        assert col == sorted(col)
        header.click()
        col = page.evaluate(
            "Array.from(document.querySelectorAll('#conversations-table tbody tr'))"
            ".map(r => parseFloat(r.cells[6].getAttribute('data-v')))"
        )
        assert col == sorted(col, reverse=True)
        assert loaded.problems() == []
    finally:
        page.close()


# -- hostile names -------------------------------------------------------------------------

INERT_CHECK = """
() => ({
  ran: window.__ran,
  imgs: document.querySelectorAll('img').length,
  handlers: document.querySelectorAll('[onload],[onerror],[onmouseover],[onclick]').length,
  scripts: document.querySelectorAll('script').length,
  foreignSvg: Array.from(document.querySelectorAll('svg'))
    .filter(s => !s.closest('div.chart') && s.id !== 'js-plotly-tester').length,
})
"""


def _assert_inert(loaded: Loaded) -> None:
    state = loaded.page.evaluate(INERT_CHECK)
    assert state["ran"] == [], state
    assert state["imgs"] == 0 and state["handlers"] == 0, state
    assert state["scripts"] == 3 and state["foreignSvg"] == 0, state
    # CSP reports a blocked inline script or handler as a console error: there must be none
    assert loaded.problems() == []


def test_hostile_strings_in_a_report_stay_text(browser: Any, tmp_path: Path) -> None:
    from nastriage.sanitize import clean
    from nastriage.views.html import write_report

    try:
        cap = hostile_capture()
    except ImportError:
        pytest.skip("engine not built")
    stream = int(cap.conversations["stream"][0].as_py())
    t0 = min(int(c["first_time_ns"]) for c in cap.captures)
    report = tmp_path / "hostile.html"
    write_report(cap, str(report), findings=sample_findings(stream, t0, HOSTILE_NAME))
    loaded = load(browser, report)
    try:
        _assert_inert(loaded)
        page = loaded.page
        shown = clean(HOSTILE_NAME)
        names = page.evaluate(
            "Array.from(document.querySelectorAll('table.breakdown td.name'))"
            ".map(e => e.textContent)"
        )
        assert shown in names
        title = page.evaluate("document.querySelector('#finding-1 h3').textContent")
        assert shown in title
        ticks = page.evaluate(
            "Array.from(document.querySelectorAll('div.chart[data-fig^=\"brk-file\"] .ytick text'))"
            ".map(e => e.textContent)"
        )
        assert shown in ticks, ticks
        _screenshot(loaded, "hostile-fake")
    finally:
        loaded.page.close()


def _lab_unavailable() -> str | None:
    if os.environ.get("NASTRIAGE_LAB") == "0":
        return "NASTRIAGE_LAB=0"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the lab needs root"
    tools = ("smbd", "ganesha.nfsd", "rpcbind", "tcpdump", "ip")
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        return f"lab packages missing ({', '.join(missing)}): run lab/install.sh"
    if subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10).returncode:
        return "ip netns does not work here"
    return None


#: Names the lab's clients use. smbd refuses '<', '>' and '*' (STATUS_OBJECT_NAME_INVALID),
#: so for SMB those are probes (requests the server refuses, which still carry the name)
#: and the transferred file has the characters smbd accepts.
NFS_FILE = '<img src=x onerror=alert(1)>{{7*7}}<svg onload=alert(2)>"\x1b[31m&amp;.bin'
NFS_PROBES = ["<script>alert(3)</script"]
SMB_FILE = "{{constructor.constructor('alert(4)')()}}&lt;b&gt;'-alert(5)-'.bin"
SMB_PROBES = ["<img src=x onerror=alert(1)>", "<svg onload=alert(2)>", "{{7*7}}"]


def _lab_capture(scenario: str, out: Path, file_name: str, probes: list[str]) -> Path:
    argv = [str(LAB / "run.sh"), scenario, "--size", "1", "--out", str(out),
            "--file-name", file_name]  # fmt: skip
    for p in probes:
        argv += ["--probe-name", p]
    res = subprocess.run(argv, capture_output=True, timeout=300, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    pcap = out / scenario / "client.pcap"
    assert pcap.exists()
    return pcap


def test_real_traffic_with_hostile_file_names(browser: Any, tmp_path: Path, engine: None) -> None:
    reason = _lab_unavailable()
    if reason:
        pytest.skip(reason)
    from nastriage.sanitize import clean

    cases = [
        ("nfs3-client-concurrency-limit", NFS_FILE, NFS_PROBES, "nfs-3",
         ["/export/" + NFS_FILE, "/export/" + NFS_PROBES[0]]),
        ("smb2-client-concurrency-limit", SMB_FILE, SMB_PROBES, "smb2-x",
         [SMB_FILE, *SMB_PROBES]),
    ]  # fmt: skip
    for scenario, file_name, probes, group, expected in cases:
        pcap = _lab_capture(scenario, tmp_path / "lab", file_name, probes)
        report = tmp_path / f"{scenario}.html"
        res = run_cli(["analyze", pcap, "--html", report])
        assert res.returncode == 0, res.stderr.decode()
        # the terminal summary of the same capture is clean too
        assert b"\x1b" not in res.stdout
        loaded = load(browser, report)
        try:
            _assert_inert(loaded)
            page = loaded.page
            names = page.evaluate(
                f"Array.from(document.querySelectorAll('#files-{group} td.name'))"
                ".map(e => e.textContent)"
            )
            ticks = page.evaluate(
                f"Array.from(document.querySelectorAll('#chart-brk-file-{group} .ytick text'))"
                ".map(e => e.textContent)"
            )
            for name in expected:
                assert clean(name) in names, (name, names)
                assert clean(name) in ticks, (name, ticks)
            assert "49" not in names  # {{7*7}} was not evaluated
            _screenshot(loaded, f"hostile-{scenario}")
        finally:
            loaded.page.close()


# -- a large capture ---------------------------------------------------------------------------


def test_large_capture_report(browser: Any, tmp_path: Path, engine: None) -> None:
    """NASTRIAGE_LARGE_CAPTURE=PATH: make a report and time it; results in
    tests/artifacts/large-report.json (docs/report.md quotes them)."""
    path = os.environ.get("NASTRIAGE_LARGE_CAPTURE")
    if not path:
        pytest.skip("set NASTRIAGE_LARGE_CAPTURE=PATH to time a report of a large capture")
    report = tmp_path / "large.html"
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "nastriage", "analyze", path, "--html", str(report), "-q"],
        capture_output=True,
        timeout=1800,
    )
    made = time.perf_counter() - start
    assert res.returncode == 0, res.stderr.decode()
    loaded = load(browser, report)
    try:
        assert loaded.problems() == []
        timings = loaded.page.evaluate("window.nastriageTimings")
        paint = loaded.page.evaluate(
            "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime"
        )
        result = {
            "capture": path,
            "capture_bytes": os.path.getsize(path),
            "report_bytes": report.stat().st_size,
            "analyze_and_report_s": round(made, 2),
            "first_paint_ms": round(paint) if paint else None,
            "script_ready_ms": timings["ready"],
            "all_charts_drawn_ms": timings["allDrawn"],
            "slowest_charts_ms": sorted(timings["charts"].items(), key=lambda kv: -kv[1])[:3],
            "charts": len(loaded.page.evaluate(CHART_STATE)),
        }
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "large-report.json").write_text(json.dumps(result, indent=1) + "\n")
        _screenshot(loaded, "large")
        assert timings["ready"] < 10_000 and timings["allDrawn"] < 30_000, result
    finally:
        loaded.page.close()
