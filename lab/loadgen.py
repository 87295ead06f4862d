#!/usr/bin/env python3
"""Concurrent NFSv3 / SMB2 load client for the nastriage scenario lab (stdlib).

Keeps exactly --outstanding READ or WRITE requests in flight on one TCP
connection (a new request is sent the moment one completes), so that the
captures show a client whose throughput is bounded by its own concurrency.

  loadgen.py nfs3 --server IP --export /export --file NAME --op read|write \
      --outstanding N --io-size BYTES --bytes TOTAL [--json OUT]
  loadgen.py smb2 --server IP --share share --file NAME --op read|write ...
  --probe NAME (repeatable): before the transfer, also try to open NAME in the
  export/share root (LOOKUP / CREATE FILE_OPEN) and ignore the result; used to
  put names a server refuses (e.g. '<' in SMB) into a capture.

NFSv3 over TCP with AUTH_SYS (uid/gid 0): portmapper GETPORT for mountd and
nfs, MOUNT MNT, LOOKUP (or CREATE for writes), READ / WRITE (UNSTABLE) and a
final COMMIT, UMNT.  SMB2: NEGOTIATE (2.0.2, 2.1, 3.0, 3.0.2), anonymous
NTLMSSP SESSION_SETUP wrapped in SPNEGO (a guest/null session: no signing),
TREE_CONNECT, CREATE, READ / WRITE with multi-credit requests, CLOSE, LOGOFF.
Every wait is bounded by --max-seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import struct
import sys
import time

# ----------------------------------------------------------------------------
# XDR / ONC RPC
# ----------------------------------------------------------------------------


def xdr_u32(v: int) -> bytes:
    return struct.pack(">I", v)


def xdr_u64(v: int) -> bytes:
    return struct.pack(">Q", v)


def xdr_opaque(b: bytes) -> bytes:
    pad = (4 - len(b) % 4) % 4
    return struct.pack(">I", len(b)) + b + b"\0" * pad


class Unpacker:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def u32(self) -> int:
        v = struct.unpack_from(">I", self.data, self.pos)[0]
        self.pos += 4
        return v

    def u64(self) -> int:
        v = struct.unpack_from(">Q", self.data, self.pos)[0]
        self.pos += 8
        return v

    def fixed(self, n: int) -> bytes:
        b = self.data[self.pos : self.pos + n]
        self.pos += (n + 3) & ~3
        return b

    def opaque(self) -> bytes:
        return self.fixed(self.u32())

    def post_op_attr(self) -> dict | None:
        if not self.u32():
            return None
        start = self.pos
        self.pos += 84
        ftype, _mode, _nlink, _uid, _gid, size = struct.unpack_from(">IIIIIQ", self.data, start)
        return {"type": ftype, "size": size}

    def wcc_data(self) -> None:
        if self.u32():  # pre_op_attr
            self.pos += 24
        self.post_op_attr()


class RpcError(Exception):
    pass


def auth_sys(uid: int = 0, gid: int = 0) -> bytes:
    body = xdr_u32(int(time.time()) & 0xFFFFFFFF) + xdr_opaque(b"nastriage-lab")
    body += xdr_u32(uid) + xdr_u32(gid) + xdr_u32(0)
    return xdr_u32(1) + xdr_opaque(body)


class RpcClient:
    """ONC RPC over one TCP connection with any number of calls in flight."""

    def __init__(self, prog: int, vers: int) -> None:
        self.prog = prog
        self.vers = vers
        self.xid = int.from_bytes(os.urandom(4), "big")
        self.pending: dict[int, asyncio.Future] = {}
        self.cred = auth_sys()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task | None = None

    async def connect(self, host: str, port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # a reserved source port, as kernel clients use (some servers insist)
        for p in range(1023, 600, -1):
            try:
                sock.bind(("", p))
                break
            except OSError:
                continue
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        self.reader, self.writer = await asyncio.open_connection(sock=sock)
        self.task = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        assert self.reader is not None
        try:
            while True:
                parts = []
                while True:
                    mark = struct.unpack(">I", await self.reader.readexactly(4))[0]
                    parts.append(await self.reader.readexactly(mark & 0x7FFFFFFF))
                    if mark & 0x80000000:
                        break
                rec = b"".join(parts)
                xid = struct.unpack_from(">I", rec)[0]
                fut = self.pending.pop(xid, None)
                if fut and not fut.done():
                    fut.set_result(rec)
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(RpcError(f"connection lost: {e}"))

    async def call(self, proc: int, args: bytes) -> Unpacker:
        assert self.writer is not None
        self.xid = (self.xid + 1) & 0xFFFFFFFF
        xid = self.xid
        hdr = struct.pack(">IIIIII", xid, 0, 2, self.prog, self.vers, proc) + self.cred
        hdr += xdr_u32(0) + xdr_u32(0)  # verifier AUTH_NONE
        n = len(hdr) + len(args)
        fut = asyncio.get_running_loop().create_future()
        self.pending[xid] = fut
        self.writer.write(struct.pack(">I", 0x80000000 | n) + hdr + args)
        await self.writer.drain()
        rec = await fut
        u = Unpacker(rec, 4)
        if u.u32() != 1:
            raise RpcError("not a reply")
        if u.u32() != 0:
            raise RpcError("call denied")
        u.u32()
        u.opaque()  # verifier
        st = u.u32()
        if st != 0:
            raise RpcError(f"accept_stat {st}")
        return u

    async def close(self) -> None:
        if self.writer:
            self.writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.wait_closed()
        if self.task:
            self.task.cancel()


async def getport(host: str, prog: int, vers: int) -> int:
    pm = RpcClient(100000, 2)
    await pm.connect(host, 111)
    try:
        u = await pm.call(3, xdr_u32(prog) + xdr_u32(vers) + xdr_u32(6) + xdr_u32(0))
        return u.u32()
    finally:
        await pm.close()


# ----------------------------------------------------------------------------
# The fixed-concurrency engine
# ----------------------------------------------------------------------------


class Stats:
    def __init__(self) -> None:
        self.lat: list[float] = []
        self.bytes = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def begin(self) -> float:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return time.monotonic()

    def end(self, t0: float, nbytes: int) -> None:
        self.in_flight -= 1
        self.lat.append(time.monotonic() - t0)
        self.bytes += nbytes


async def run_slots(n: int, total: int, io_size: int, do_io) -> Stats:
    """Exactly n requests in flight until `total` bytes are done."""
    st = Stats()
    offsets = iter(range(0, total, io_size))

    async def slot() -> None:
        for off in offsets:
            length = min(io_size, total - off)
            t0 = st.begin()
            got = await do_io(off, length)
            if got != length:
                raise RuntimeError(f"short I/O at {off}: {got} of {length}")
            st.end(t0, got)

    await asyncio.gather(*(slot() for _ in range(n)))
    return st


def pattern(off: int, length: int) -> bytes:
    """Cheap deterministic write payload (incompressible enough for a lab)."""
    seed = struct.pack("<Q", off) * 8
    block = (seed * (65536 // len(seed) + 1))[:65536]
    return (block * (length // 65536 + 1))[:length]


# ----------------------------------------------------------------------------
# NFSv3
# ----------------------------------------------------------------------------


async def nfs3(a: argparse.Namespace) -> dict:
    mport = await getport(a.server, 100005, 3)
    nport = await getport(a.server, 100003, 3) or 2049
    mnt = RpcClient(100005, 3)
    await mnt.connect(a.server, mport)
    u = await mnt.call(1, xdr_opaque(a.export.encode()))
    st = u.u32()
    if st != 0:
        raise RpcError(f"MNT {a.export}: status {st}")
    root = u.opaque()
    nfs = RpcClient(100003, 3)
    await nfs.connect(a.server, nport)
    probes = {}
    for probe in a.probe:
        u = await nfs.call(3, xdr_opaque(root) + xdr_opaque(probe.encode()))
        probes[probe] = u.u32()
    name = a.file.encode()
    if a.op == "read":
        u = await nfs.call(3, xdr_opaque(root) + xdr_opaque(name))
        st = u.u32()
        if st != 0:
            raise RpcError(f"LOOKUP {a.file}: status {st}")
        fh = u.opaque()
        attr = u.post_op_attr()
        size = attr["size"] if attr else a.bytes
        if a.bytes > size:
            raise RuntimeError(f"file has {size} bytes, asked for {a.bytes}")
    else:
        # CREATE UNCHECKED, mode 0644, size 0
        sattr = xdr_u32(1) + xdr_u32(0o644) + xdr_u32(0) + xdr_u32(0)
        sattr += xdr_u32(1) + xdr_u64(0) + xdr_u32(0) + xdr_u32(0)
        u = await nfs.call(8, xdr_opaque(root) + xdr_opaque(name) + xdr_u32(0) + sattr)
        st = u.u32()
        if st != 0:
            raise RpcError(f"CREATE {a.file}: status {st}")
        if not u.u32():
            raise RpcError("CREATE returned no handle")
        fh = u.opaque()
    fhx = xdr_opaque(fh)

    async def read(off: int, length: int) -> int:
        u = await nfs.call(6, fhx + xdr_u64(off) + xdr_u32(length))
        st = u.u32()
        u.post_op_attr()
        if st != 0:
            raise RpcError(f"READ status {st}")
        count = u.u32()
        u.u32()  # eof
        return len(u.opaque()) if count else 0

    async def write(off: int, length: int) -> int:
        data = pattern(off, length)
        u = await nfs.call(7, fhx + xdr_u64(off) + xdr_u32(length) + xdr_u32(0) + xdr_opaque(data))
        st = u.u32()
        u.wcc_data()
        if st != 0:
            raise RpcError(f"WRITE status {st}")
        return u.u32()

    t0 = time.monotonic()
    stats = await run_slots(a.outstanding, a.bytes, a.io_size, read if a.op == "read" else write)
    res_probes = {"probes": probes} if probes else {}
    if a.op == "write":
        u = await nfs.call(21, fhx + xdr_u64(0) + xdr_u32(0))
        if u.u32() != 0:
            raise RpcError("COMMIT failed")
    elapsed = time.monotonic() - t0
    await nfs.close()
    try:
        await mnt.call(3, xdr_opaque(a.export.encode()))  # UMNT
    finally:
        await mnt.close()
    return {"elapsed_s": elapsed, "stats": stats, **res_probes}


# ----------------------------------------------------------------------------
# SMB2
# ----------------------------------------------------------------------------

STATUS_PENDING = 0x00000103
STATUS_MORE_PROCESSING = 0xC0000016
SMB2_NEGOTIATE, SMB2_SESSION_SETUP, SMB2_LOGOFF, SMB2_TREE_CONNECT = 0, 1, 2, 3
SMB2_TREE_DISCONNECT, SMB2_CREATE, SMB2_CLOSE, SMB2_READ, SMB2_WRITE = 4, 5, 6, 8, 9
NTLMSSP_OID = bytes.fromhex("2b0601040182370202 0a".replace(" ", ""))
SPNEGO_OID = bytes.fromhex("2b0601050502")


def der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        ln = bytes([n])
    else:
        b = n.to_bytes((n.bit_length() + 7) // 8, "big")
        ln = bytes([0x80 | len(b)]) + b
    return bytes([tag]) + ln + content


def ntlm_negotiate() -> bytes:
    flags = 0x00000001 | 0x00000004 | 0x00000200 | 0x00008000 | 0x00080000 | 0x20000000
    flags |= 0x80000000
    return b"NTLMSSP\0" + struct.pack("<II", 1, flags) + b"\0" * 16


def ntlm_authenticate_anonymous(server_flags: int) -> bytes:
    flags = (server_flags & 0xE2088215) | 0x00000800  # NTLMSSP_NEGOTIATE_ANONYMOUS
    lm = b"\0"
    payload_off = 64
    hdr = b"NTLMSSP\0" + struct.pack("<I", 3)
    hdr += struct.pack("<HHI", len(lm), len(lm), payload_off)  # LmChallengeResponse
    empty = struct.pack("<HHI", 0, 0, payload_off + len(lm))
    hdr += empty * 5  # NtChallengeResponse, Domain, User, Workstation, SessionKey
    hdr += struct.pack("<I", flags)
    return hdr + lm


def spnego_init(token: bytes) -> bytes:
    mech_types = der(0xA0, der(0x30, der(0x06, NTLMSSP_OID)))
    mech_token = der(0xA2, der(0x04, token))
    return der(0x60, der(0x06, SPNEGO_OID) + der(0xA0, der(0x30, mech_types + mech_token)))


def spnego_resp(token: bytes) -> bytes:
    return der(0xA1, der(0x30, der(0xA2, der(0x04, token))))


class SmbError(Exception):
    pass


class Smb2Client:
    def __init__(self, timeout: float) -> None:
        self.mid = 0
        self.credits = 1
        self.credit_cv: asyncio.Condition | None = None
        self.pending: dict[int, asyncio.Future] = {}
        self.session = 0
        self.tree = 0
        self.dialect = 0
        self.large_mtu = False
        self.timeout = timeout

    async def connect(self, host: str) -> None:
        self.reader, self.writer = await asyncio.open_connection(host, 445)
        self.credit_cv = asyncio.Condition()
        self.task = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        try:
            while True:
                nb = await self.reader.readexactly(4)
                n = int.from_bytes(nb[1:], "big")
                msg = await self.reader.readexactly(n)
                (status, _cmd, granted, flags, _next, mid) = struct.unpack_from(
                    "<IHHIIQ", msg, 8)
                assert self.credit_cv is not None
                async with self.credit_cv:
                    self.credits += granted
                    self.credit_cv.notify_all()
                if status == STATUS_PENDING and flags & 0x2:
                    continue  # interim response; the final one follows
                fut = self.pending.pop(mid, None)
                if fut and not fut.done():
                    fut.set_result((status, msg))
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(SmbError(f"connection lost: {e}"))

    async def request(self, cmd: int, body: bytes, charge: int = 1,
                      ok: tuple[int, ...] = (0,)) -> bytes:
        assert self.credit_cv is not None
        async with self.credit_cv:
            await asyncio.wait_for(self.credit_cv.wait_for(lambda: self.credits >= charge),
                                   self.timeout)
            self.credits -= charge
            mid = self.mid
            self.mid += charge
        ask = max(charge, 256)
        hdr = b"\xfeSMB" + struct.pack("<HHIHHIIQIIQ", 64, charge if self.large_mtu else 0,
                                       0, cmd, ask, 0, 0, mid, 0, self.tree, self.session)
        hdr += b"\0" * 16
        msg = hdr + body
        fut = asyncio.get_running_loop().create_future()
        self.pending[mid] = fut
        self.writer.write(b"\0" + len(msg).to_bytes(3, "big") + msg)
        await self.writer.drain()
        status, resp = await fut
        if status not in ok:
            raise SmbError(f"command {cmd}: status 0x{status:08x}")
        if cmd == SMB2_SESSION_SETUP:
            self.session = struct.unpack_from("<Q", resp, 40)[0]
        if cmd == SMB2_TREE_CONNECT:
            self.tree = struct.unpack_from("<I", resp, 36)[0]
        self.last_status = status
        return resp

    async def negotiate(self) -> None:
        dialects = [0x0202, 0x0210, 0x0300, 0x0302]
        body = struct.pack("<HHHHI", 36, len(dialects), 1, 0, 0x4) + os.urandom(16) + b"\0" * 8
        body += b"".join(struct.pack("<H", d) for d in dialects)
        r = await self.request(SMB2_NEGOTIATE, body)
        self.dialect = struct.unpack_from("<H", r, 64 + 4)[0]
        caps = struct.unpack_from("<I", r, 64 + 24)[0]
        self.max_read, self.max_write = struct.unpack_from("<II", r, 64 + 32)
        self.large_mtu = self.dialect >= 0x0210 and bool(caps & 0x4)

    async def session_setup(self) -> None:
        def body(blob: bytes) -> bytes:
            return struct.pack("<HBBIIHHQ", 25, 0, 1, 0, 0, 64 + 24, len(blob), 0) + blob

        r = await self.request(SMB2_SESSION_SETUP, body(spnego_init(ntlm_negotiate())),
                               ok=(STATUS_MORE_PROCESSING,))
        off, ln = struct.unpack_from("<HH", r, 64 + 4)
        blob = r[off : off + ln]
        i = blob.find(b"NTLMSSP\0")
        if i < 0:
            raise SmbError("no NTLMSSP challenge in the SESSION_SETUP response")
        server_flags = struct.unpack_from("<I", blob, i + 20)[0]
        r = await self.request(SMB2_SESSION_SETUP,
                               body(spnego_resp(ntlm_authenticate_anonymous(server_flags))))
        self.session_flags = struct.unpack_from("<H", r, 64 + 2)[0]

    async def tree_connect(self, host: str, share: str) -> None:
        path = f"\\\\{host}\\{share}".encode("utf-16-le")
        await self.request(SMB2_TREE_CONNECT, struct.pack("<HHHH", 9, 0, 64 + 8, len(path)) + path)

    async def create(self, name: str, write: bool) -> tuple[bytes, int]:
        n = name.encode("utf-16-le")
        access = 0xC0000000 if write else 0x80000000  # GENERIC_READ (| GENERIC_WRITE)
        disposition = 5 if write else 1  # FILE_OVERWRITE_IF : FILE_OPEN
        body = struct.pack("<HBBIQQIIIIIHHII", 57, 0, 0, 2, 0, 0, access, 0x80, 7,
                           disposition, 0x40, 64 + 56, len(n), 0, 0) + n
        r = await self.request(SMB2_CREATE, body)
        eof = struct.unpack_from("<Q", r, 64 + 48)[0]
        return r[64 + 64 : 64 + 80], eof

    def charge(self, length: int) -> int:
        return max(1, (length + 65535) // 65536) if self.large_mtu else 1

    async def read(self, fid: bytes, off: int, length: int) -> int:
        body = struct.pack("<HBBIQ", 49, 0x50, 0, length, off) + fid
        body += struct.pack("<IIIHH", 0, 0, 0, 0, 0) + b"\0"
        r = await self.request(SMB2_READ, body, self.charge(length))
        return struct.unpack_from("<I", r, 64 + 4)[0]

    async def write(self, fid: bytes, off: int, data: bytes) -> int:
        body = struct.pack("<HHIQ", 49, 64 + 48, len(data), off) + fid
        body += struct.pack("<IIHHI", 0, 0, 0, 0, 0) + data
        r = await self.request(SMB2_WRITE, body, self.charge(len(data)))
        return struct.unpack_from("<I", r, 64 + 4)[0]

    async def close_file(self, fid: bytes) -> None:
        await self.request(SMB2_CLOSE, struct.pack("<HHI", 24, 0, 0) + fid)

    async def logoff(self) -> None:
        await self.request(SMB2_TREE_DISCONNECT, struct.pack("<HH", 4, 0))
        await self.request(SMB2_LOGOFF, struct.pack("<HH", 4, 0))
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
        self.task.cancel()


async def smb2(a: argparse.Namespace) -> dict:
    c = Smb2Client(a.max_seconds)
    await c.connect(a.server)
    await c.negotiate()
    await c.session_setup()
    await c.tree_connect(a.server, a.share)
    probes = {}
    for probe in a.probe:
        try:
            pfid, _ = await c.create(probe, False)
        except SmbError as e:
            probes[probe] = str(e)
        else:
            await c.close_file(pfid)
            probes[probe] = "opened"
    fid, eof = await c.create(a.file, a.op == "write")
    limit = c.max_read if a.op == "read" else c.max_write
    if a.io_size > limit:
        raise SmbError(f"io size {a.io_size} above the server's limit {limit}")
    if a.op == "read" and a.bytes > eof:
        raise RuntimeError(f"file has {eof} bytes, asked for {a.bytes}")

    async def read(off: int, length: int) -> int:
        return await c.read(fid, off, length)

    async def write(off: int, length: int) -> int:
        return await c.write(fid, off, pattern(off, length))

    t0 = time.monotonic()
    stats = await run_slots(a.outstanding, a.bytes, a.io_size, read if a.op == "read" else write)
    elapsed = time.monotonic() - t0
    await c.close_file(fid)
    await c.logoff()
    res = {"elapsed_s": elapsed, "stats": stats, "dialect": f"0x{c.dialect:04x}",
           "session_flags": c.session_flags}
    if probes:
        res["probes"] = probes
    return res


# ----------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("protocol", choices=["nfs3", "smb2"])
    ap.add_argument("--server", required=True)
    ap.add_argument("--export", default="/export", help="NFS export path (MOUNT)")
    ap.add_argument("--share", default="share", help="SMB share name")
    ap.add_argument("--file", required=True, help="file name in the export/share root")
    ap.add_argument("--probe", action="append", default=[], metavar="NAME",
                    help="also try to open NAME first and ignore the result (repeatable)")
    ap.add_argument("--op", choices=["read", "write"], default="read")
    ap.add_argument("--outstanding", type=int, default=1, help="requests kept in flight")
    ap.add_argument("--io-size", type=int, default=65536, help="bytes per READ/WRITE")
    ap.add_argument("--bytes", type=int, required=True, help="total bytes to move")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="overall time limit")
    ap.add_argument("--json", help="write the result here (also printed)")
    a = ap.parse_args()
    if not (1 <= a.outstanding <= 1024) or a.io_size <= 0 or a.bytes <= 0:
        ap.error("need 1 <= outstanding <= 1024, io-size > 0, bytes > 0")
    fn = nfs3 if a.protocol == "nfs3" else smb2
    try:
        res = asyncio.run(asyncio.wait_for(fn(a), a.max_seconds))
    except asyncio.TimeoutError:
        print(f"loadgen: gave up after {a.max_seconds} s", file=sys.stderr)
        return 3
    except (RpcError, SmbError, RuntimeError, OSError) as e:
        print(f"loadgen: {e}", file=sys.stderr)
        return 1
    st: Stats = res.pop("stats")
    lat = sorted(st.lat)
    out = {
        "protocol": a.protocol,
        "op": a.op,
        "outstanding": a.outstanding,
        "max_outstanding_observed": st.max_in_flight,
        "io_size": a.io_size,
        "bytes": st.bytes,
        "requests": len(lat),
        "elapsed_s": round(res.pop("elapsed_s"), 4),
        **res,
    }
    out["throughput_mbps"] = round(st.bytes * 8 / out["elapsed_s"] / 1e6, 2)
    if lat:
        out["latency_ms"] = {
            "min": round(lat[0] * 1000, 3),
            "median": round(statistics.median(lat) * 1000, 3),
            "p95": round(lat[int(len(lat) * 0.95) - 1 if len(lat) > 1 else 0] * 1000, 3),
            "max": round(lat[-1] * 1000, 3),
        }
    text = json.dumps(out)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
