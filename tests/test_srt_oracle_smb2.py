"""SMB2 service response times must equal Wireshark's.

1. For every reference capture whose ``truth/<file>.srt.txt`` holds an SMB2 SRT table
   (``tshark -q -z smb2,srt``, tshark 4.0), per command: calls equal, min/max/avg/sum
   within the table's rounding, computed from our ``transactions`` table.
2. Per transaction, live: each final response's ``smb2.time`` (tshark 4.0) equals our
   ``srt_ms`` to the nanosecond, keyed by (tcp.stream, MessageId, command).
3. A ``editcap -s 256`` copy gives the same table as the full capture, apart from what
   lies beyond the captured bytes.

Every difference is explained in docs/transactions-smb2.md and listed here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path

import pyarrow as pa
import pytest

import nastriage
from oracle import SHARED, SrtStats, have_tshark, srt_stats

TRUTH = SHARED / "truth"


def _smb2_section(text: str) -> str | None:
    if "SMB2 SRT Statistics:" not in text:
        return None
    return text.split("SMB2 SRT Statistics:", 1)[1].split("=====", 1)[0]


def smb2_truth_captures() -> list[str]:
    if not TRUTH.is_dir():
        return []
    return sorted(
        p.name[: -len(".srt.txt")]
        for p in TRUTH.glob("*.srt.txt")
        if (sec := _smb2_section(p.read_text())) and re.search(r"^\s+\d+\s+\S", sec, re.M)
    )


CAPTURES = smb2_truth_captures()

Stats = SrtStats

ROW = re.compile(r"^\s+\d+\s+(.+?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


@cache
def truth(name: str) -> dict[str, Stats]:
    """Command -> (calls, min, max, avg, sum) in seconds from tshark's smb2,srt table."""
    sec = _smb2_section((TRUTH / f"{name}.srt.txt").read_text()) or ""
    out: dict[str, Stats] = {}
    for line in sec.splitlines():
        if m := ROW.match(line):
            out[m.group(1)] = (
                int(m.group(2)),
                float(m.group(3)),
                float(m.group(4)),
                float(m.group(5)),
                float(m.group(6)),
            )
    return out


@cache
def transactions(path: str) -> list[dict]:
    """SMB2 rows, timestamps as integer nanoseconds (datetime would keep µs only)."""
    table = nastriage.open(path).table("transactions")
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        cols[name] = col
    rows = pa.table(cols).to_pylist()
    return [r for r in rows if r["protocol"] == "smb2"]


# tshark decodes NBSS (and so SMB2) only on its well-known ports; we detect SMB by
# content. smb-length-5770 relays the same SMB session through port 4445.
TSHARK_PORTS = (445, 139)
# tshark 4.0's smb2,srt tap skips these commands (their responses do show smb2.time).
NOT_IN_TSHARK_SRT = {"Break", "Cancel"}
# Captures where we match more requests than tshark: capture -> (command -> extra calls,
# the capture whose truth our numbers must equal instead, reason).
MORE_THAN_TSHARK: dict[str, tuple[dict[str, int], str, str]] = {
    "OISF__suricata-verify__smb2-peter-minus-p191.pcap": (
        {"Read": 1},
        "OISF__suricata-verify__smb2-peter.pcap",
        "frame 191 (a segment inside READ response data) is missing: tshark cannot "
        "reassemble that response and loses the transaction; we walk past the gap "
        "by the NBSS length (the header was captured) and match it as in the intact "
        "capture",
    ),
}


def our_stats(name: str) -> dict[str, Stats]:
    groups: dict[str, list[int]] = defaultdict(list)
    for r in transactions(str(SHARED / name)):
        if not r["answered"] or r["op"] in NOT_IN_TSHARK_SRT:
            continue
        if r["server_port"] not in TSHARK_PORTS:
            continue
        groups[r["op"]].append(r["reply_last_time"] - r["request_last_time"])
    return {op: srt_stats(v) for op, v in groups.items()}


@pytest.fixture(scope="module", autouse=True)
def _shared_captures() -> None:
    if not CAPTURES:
        pytest.skip("reference captures not available")


def _close(ours: float, theirs: float) -> bool:
    # tshark prints seconds with 6 decimals.
    return abs(ours - theirs) <= 0.5e-6 + 1e-9


