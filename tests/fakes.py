"""A stand-in for ``nastriage._core.Analysis`` with the documented shape, so the views can be
tested without the Rust engine (and with content the real captures do not have, e.g.
hostile strings)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

CONVERSATIONS_SCHEMA = pa.schema(
    [
        ("stream", pa.uint32()),
        ("ip_version", pa.uint8()),
        ("client_ip", pa.utf8()),
        ("client_port", pa.uint16()),
        ("server_ip", pa.utf8()),
        ("server_port", pa.uint16()),
        ("client_rule", pa.utf8()),
        ("first_frame", pa.uint64()),
        ("last_frame", pa.uint64()),
        ("start", pa.timestamp("ns", tz="UTC")),
        ("end", pa.timestamp("ns", tz="UTC")),
        ("duration_s", pa.float64()),
        ("frames_c2s", pa.uint64()),
        ("frames_s2c", pa.uint64()),
        ("bytes_c2s", pa.uint64()),
        ("bytes_s2c", pa.uint64()),
        ("payload_bytes_c2s", pa.uint64()),
        ("payload_bytes_s2c", pa.uint64()),
        ("throughput_c2s_bps", pa.float64()),
        ("throughput_s2c_bps", pa.float64()),
        ("syn", pa.bool_()),
        ("fin", pa.bool_()),
        ("rst", pa.bool_()),
    ]
)

T0 = 1_704_164_645_123_456_789  # 2024-01-02T03:04:05.123456789Z


def conversation(stream: int, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "stream": stream,
        "ip_version": 4,
        "client_ip": f"10.0.0.{stream + 1}",
        "client_port": 40000 + stream,
        "server_ip": "10.0.1.1",
        "server_port": 2049,
        "client_rule": "syn",
        "first_frame": 1 + stream,
        "last_frame": 100 + stream,
        "start": T0 + stream,
        "end": T0 + stream + 2_500_000_000,
        "duration_s": 2.5,
        "frames_c2s": 10 * (stream + 1),
        "frames_s2c": 20 * (stream + 1),
        "bytes_c2s": 1000 * (stream + 1),
        "bytes_s2c": 200_000 * (stream + 1),
        "payload_bytes_c2s": 500 * (stream + 1),
        "payload_bytes_s2c": 190_000 * (stream + 1),
        "throughput_c2s_bps": 1600.0 * (stream + 1),
        "throughput_s2c_bps": 608_000.0 * (stream + 1),
        "syn": True,
        "fin": stream % 2 == 0,
        "rst": stream % 2 == 1,
    }
    row.update(overrides)
    return row


def conversations_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=CONVERSATIONS_SCHEMA)


def capture_meta(**overrides: Any) -> dict[str, object]:
    meta: dict[str, object] = {
        "path": "/data/trace.pcapng",
        "format": "pcapng",
        "format_description": "pcapng, little-endian, version 1.0",
        "compression": "none",
        "link_types": ["ethernet"],
        "frames": 1234,
        "bytes": 2_000_000,
        "captured_bytes": 1_900_000,
        "first_time_ns": T0,
        "last_time_ns": T0 + 61_500_000_000,
        "truncated_frames": 3,
        "warnings": [],
    }
    meta.update(overrides)
    return meta


class FakeAnalysis:
    """Duck-typed ``_core.Analysis``."""

    def __init__(
        self,
        *,
        captures: list[dict[str, object]] | None = None,
        protocols: list[dict[str, object]] | None = None,
        warnings: list[str] | None = None,
        conversations: list[dict[str, Any]] | None = None,
    ) -> None:
        self.captures = captures if captures is not None else [capture_meta()]
        self.protocols = (
            protocols
            if protocols is not None
            else [
                {"protocol": "ethernet", "frames": 1234, "bytes": 2_000_000},
                {"protocol": "ipv4", "frames": 1200, "bytes": 1_990_000},
                {"protocol": "tcp", "frames": 1100, "bytes": 1_900_000},
                {"protocol": "ethertype-0x88cc", "frames": 34, "bytes": 10_000},
            ]
        )
        self.warnings = warnings if warnings is not None else []
        self.frames = sum(int(c["frames"]) for c in self.captures)  # type: ignore[call-overload]
        self.app_stats = dict.fromkeys(
            (
                "transactions",
                "udp_transactions",
                "unanswered_requests",
                "orphan_replies",
                "resyncs",
                "smb_encrypted_messages",
                "smb_compressed_messages",
                "smb1_messages",
            ),
            0,
        )
        rows = conversations if conversations is not None else [conversation(i) for i in range(3)]
        self._tables = {"conversations": conversations_table(rows)}

    def table_names(self) -> list[str]:
        return list(self._tables)

    def table(self, name: str) -> Any:
        return self._tables[name]  # a pyarrow.Table exposes __arrow_c_stream__


def fake_capture(**kwargs: Any) -> Any:
    from nastriage.capture import Capture

    return Capture(FakeAnalysis(**kwargs), ["/data/trace.pcapng"])
