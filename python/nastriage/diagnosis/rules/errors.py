"""protocol-errors: NFS/SMB error statuses that matter (and RPC-level rejections)."""

from __future__ import annotations

from collections import Counter, defaultdict

from nastriage.diagnosis.context import Context, Tx
from nastriage.diagnosis.finding import Evidence, Finding, Impact, Severity
from nastriage.diagnosis.rules._util import frames, ms, pct, stream_filter
from nastriage.sanitize import one_line

#: The server is busy, short of resources or failing: clients wait and retry.
SERIOUS = frozenset(
    {
        "NFS3ERR_JUKEBOX",
        "NFS4ERR_DELAY",
        "NFS4ERR_GRACE",
        "NFS3ERR_IO",
        "NFS4ERR_IO",
        "NFSERR_IO",
        "NFS3ERR_NOSPC",
        "NFS4ERR_NOSPC",
        "NFSERR_NOSPC",
        "NFS3ERR_DQUOT",
        "NFS4ERR_DQUOT",
        "NFS3ERR_SERVERFAULT",
        "NFS4ERR_SERVERFAULT",
        "NFS4ERR_RESOURCE",
        "NFS4ERR_BADSESSION",
        "NFS4ERR_DEADSESSION",
        "NFS4ERR_EXPIRED",
        "NFS4ERR_STALE_CLIENTID",
        "STATUS_INSUFFICIENT_RESOURCES",
        "STATUS_IO_TIMEOUT",
        "STATUS_DISK_FULL",
        "STATUS_QUOTA_EXCEEDED",
        "STATUS_NETWORK_SESSION_EXPIRED",
        "STATUS_NETWORK_NAME_DELETED",
        "STATUS_INTERNAL_ERROR",
        "STATUS_UNEXPECTED_IO_ERROR",
        "STATUS_DATA_ERROR",
        "STATUS_DEVICE_NOT_READY",
        "STATUS_CONNECTION_DISCONNECTED",
        "STATUS_REQUEST_NOT_ACCEPTED",
        "STATUS_SHARING_VIOLATION",
        "STATUS_FILE_LOCK_CONFLICT",
    }
)
#: Normal answers that happen to carry an error code.
BENIGN = frozenset(
    {
        "NFS3ERR_NOENT",
        "NFS4ERR_NOENT",
        "NFSERR_NOENT",
        "NFS3ERR_EXIST",
        "NFS4ERR_EXIST",
        "NFS3ERR_NOTSUPP",
        "NFS4ERR_NOTSUPP",
        "NFS4ERR_SAME",
        "NFS4ERR_NOT_SAME",
        "NFS3ERR_NOTEMPTY",
        "NFS4ERR_NOTEMPTY",
        "NFS3ERR_TOOSMALL",
        "NFS4ERR_TOOSMALL",
        "STATUS_MORE_PROCESSING_REQUIRED",
        "STATUS_PENDING",
        "STATUS_NO_MORE_FILES",
        "STATUS_NO_SUCH_FILE",
        "STATUS_OBJECT_NAME_NOT_FOUND",
        "STATUS_OBJECT_PATH_NOT_FOUND",
        "STATUS_OBJECT_NAME_COLLISION",
        "STATUS_NOTIFY_ENUM_DIR",
        "STATUS_NOTIFY_CLEANUP",
        "STATUS_END_OF_FILE",
        "STATUS_NOT_FOUND",
        "STATUS_CANCELLED",
        "STATUS_BUFFER_OVERFLOW",
        "STATUS_FS_DRIVER_REQUIRED",
        "STATUS_NOT_SUPPORTED",
        "STATUS_INVALID_DEVICE_REQUEST",
        "STATUS_STOPPED_ON_SYMLINK",
        "STATUS_USER_SESSION_DELETED",
    }
)
_RPC_OK = frozenset({"", "SUCCESS", "success", "MSG_ACCEPTED", "accepted"})


def _error_name(t: Tx) -> str | None:
    if t.rpc_status and t.rpc_status not in _RPC_OK:
        return f"RPC {t.rpc_status}"
    if t.status and t.status_name:
        return str(t.status_name)
    if t.status:
        return f"status 0x{int(t.status):08x}"
    return None


