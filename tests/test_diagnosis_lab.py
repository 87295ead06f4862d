"""The diagnosis on the scenario lab: every scenario, client-side and server-side capture.

The top finding of severity warning or critical must be the one the scenario's label
expects, and healthy baselines must have none. The lab runs once per session
(``lab/run.sh all``, about 90 s, bounded) into a temporary directory; set
``NASTRIAGE_LAB_DIR`` to a directory a previous run left to reuse its captures (then no
root is needed). Without root, ``ip netns`` or the lab's packages the tests are skipped
(``NASTRIAGE_LAB=0`` skips them too). docs/findings.md keeps the measured table
(``lab/validate.py --write-docs``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab_env import lab_unavailable as _unavailable

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
#: Bound on the whole lab run (it takes about 90 s on 2 cores).
RUN_TIMEOUT_S = 900


def _scenarios() -> dict[str, str]:
    """scenario -> expected finding (``lab.py list`` needs no root)."""
    try:
        r = subprocess.run(
            [sys.executable, str(LAB / "lab.py"), "list", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {name: s["expected"] for name, s in json.loads(r.stdout).items()}


SCENARIOS = _scenarios()


@pytest.fixture(scope="session")
def lab_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("NASTRIAGE_LAB_DIR")
    if given:
        path = Path(given)
        if not all((path / s / "label.json").exists() for s in SCENARIOS):
            pytest.skip(f"NASTRIAGE_LAB_DIR={given} does not hold every scenario")
        return path
    why = _unavailable()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("diagnosis-lab")
    proc = subprocess.run(
        ["bash", str(LAB / "run.sh"), "all", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    if proc.returncode != 0:
        pytest.fail(f"lab/run.sh all failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return out


@pytest.fixture(scope="session")
def engine_ready() -> None:
    from helpers import require_engine

    require_engine()


@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_top_finding_is_the_labelled_one(
    lab_dir: Path, engine_ready: None, scenario: str, side: str
) -> None:
    import nastriage
    from nastriage.diagnosis.run import diagnose, top_problem

    label = json.loads((lab_dir / scenario / "label.json").read_text())
    assert label["expected_finding"] == SCENARIOS[scenario]
    findings = diagnose(nastriage.open(str(lab_dir / scenario / f"{side}.pcap")), strict=True)
    top = top_problem(findings)
    got = top.id if top is not None else "none"
    summary = [(f.id, f.severity, f.impact.time_share) for f in findings]
    assert got == label["expected_finding"], summary
    if top is None:
        assert findings[0].id == "healthy" and findings[0].severity == "info"
    else:
        # the verdict carries its evidence
        assert top.evidence.numbers and top.evidence.wireshark_filter and top.next_steps
        assert top.streams


def test_scenarios_listed() -> None:
    assert len(SCENARIOS) >= 17, SCENARIOS
    assert "none" in SCENARIOS.values()


def _drop_data_frames(src: Path, dst: Path, n: int = 8) -> None:
    """Copy ``src`` without ``n`` data segments spread over it (a capture that dropped them)."""
    if not (shutil.which("editcap") and shutil.which("tshark")):
        pytest.skip("needs editcap and tshark")
    cmd = ["tshark", "-n", "-r", str(src), "-Y", "tcp.len > 1000"]
    out = subprocess.run(
        [*cmd, "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout.split()  # fmt: skip
    data = [int(x) for x in out]
    picks = [data[len(data) * (i + 1) // (n + 1)] for i in range(n)]
    subprocess.run(
        ["editcap", str(src), str(dst), *map(str, picks)],
        capture_output=True,
        timeout=300,
        check=True,
    )


@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize(
    ("scenario", "expected"),
    [("nfs3-healthy-wan", "capture-incomplete"), ("nfs3-congestion-loss", "congestion-loss")],
)
def test_capture_drops_are_not_network_loss(
    lab_dir: Path, engine_ready: None, tmp_path: Path, scenario: str, expected: str, side: str
) -> None:
    import nastriage
    from nastriage.diagnosis.run import diagnose, top_problem

    cut = tmp_path / f"{scenario}-{side}-dropped.pcap"
    _drop_data_frames(lab_dir / scenario / f"{side}.pcap", cut)
    findings = diagnose(nastriage.open(str(cut)), strict=True)
    top = top_problem(findings)
    assert top is not None and top.id == expected, [(f.id, f.severity) for f in findings]
    drops = [f for f in findings if f.id == "capture-incomplete"]
    assert drops and drops[0].evidence.numbers["acked_unseen_events"] >= 1
    if expected == "capture-incomplete":
        assert not [f for f in findings if f.id in ("congestion-loss", "reordering")]