@pytest.mark.parametrize("name", CAPTURES)
def test_srt_table_equals_tshark(engine: None, name: str) -> None:
    expected = dict(truth(name))
    extra: dict[str, int] = {}
    if name in MORE_THAN_TSHARK:
        extra, intact, _why = MORE_THAN_TSHARK[name]
        intact_truth = truth(intact)
        for op, n in extra.items():
            assert expected[op][0] + n == intact_truth[op][0]
            expected[op] = intact_truth[op]
    ours = our_stats(name)
    assert sorted(ours) == sorted(expected), name
    for op, (calls, mn, mx, avg, total) in expected.items():
        o = ours[op]
        assert o[0] == calls, (name, op, o, expected[op])
        for what, a, b in (("min", o[1], mn), ("max", o[2], mx), ("avg", o[3], avg)):
            assert _close(a, b), (name, op, what, a, b)
        assert _close(o[4], total), (name, op, "sum", o[4], total)


@cache
def tshark_final_responses(name: str) -> dict[tuple[int, int, int], int]:
    """(stream, MessageId, command) -> smb2.time in ns, for final responses."""
    cmd = ["tshark", "-r", str(SHARED / name), "-n", "-Y", "smb2"]
    cmd += ["-T", "json", "--no-duplicate-keys", "-J", "tcp smb2"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600).stdout
    res: dict[tuple[int, int, int], int] = {}
    for pkt in json.loads(out or "[]"):
        layers = pkt["_source"]["layers"]
        tcp = layers.get("tcp")
        smb2 = layers.get("smb2")
        if not tcp or not smb2:
            continue
        tcp = tcp[-1] if isinstance(tcp, list) else tcp
        stream = int(tcp["tcp.stream"])
        headers = []
        for msg in smb2 if isinstance(smb2, list) else [smb2]:
            h = msg.get("SMB2 Header") or []
            headers += h if isinstance(h, list) else [h]
        for h in headers:
            if "smb2.time" not in h:
                continue
            flags = int(h["smb2.flags"], 16)
            interim = flags & 2 and h.get("smb2.nt_status") == "0x00000103"
            if not flags & 1 or interim:
                continue
            secs, _, frac = h["smb2.time"].partition(".")
            ns = int(secs) * 1_000_000_000 + int((frac + "000000000")[:9])
            res[(stream, int(h["smb2.msg_id"]), int(h["smb2.cmd"]))] = ns
    return res


@pytest.mark.skipif(not have_tshark(), reason="tshark not installed")
@pytest.mark.parametrize("name", CAPTURES)
def test_each_response_time_equals_tshark(engine: None, name: str) -> None:
    theirs = tshark_final_responses(name)
    ours = {
        (r["stream"], r["id"], r["op_code"]): r["reply_last_time"] - r["request_last_time"]
        for r in transactions(str(SHARED / name))
        if r["answered"] and r["server_port"] in TSHARK_PORTS
    }
    missing = sorted(set(theirs) - set(ours))
    assert not missing, missing[:10]
    extra = sorted(set(ours) - set(theirs))
    allowed = sum(MORE_THAN_TSHARK.get(name, ({}, "", ""))[0].values())
    assert len(extra) == allowed, extra[:10]
    diff = [(k, theirs[k], ours[k]) for k in theirs if theirs[k] != ours[k]]
    assert not diff, diff[:10]


# -- editcap -s 256 ------------------------------------------------------------------

# Compared between the full capture and the -s 256 copy. Names (file_name, share) and
# FileIds come from variable or later parts of a message and may be cut: compared only
# where both sides say every needed byte was captured.
TIMING_FIELDS = [
    "version", "minor_version", "op", "op_code", "stream", "id", "request_first_frame",
    "request_last_frame", "request_first_time", "request_last_time", "request_bytes",
    "credit_charge", "credit_request", "session", "auth", "retransmissions", "offset",
    "count",
]  # fmt: skip
REPLY_FIELDS = [
    "reply_first_frame", "reply_last_frame", "reply_first_time", "reply_last_time",
    "interim_time", "reply_bytes", "reply_count", "status", "status_name", "credit_grant",
    "eof",
]  # fmt: skip
CUT_FIELDS = ["file_name", "share", "file_handle"]

