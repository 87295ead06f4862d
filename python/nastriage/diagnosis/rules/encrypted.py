"""encrypted-smb: SMB3 encryption hides the commands; only TCP-level analysis is possible."""

from __future__ import annotations

from nastriage.diagnosis.context import Context
from nastriage.diagnosis.finding import Evidence, Finding, Impact
from nastriage.diagnosis.rules._util import stream_filter


def encrypted_smb(ctx: Context) -> list[Finding]:
    enc = ctx.encrypted_smb_streams()
    if not enc:
        return []
    streams = sorted(enc)
    servers = sorted({ctx.streams[s].server_ip for s in streams if s in ctx.streams})
    messages = sum(enc.values())
    return [
        Finding(
            id="encrypted-smb",
            severity="info",
            title=f"Encrypted SMB3: {messages} message(s) cannot be decoded",
            explanation=(
                f"{len(streams)} SMB connection(s) use SMB3 encryption ({messages} encrypted "
                "message(s)): their commands, files and response times are invisible in the "
                "capture, so the protocol-level checks (server latency, concurrency, errors, "
                "metadata) cannot judge them. The TCP-level findings (loss, windows, stalls) "
                "still apply."
            ),
            evidence=Evidence(
                numbers={
                    "encrypted_messages": messages,
                    "encrypted_connections": len(streams),
                    "servers": ", ".join(servers[:5]),
                },
                wireshark_filter=stream_filter(streams, "smb2.protocol_id == 0x424d53fd"),
            ),
            impact=Impact(basis="none on the transfer; limits what the analysis can see"),
            next_steps=[
                "To analyse the SMB layer, capture on a test share without encryption, or "
                "decrypt in Wireshark with the session keys (SMB2 preferences).",
            ],
            confidence=1.0,
            streams=streams,
        )
    ]
