#!/usr/bin/env python3
"""What tshark sees in a lab scenario's captures (a cross-check of the labels).

    python3 lab/summarize.py OUT/SCENARIO [OUT/SCENARIO ...] [--json]

Per capture: packets, NFS/SMB2 operations seen, TCP expert counts
(retransmissions, fast retransmissions, duplicate ACKs, zero windows,
out-of-order, lost segments), the RTT tshark measures on ACKs
(tcp.analysis.ack_rtt, median and min, on the data-sending side's capture
this is the path RTT), the largest advertised window of the data receiver,
the largest bytes in flight, and RPC/SMB2 response times.
Needs tshark; stdlib otherwise.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

EXPERT = {
    "retransmission": "tcp.analysis.retransmission",
    "fast_retransmission": "tcp.analysis.fast_retransmission",
    "spurious_retransmission": "tcp.analysis.spurious_retransmission",
    "duplicate_ack": "tcp.analysis.duplicate_ack",
    "zero_window": "tcp.analysis.zero_window",
    "zero_window_probe": "tcp.analysis.zero_window_probe",
    "window_full": "tcp.analysis.window_full",
    "out_of_order": "tcp.analysis.out_of_order",
    "lost_segment": "tcp.analysis.lost_segment",
}


def tshark_fields(pcap: Path, fields: list[str], dfilter: str = "") -> list[list[str]]:
    argv = ["tshark", "-n", "-r", str(pcap), "-T", "fields", "-E", "separator=\t"]
    if dfilter:
        argv += ["-Y", dfilter]
    for f in fields:
        argv += ["-e", f]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return [ln.split("\t") for ln in r.stdout.splitlines()]


def _floats(rows: list[list[str]], i: int) -> list[float]:
    out = []
    for r in rows:
        if i < len(r) and r[i]:
            for v in r[i].split(","):
                with contextlib.suppress(ValueError):
                    out.append(float(v))
    return out


def summarize_pcap(pcap: Path, server_ip: str) -> dict:
    fields = [
        "frame.time_relative", "ip.src", "tcp.len", "tcp.window_size", "tcp.analysis.ack_rtt",
        "tcp.analysis.bytes_in_flight", "rpc.time", "smb2.time", "nfs.procedure_v3",
        "nfs.opcode", "smb2.cmd", "rpc.msgtyp", "smb2.flags.response",
        *EXPERT.values(),
    ]
    rows = tshark_fields(pcap, fields)
    n = len(rows)
    idx = {f: i for i, f in enumerate(fields)}
    s: dict = {"packets": n}
    if not n:
        return s
    s["duration_s"] = round(float(rows[-1][0]) - float(rows[0][0]), 3)
    for name, f in EXPERT.items():
        s[name] = sum(1 for r in rows if r[idx[f]])
    c2s = [r for r in rows if r[1] != server_ip]
    s2c = [r for r in rows if r[1] == server_ip]
    bytes_c2s = sum(int(r[2] or 0) for r in c2s)
    bytes_s2c = sum(int(r[2] or 0) for r in s2c)
    s["payload_bytes"] = {"c2s": bytes_c2s, "s2c": bytes_s2c}
    sender, receiver = (s2c, c2s) if bytes_s2c >= bytes_c2s else (c2s, s2c)
    rtts = _floats(sender, idx["tcp.analysis.ack_rtt"])
    if rtts:
        s["ack_rtt_ms"] = {"min": round(min(rtts) * 1000, 3),
                           "median": round(statistics.median(rtts) * 1000, 3),
                           "samples": len(rtts)}
    wins = [int(r[3]) for r in receiver if r[3]]
    if wins:
        s["receiver_window_max"] = max(wins)
        s["receiver_window_min"] = min(wins)
    flight = _floats(sender, idx["tcp.analysis.bytes_in_flight"])
    if flight:
        s["bytes_in_flight_max"] = int(max(flight))
    resp = _floats(rows, idx["rpc.time"]) + _floats(rows, idx["smb2.time"])
    if resp:
        s["response_time_ms"] = {"median": round(statistics.median(resp) * 1000, 3),
                                 "max": round(max(resp) * 1000, 3), "n": len(resp)}
    ops: dict[str, int] = {}
    for r in rows:
        if r[idx["nfs.procedure_v3"]] and r[idx["rpc.msgtyp"]] == "0":
            k = "nfs3." + {"6": "READ", "7": "WRITE", "3": "LOOKUP", "1": "GETATTR",
                           "21": "COMMIT", "8": "CREATE"}.get(r[idx["nfs.procedure_v3"]],
                                                          r[idx["nfs.procedure_v3"]])
            ops[k] = ops.get(k, 0) + 1
        if r[idx["nfs.opcode"]] and r[idx["rpc.msgtyp"]] == "0":
            for op in set(r[idx["nfs.opcode"]].split(",")):
                k = "nfs4." + {"25": "READ", "38": "WRITE", "18": "OPEN"}.get(op, op)
                if k in ("nfs4.READ", "nfs4.WRITE", "nfs4.OPEN"):
                    ops[k] = ops.get(k, 0) + 1
        if r[idx["smb2.cmd"]] and "1" not in r[idx["smb2.flags.response"]].split(","):
            for c in r[idx["smb2.cmd"]].split(","):
                k = "smb2." + {"8": "READ", "9": "WRITE", "5": "CREATE", "0": "NEGOTIATE",
                               "1": "SESSION_SETUP"}.get(c, c)
                if k in ("smb2.READ", "smb2.WRITE", "smb2.CREATE", "smb2.NEGOTIATE",
                         "smb2.SESSION_SETUP"):
                    ops[k] = ops.get(k, 0) + 1
    s["requests"] = ops
    return s


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    as_json = "--json" in sys.argv
    result = {}
    for d in args:
        d = Path(d)
        label = json.loads((d / "label.json").read_text())
        sip = label.get("server_ip", "10.77.2.2")
        result[d.name] = {
            "expected_finding": label.get("expected_finding"),
            "client": summarize_pcap(d / "client.pcap", sip),
            "server": summarize_pcap(d / "server.pcap", sip),
        }
    if as_json:
        print(json.dumps(result, indent=1))
        return 0
    for name, r in result.items():
        print(f"== {name} (expected: {r['expected_finding']})")
        for side in ("client", "server"):
            s = r[side]
            ex = " ".join(f"{k}={s[k]}" for k in EXPERT if s.get(k))
            print(f"  {side}: {s['packets']} pkts {s.get('duration_s')} s "
                  f"rtt={s.get('ack_rtt_ms')} rwin_max={s.get('receiver_window_max')} "
                  f"inflight_max={s.get('bytes_in_flight_max')} resp={s.get('response_time_ms')}")
            print(f"    {ex or 'no TCP expert events'}; requests {s.get('requests')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