def protocol_errors(ctx: Context) -> list[Finding]:
    th = ctx.th
    counts: Counter[str] = Counter()
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    first: dict[str, list[int]] = defaultdict(list)
    streams: dict[str, set[int]] = defaultdict(set)
    srt_ms: dict[str, float] = defaultdict(float)
    total_calls, busy_ms = ctx.transaction_totals()
    for t in ctx.failed_transactions():
        name = _error_name(t)
        if name is None:
            continue
        counts[name] += 1
        ops[name][t.op] += 1
        if t.transport in ("tcp", ""):
            streams[name].add(t.stream)
        srt_ms[name] += t.srt_ms or 0.0
        if len(first[name]) < 10:
            first[name].append(t.reply_first_frame or t.req_first_frame)
    if not counts:
        return []
    serious = {n: c for n, c in counts.items() if n in SERIOUS or n.startswith("RPC ")}
    benign = {n: c for n, c in counts.items() if n in BENIGN}
    other = {n: c for n, c in counts.items() if n not in serious and n not in benign}
    benign_total = sum(benign.values())
    noisy_benign = (
        benign_total >= th.benign_error_min_calls
        and total_calls
        and benign_total / total_calls >= th.benign_error_share
    )
    if not serious and not other and not noisy_benign:
        return []
    shown = {**serious, **other, **(benign if noisy_benign else {})}
    severity: Severity = "warning" if serious else "info"
    err_ms = sum(srt_ms[n] for n in shown)
    share = err_ms / busy_ms if busy_ms else 0.0
    top = sorted(shown.items(), key=lambda kv: (kv[0] not in serious, -kv[1]))[:6]

    def describe(n: str, c: int) -> str:
        op_text = ", ".join(f"{one_line(o)} x{k}" for o, k in ops[n].most_common(3))
        return f"{one_line(n)} x{c} ({op_text})"

    parts = "; ".join(describe(n, c) for n, c in top)
    if serious:
        explanation = (
            f"The server answered {sum(serious.values())} request(s) with errors that mean it "
            f"is busy, short of resources or failing: {parts}. Clients wait and retry after "
            "such answers (NFS3ERR_JUKEBOX/NFS4ERR_DELAY make a Linux client back off for "
            "seconds), so they cost far more than their response time."
        )
    else:
        explanation = (
            f"{sum(shown.values())} request(s) failed: {parts}. These are answers to the "
            "client's requests (permissions, missing or closed files), not performance "
            "problems by themselves, but an application retrying them wastes round trips."
        )
    fr = frames(f for n, _ in top for f in first[n])
    all_streams = sorted(set().union(*(streams[n] for n in shown)))
    steps = []
    if serious:
        steps.append(
            "On the server: check its logs at these times for resource shortages "
            "(memory, open files, disk space, quota), storage errors and offline (HSM/"
            "archived) files, which produce JUKEBOX/DELAY answers."
        )
    steps.append(
        "Look at which files and users get the errors (the frames below) and fix the "
        "permissions, paths or application behaviour behind them."
    )
    return [
        Finding(
            id="protocol-errors",
            severity=severity,
            title=f"{sum(shown.values())} NFS/SMB error response(s): "
            + ", ".join(one_line(n) for n, _ in top[:3]),
            explanation=explanation,
            evidence=Evidence(
                numbers={
                    "error_responses": sum(shown.values()),
                    "serious_errors": sum(serious.values()),
                    "requests": total_calls,
                    "error_share_of_requests": round(sum(shown.values()) / total_calls, 5)
                    if total_calls
                    else 0,
                    "statuses": ", ".join(f"{n}={c}" for n, c in top),
                    "error_response_time_ms": round(err_ms, 3),
                },
                frames=fr,
                wireshark_filter=stream_filter(
                    all_streams, "nfs.status != 0 || smb2.nt_status != 0 || rpc.replystat != 0"
                ),
            ),
            impact=Impact(
                time_share=round(min(1.0, share), 4),
                basis=f"response time of the failed requests ({ms(err_ms)}, {pct(share)} of "
                "all response time); retries and back-off come on top",
            ),
            next_steps=steps,
            confidence=0.9 if serious else 0.6,
            streams=all_streams,
        )
    ]
