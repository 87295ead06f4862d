"""NFSv4 per-operation tables on the v4.0 and v4.1 captures.

tshark 4.0 reports NFSv4 service times only per COMPOUND, but it lists every
operation of every COMPOUND call (``nfs.opcode``). Applying nastriage's
documented principal-operation rule (docs/transactions.md: the first
operation that is not SEQUENCE, PUTFH, PUTROOTFH, PUTPUBFH, GETATTR, GETFH,
SAVEFH or RESTOREFH; else the first GETATTR; else the first operation) to
tshark's list must give the operation nastriage attributes each COMPOUND to,
and the number of operations must agree, call by call (matched by XID)."""

from __future__ import annotations

import subprocess
from collections import Counter

import pyarrow.compute as pc
import pytest

import nastriage
from oracle import SHARED, have_tshark

PLUMBING = {53, 22, 24, 23, 9, 10, 32, 31}
GETATTR = 9

CAPTURES = [
    "OISF__suricata-verify__nfs4-01-input.pcap",  # NFSv4.0
    "epam__nfstrace__eth-ipv4-tcp-nfsv41.pcap",  # NFSv4.1
    "epam__nfstrace__eth-ipv4-tcp-nfsv4.pcap.gz",  # NFSv4.0, 45k frames
]


def principal(ops: list[int]) -> int:
    for op in ops:
        if op not in PLUMBING:
            return op
    return GETATTR if GETATTR in ops else ops[0]


def tshark_compounds(name: str) -> dict[int, list[int]]:
    """xid -> opcodes of each NFSv4 COMPOUND call alone in its frame."""
    out = subprocess.run(
        ["tshark", "-r", str(SHARED / name), "-n", "-Y", "rpc.msgtyp == 0 && nfs.opcode",
         "-T", "fields", "-e", "rpc.xid", "-e", "rpc.programversion", "-e", "nfs.opcode"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout  # fmt: skip
    calls: dict[int, list[int]] = {}
    for line in out.splitlines():
        xid, vers, ops = [*line.split("\t"), "", "", ""][:3]
        # rpc.programversion repeats per layer ("4,4"); several XIDs in one
        # frame make the attribution of opcodes ambiguous.
        if "," in xid or vers.split(",")[0] != "4" or not ops:
            continue  # several RPCs in one frame: attribution is ambiguous
        calls[int(xid, 16)] = [int(o) for o in ops.split(",")]
    return calls


@pytest.mark.tshark
@pytest.mark.skipif(not have_tshark(), reason="tshark not installed")
@pytest.mark.parametrize("name", CAPTURES)
def test_principal_operation_per_compound(name: str) -> None:
    theirs = tshark_compounds(name)
    assert len(theirs) > 20
    tx = nastriage.open(SHARED / name).table("transactions")
    v4 = tx.filter(pc.and_(pc.equal(tx["protocol"], "nfs"), pc.equal(tx["version"], 4)))
    ours = {
        int(r["id"]): (int(r["op_code"]), r["compound_ops"])
        for r in v4.select(["id", "op_code", "compound_ops"]).to_pylist()
    }
    compared = 0
    for xid, ops in theirs.items():
        if xid not in ours:
            continue
        op_code, compound_ops = ours[xid]
        assert op_code == principal(ops), (xid, ops, op_code, compound_ops)
        assert compound_ops is not None and len(compound_ops.split(",")) == len(ops)
        compared += 1
    # Nearly every COMPOUND call tshark decodes is one of ours too.
    assert compared >= 0.95 * len(theirs)
    # And the per-operation table adds up to the COMPOUND count.
    counts = Counter(op for op, _ in ours.values())
    assert sum(counts.values()) == v4.num_rows
    assert len(counts) >= 3