# Every header is in the first 190 bytes of its frame's TCP payload: identical tables.
SNAP_EQUAL = [
    "zeek__zeek__smb3.pcap",
    "zeek__zeek__smb311.pcap",
    "OISF__suricata-verify__smb2-async-read-input.pcap",
    "OISF__suricata-verify__smb2-peter.pcap",
    "zeek__zeek__kerberos_tso.pcapng",
    "arkime__arkime__wireshark-smb-on-windows10.pcap",
    "OISF__suricata-verify__zerologon-input.pcap",
    "epam__nfstrace__eth-ipv4-tcp-cifs2.pcap",
]
# Captures where some headers lie beyond the snaplen: compounded members after the
# first ~190 bytes of a frame, and messages that begin deep inside a segment (after the
# end of a large READ response, or pipelined behind another message).
SNAP_LOSSY = [
    "zeek__zeek__smb2.pcap",
    "zeek__zeek__smb2readwrite.pcap",
    "OISF__suricata-verify__smb2-delete-input.pcap",
    "zeek__zeek__smb_many_open_files_500.pcap.gz",
    "epam__nfstrace__eth-ipv4-tcp-smb2-putty.pcap",
    "OISF__suricata-verify__20171220_smb_mimikatz_copy_to_host.pcap",
    "zeek__zeek__smb2-multiple-pdus.pcap",
    "zeek__zeek__smb_v2_only_non_zero_reserved1.pcap",
]


def _key(r: dict) -> tuple[int, int, int]:
    return (r["stream"], r["id"], r["op_code"])


def _starts_inside_a_frame(full: list[dict], row: dict, side: str) -> bool:
    """In the full capture, does this request (or reply) begin inside a frame that
    also holds an earlier message of the same direction: a later member of a compound
    chain (same frame span as another member), or a message starting where the
    previous one ended? Only such headers can lie beyond a 190-byte snaplen."""
    first, last = row[f"{side}_first_frame"], row[f"{side}_last_frame"]
    for other in full:
        if other is row or other["stream"] != row["stream"]:
            continue
        o_first, o_last = other[f"{side}_first_frame"], other[f"{side}_last_frame"]
        if o_first is None:
            continue
        # The previous message ends in the frame where this one begins.
        ends_here = o_last == first and (o_first < first or other["id"] < row["id"])
        # An earlier member of the same compound chain.
        same_chain = (o_first, o_last) == (first, last) and other["id"] < row["id"]
        if ends_here or same_chain:
            return True
    return False


@pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap not installed")
@pytest.mark.parametrize("name", SNAP_EQUAL + SNAP_LOSSY)
def test_snaplen_256_copy_gives_the_same_table(engine: None, name: str, tmp_path: Path) -> None:
    src = SHARED / name
    if not src.exists():
        pytest.skip("capture not available")
    cut = tmp_path / "cut.pcap"
    subprocess.run(["editcap", "-s", "256", str(src), str(cut)], check=True, timeout=600)
    full_rows = transactions(str(src))
    full = {_key(r): r for r in full_rows}
    short = {_key(r): r for r in transactions(str(cut))}
    # Never a transaction that the full capture does not have.
    assert set(short) <= set(full), sorted(set(short) - set(full))[:5]
    lost = [full[k] for k in set(full) - set(short)]
    lost_replies = []
    for k, b in short.items():
        a = full[k]
        for f in TIMING_FIELDS:
            assert a[f] == b[f], (k, f, a[f], b[f])
        if b["answered"]:
            for f in REPLY_FIELDS:
                assert a[f] == b[f], (k, f, a[f], b[f])
        elif a["answered"]:
            lost_replies.append(a)
        if b["request_complete"] and (b["reply_complete"] in (None, True)) and b["note"] is None:
            for f in CUT_FIELDS:
                assert a[f] == b[f] or b[f] is None, (k, f, a[f], b[f])
    if name in SNAP_EQUAL:
        assert not lost and not lost_replies
        for k, b in short.items():
            for f in [*CUT_FIELDS, "request_complete", "reply_complete"]:
                assert full[k][f] == b[f], (k, f, full[k][f], b[f])
        return
    assert lost or lost_replies, "expected header bytes beyond the snaplen"
    for r in lost:
        assert _starts_inside_a_frame(full_rows, r, "request"), _key(r)
    for r in lost_replies:
        assert _starts_inside_a_frame(full_rows, r, "reply"), _key(r)
