"""The diagnosis over every reference capture in ../shared/captures: never an exception,
always at least one finding, valid JSON; and sensible findings for the captures with
obvious pathologies (zero windows, retransmissions, metadata storms)."""

from __future__ import annotations

import json

import pytest

from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

CAPTURES = readable_captures() if SHARED.exists() else []


def _diagnose(name: str) -> list:  # type: ignore[type-arg]
    import nastriage
    from nastriage.diagnosis.run import diagnose

    if not (SHARED / name).exists():
        pytest.skip(f"{name} not in {SHARED}")
    return diagnose(nastriage.open(str(SHARED / name)), strict=True)


@pytest.mark.parametrize("name", CAPTURES)
def test_diagnosis_runs_on_every_capture(name: str) -> None:
    from nastriage.views.json_out import finding_object

    findings = _diagnose(name)
    assert findings
    ranks = [f.rank_key() for f in findings if f.id != "healthy"]
    assert ranks == sorted(ranks)
    problems = [f for f in findings if f.severity in ("critical", "warning")]
    assert (findings[0].id == "healthy") == (not problems)
    for f in findings:
        assert f.title and f.explanation and f.next_steps
        assert 0.0 <= f.confidence <= 1.0
        assert len(f.evidence.frames) <= 30
        share = f.impact.time_share
        assert share is None or 0.0 <= share <= 1.0
        json.dumps(finding_object(f), allow_nan=False)


def _by_id(findings: list, fid: str) -> list:  # type: ignore[type-arg]
    return [f for f in findings if f.id == fid]


@pytest.mark.parametrize(
    "name",
    [
        "chrissanders__packets__tcp_zerowindowrecovery.pcapng",
        "chrissanders__packets__tcp_zerowindowdead.pcapng",
    ],
)
def test_zero_window_captures_are_receiver_stalls(name: str) -> None:
    findings = _diagnose(name)
    assert findings[0].id == "receiver-stall", [(f.id, f.severity) for f in findings]
    f = findings[0]
    assert f.severity in ("critical", "warning")
    assert f.evidence.numbers["zero_window_episodes"] >= 1
    assert "not of the network" in f.explanation
    assert not _by_id(findings, "congestion-loss")


def test_zero_window_dead_is_unresolved() -> None:
    f = _diagnose("chrissanders__packets__tcp_zerowindowdead.pcapng")[0]
    assert f.evidence.numbers["unresolved_episodes"] >= 1


@pytest.mark.parametrize(
    "name",
    [
        "arkime__arkime__wireshark-retrans.pcap",
        "zeek__zeek__retransmit-fast009.pcap",
        "chrissanders__packets__tcp_retransmissions.pcapng",
    ],
)
def test_retransmission_captures_are_loss(name: str) -> None:
    findings = _diagnose(name)
    top = next(f for f in findings if f.severity in ("critical", "warning"))
    assert top.id == "congestion-loss", [(f.id, f.severity) for f in findings]
    assert top.evidence.numbers["retransmitted_segments"] >= 3
    assert not _by_id(findings, "reordering")
    assert not _by_id(findings, "capture-incomplete")


def test_timeouts_without_answer_are_critical() -> None:
    f = _diagnose("chrissanders__packets__tcp_retransmissions.pcapng")[0]
    assert f.id == "congestion-loss" and f.severity == "critical"
    assert f.evidence.numbers["timeouts"] >= 3


def test_many_open_files_is_a_metadata_storm() -> None:
    findings = _diagnose("zeek__zeek__smb_many_open_files_500.pcap.gz")
    assert _by_id(findings, "metadata-heavy")[0].severity == "warning"


def test_single_fast_retransmission_is_not_a_problem() -> None:
    findings = _diagnose("chrissanders__packets__tcp_dupack.pcapng")
    assert findings[0].id == "healthy"
    assert [f.severity for f in _by_id(findings, "congestion-loss")] == ["info"]


@pytest.mark.parametrize("name", ["zeek__zeek__smb3.pcap", "zeek__zeek__smb311.pcap"])
def test_encrypted_smb3_is_reported(name: str) -> None:
    findings = _diagnose(name)
    assert [f for f in findings if f.severity != "info"] == []
    (f,) = _by_id(findings, "encrypted-smb")
    assert f.evidence.numbers["encrypted_messages"] > 0 and f.streams == [0]
