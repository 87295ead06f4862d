//! NFSv3 (RFC 1813) call arguments and a small in-memory server answering
//! them with plausible results.
//!
//! The analyser's NFS layer keys on procedure numbers, file handles, offsets
//! and counts, stability levels and the attributes in replies; fixtures
//! therefore have to carry real, well-formed NFSv3 bodies, not placeholders.
//! [`Call`] encodes the arguments of the procedures a file copy uses;
//! [`Server`] keeps a tiny file tree (32-byte handles, `fattr3` attributes
//! that change as files are written) and produces the matching results, so
//! a scenario only decides *what* the client does.

use crate::rng::Rng;
use crate::rpc::Xdr;

pub const PROGRAM: u32 = 100003;
pub const VERSION: u32 = 3;

/// Procedure numbers.
pub mod procs {
    pub const NULL: u32 = 0;
    pub const GETATTR: u32 = 1;
    pub const LOOKUP: u32 = 3;
    pub const ACCESS: u32 = 4;
    pub const READ: u32 = 6;
    pub const WRITE: u32 = 7;
    pub const CREATE: u32 = 8;
    pub const READDIRPLUS: u32 = 17;
    pub const FSINFO: u32 = 19;
    pub const COMMIT: u32 = 21;
}

/// `nfsstat3` values used here.
pub mod status {
    pub const OK: u32 = 0;
    pub const NOENT: u32 = 2;
    pub const IO: u32 = 5;
    pub const EXIST: u32 = 17;
    pub const NOTDIR: u32 = 20;
    pub const STALE: u32 = 70;
}

/// ACCESS3 bits.
pub mod access {
    pub const READ: u32 = 0x01;
    pub const LOOKUP: u32 = 0x02;
    pub const MODIFY: u32 = 0x04;
    pub const EXTEND: u32 = 0x08;
    pub const DELETE: u32 = 0x10;
    pub const EXECUTE: u32 = 0x20;
}

/// A 32-byte NFSv3 file handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileHandle(pub [u8; 32]);

impl FileHandle {
    fn encode(&self, x: &mut Xdr) {
        x.opaque(&self.0);
    }
}

/// `stable_how` of a WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stable {
    Unstable = 0,
    DataSync = 1,
    FileSync = 2,
}

/// The calls this module can encode.
#[derive(Debug, Clone)]
pub enum Call {
    Null,
    Getattr {
        fh: FileHandle,
    },
    Lookup {
        dir: FileHandle,
        name: String,
    },
    Access {
        fh: FileHandle,
        access: u32,
    },
    Read {
        fh: FileHandle,
        offset: u64,
        count: u32,
    },
    Write {
        fh: FileHandle,
        offset: u64,
        stable: Stable,
        data: Vec<u8>,
    },
    /// UNCHECKED create with the given mode.
    Create {
        dir: FileHandle,
        name: String,
        mode: u32,
    },
    Commit {
        fh: FileHandle,
        offset: u64,
        count: u32,
    },
    Readdirplus {
        dir: FileHandle,
        cookie: u64,
        cookieverf: [u8; 8],
        dircount: u32,
        maxcount: u32,
    },
    Fsinfo {
        fh: FileHandle,
    },
}

impl Call {
    pub fn procedure(&self) -> u32 {
        match self {
            Call::Null => procs::NULL,
            Call::Getattr { .. } => procs::GETATTR,
            Call::Lookup { .. } => procs::LOOKUP,
            Call::Access { .. } => procs::ACCESS,
            Call::Read { .. } => procs::READ,
            Call::Write { .. } => procs::WRITE,
            Call::Create { .. } => procs::CREATE,
            Call::Commit { .. } => procs::COMMIT,
            Call::Readdirplus { .. } => procs::READDIRPLUS,
            Call::Fsinfo { .. } => procs::FSINFO,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Call::Null => "NULL",
            Call::Getattr { .. } => "GETATTR",
            Call::Lookup { .. } => "LOOKUP",
            Call::Access { .. } => "ACCESS",
            Call::Read { .. } => "READ",
            Call::Write { .. } => "WRITE",
            Call::Create { .. } => "CREATE",
            Call::Commit { .. } => "COMMIT",
            Call::Readdirplus { .. } => "READDIRPLUS",
            Call::Fsinfo { .. } => "FSINFO",
        }
    }

    /// The XDR-encoded arguments.
    pub fn encode_args(&self) -> Vec<u8> {
        let mut x = Xdr::new();
        match self {
            Call::Null => {}
            Call::Getattr { fh } | Call::Fsinfo { fh } => fh.encode(&mut x),
            Call::Lookup { dir, name } => {
                dir.encode(&mut x);
                x.string(name);
            }
            Call::Access { fh, access } => {
                fh.encode(&mut x);
                x.u32(*access);
            }
            Call::Read { fh, offset, count } | Call::Commit { fh, offset, count } => {
                fh.encode(&mut x);
                x.u64(*offset).u32(*count);
            }
            Call::Write {
                fh,
                offset,
                stable,
                data,
            } => {
                fh.encode(&mut x);
                x.u64(*offset)
                    .u32(data.len() as u32)
                    .u32(*stable as u32)
                    .opaque(data);
            }
            Call::Create { dir, name, mode } => {
                dir.encode(&mut x);
                x.string(name);
                x.u32(0); // UNCHECKED
                          // sattr3: mode set; uid, gid, size unset; times unchanged.
                x.bool(true).u32(*mode);
                x.bool(false).bool(false).bool(false);
                x.u32(0).u32(0);
            }
            Call::Readdirplus {
                dir,
                cookie,
                cookieverf,
                dircount,
                maxcount,
            } => {
                dir.encode(&mut x);
                x.u64(*cookie)
                    .opaque_fixed(cookieverf)
                    .u32(*dircount)
                    .u32(*maxcount);
            }
        }
        x.into_bytes()
    }
}

/// `fattr3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fattr3 {
    /// 1 = regular file, 2 = directory.
    pub ftype: u32,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub used: u64,
    pub fsid: u64,
    pub fileid: u64,
    pub atime: (u32, u32),
    pub mtime: (u32, u32),
    pub ctime: (u32, u32),
}

impl Fattr3 {
    pub fn encode(&self, x: &mut Xdr) {
        x.u32(self.ftype)
            .u32(self.mode)
            .u32(self.nlink)
            .u32(self.uid)
            .u32(self.gid);
        x.u64(self.size)
            .u64(self.used)
            .u32(0)
            .u32(0)
            .u64(self.fsid)
            .u64(self.fileid);
        for t in [self.atime, self.mtime, self.ctime] {
            x.u32(t.0).u32(t.1);
        }
    }
}

/// `post_op_attr`: attributes follow when `a` is given.
pub fn post_op_attr(x: &mut Xdr, a: Option<&Fattr3>) {
    match a {
        Some(a) => {
            x.bool(true);
            a.encode(x);
        }
        None => {
            x.bool(false);
        }
    }
}

/// `wcc_data` with both the pre-operation and post-operation attributes.
pub fn wcc_data(x: &mut Xdr, before: &Fattr3, after: &Fattr3) {
    x.bool(true).u64(before.size);
    x.u32(before.mtime.0)
        .u32(before.mtime.1)
        .u32(before.ctime.0)
        .u32(before.ctime.1);
    post_op_attr(x, Some(after));
}

struct Node {
    fh: FileHandle,
    attr: Fattr3,
    name: String,
    parent: usize,
    children: Vec<usize>,
}

/// A tiny in-memory NFSv3 server: a file tree with attributes, answering
/// [`Call`]s with XDR-encoded results (status first, as in RFC 1813).
pub struct Server {
    nodes: Vec<Node>,
    fsid: u64,
    verf: [u8; 8],
    time: (u32, u32),
    rng: Rng,
}

impl Server {
    /// A server whose export root is an empty directory; `now_ns` sets the
    /// clock used for new attributes.
    pub fn new(seed: u64, now_ns: i64) -> Self {
        let mut rng = Rng::new(seed ^ 0x4e46_5333);
        let fsid = rng.next_u64() & 0xffff_ffff;
        let mut verf = [0u8; 8];
        rng.fill(&mut verf);
        let mut s = Server {
            nodes: Vec::new(),
            fsid,
            verf,
            time: (0, 0),
            rng,
        };
        s.set_time(now_ns);
        let root_attr = s.new_attr(2, 0o755, 4096);
        let fh = s.new_handle(root_attr.fileid);
        s.nodes.push(Node {
            fh,
            attr: Fattr3 {
                nlink: 2,
                ..root_attr
            },
            name: String::new(),
            parent: 0,
            children: Vec::new(),
        });
        s
    }

    /// Set the server clock (ns since the epoch).
    pub fn set_time(&mut self, now_ns: i64) {
        self.time = (
            (now_ns / 1_000_000_000) as u32,
            (now_ns % 1_000_000_000) as u32,
        );
    }

    pub fn root(&self) -> FileHandle {
        self.nodes[0].fh
    }

    /// The write verifier returned by WRITE and COMMIT.
    pub fn write_verifier(&self) -> [u8; 8] {
        self.verf
    }

    fn new_attr(&mut self, ftype: u32, mode: u32, size: u64) -> Fattr3 {
        let fileid = 1000 + self.nodes.len() as u64 * 7 + (self.rng.next_u32() % 5) as u64;
        // Files are created a while before the capture starts.
        let old = (self.time.0.saturating_sub(86_400 * 30), 0);
        Fattr3 {
            ftype,
            mode,
            nlink: 1,
            uid: 1000,
            gid: 1000,
            size,
            used: size.div_ceil(4096) * 4096,
            fsid: self.fsid,
            fileid,
            atime: old,
            mtime: old,
            ctime: old,
        }
    }

    fn new_handle(&mut self, fileid: u64) -> FileHandle {
        // Shaped like a Linux knfsd handle: version/type header, fsid,
        // inode number, generation.
        let mut fh = [0u8; 32];
        fh[..4].copy_from_slice(&[1, 0, 7, 1]);
        fh[4..12].copy_from_slice(&self.fsid.to_le_bytes());
        fh[12..20].copy_from_slice(&fileid.to_le_bytes());
        let mut gen = [0u8; 12];
        self.rng.fill(&mut gen);
        fh[20..].copy_from_slice(&gen);
        FileHandle(fh)
    }

    fn find(&self, fh: &FileHandle) -> Option<usize> {
        self.nodes.iter().position(|n| n.fh == *fh)
    }

    fn child(&self, dir: usize, name: &str) -> Option<usize> {
        self.nodes[dir]
            .children
            .iter()
            .copied()
            .find(|&c| self.nodes[c].name == name)
    }

    fn add_node(&mut self, dir: usize, name: &str, ftype: u32, mode: u32, size: u64) -> usize {
        let attr = self.new_attr(ftype, mode, size);
        let fh = self.new_handle(attr.fileid);
        let idx = self.nodes.len();
        self.nodes.push(Node {
            fh,
            attr,
            name: name.to_string(),
            parent: dir,
            children: Vec::new(),
        });
        self.nodes[dir].children.push(idx);
        idx
    }

    /// Add a regular file of `size` bytes under directory `dir`.
    pub fn add_file(&mut self, dir: &FileHandle, name: &str, size: u64) -> FileHandle {
        let d = self.find(dir).expect("add_file: unknown directory");
        let i = self.add_node(d, name, 1, 0o644, size);
        self.nodes[i].fh
    }

    /// The handle of `name` in directory `dir`, if both exist.
    pub fn lookup(&self, dir: &FileHandle, name: &str) -> Option<FileHandle> {
        let d = self.find(dir)?;
        self.child(d, name).map(|c| self.nodes[c].fh)
    }

    /// Attributes of `fh`, if it exists.
    pub fn attributes(&self, fh: &FileHandle) -> Option<Fattr3> {
        self.find(fh).map(|i| self.nodes[i].attr)
    }

    /// The file contents served by READ: a cheap deterministic pattern.
    pub fn content(fileid: u64, offset: u64, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| {
                let p = offset + i;
                (p ^ (p >> 8) ^ fileid) as u8
            })
            .collect()
    }

    /// Results of `call` (XDR, beginning with `nfsstat3`).
    pub fn handle(&mut self, call: &Call) -> Vec<u8> {
        let mut x = Xdr::new();
        let now = self.time;
        match call {
            Call::Null => {}
            Call::Getattr { fh } => match self.find(fh) {
                Some(i) => {
                    x.u32(status::OK);
                    self.nodes[i].attr.encode(&mut x);
                }
                None => {
                    x.u32(status::STALE);
                }
            },
            Call::Fsinfo { fh } => {
                let a = self.find(fh).map(|i| self.nodes[i].attr);
                x.u32(status::OK);
                post_op_attr(&mut x, a.as_ref());
                // rtmax rtpref rtmult wtmax wtpref wtmult dtpref
                for v in [65536u32, 65536, 4096, 65536, 65536, 4096, 8192] {
                    x.u32(v);
                }
                x.u64(u64::MAX >> 1).u32(0).u32(1).u32(0x1b);
            }
            Call::Lookup { dir, name } => match self.find(dir) {
                None => {
                    x.u32(status::STALE).bool(false);
                }
                Some(d) => match self.child(d, name) {
                    Some(c) => {
                        x.u32(status::OK);
                        self.nodes[c].fh.encode(&mut x);
                        post_op_attr(&mut x, Some(&self.nodes[c].attr));
                        post_op_attr(&mut x, Some(&self.nodes[d].attr));
                    }
                    None => {
                        x.u32(status::NOENT);
                        post_op_attr(&mut x, Some(&self.nodes[d].attr));
                    }
                },
            },
            Call::Access { fh, access } => match self.find(fh) {
                Some(i) => {
                    let a = &self.nodes[i].attr;
                    let allowed = if a.ftype == 2 { 0x1f } else { 0x1d };
                    x.u32(status::OK);
                    post_op_attr(&mut x, Some(a));
                    x.u32(access & allowed);
                }
                None => {
                    x.u32(status::STALE).bool(false);
                }
            },
            Call::Read { fh, offset, count } => match self.find(fh) {
                Some(i) => {
                    let a = &mut self.nodes[i].attr;
                    a.atime = now;
                    let n = a.size.saturating_sub(*offset).min(*count as u64);
                    let eof = offset + n >= a.size;
                    x.u32(status::OK);
                    post_op_attr(&mut x, Some(a));
                    x.u32(n as u32).bool(eof);
                    x.opaque(&Server::content(a.fileid, *offset, n as usize));
                }
                None => {
                    x.u32(status::STALE).bool(false);
                }
            },
            Call::Write {
                fh,
                offset,
                stable,
                data,
            } => match self.find(fh) {
                Some(i) => {
                    let before = self.nodes[i].attr;
                    let a = &mut self.nodes[i].attr;
                    a.size = a.size.max(offset + data.len() as u64);
                    a.used = a.size.div_ceil(4096) * 4096;
                    a.mtime = now;
                    a.ctime = now;
                    let after = *a;
                    x.u32(status::OK);
                    wcc_data(&mut x, &before, &after);
                    x.u32(data.len() as u32)
                        .u32(*stable as u32)
                        .opaque_fixed(&self.verf);
                }
                None => {
                    x.u32(status::STALE).bool(false).bool(false);
                }
            },
            Call::Create { dir, name, mode } => match self.find(dir) {
                Some(d) => {
                    let before = self.nodes[d].attr;
                    let c = match self.child(d, name) {
                        Some(c) => c,
                        None => {
                            let c = self.add_node(d, name, 1, *mode, 0);
                            let a = &mut self.nodes[c].attr;
                            (a.atime, a.mtime, a.ctime) = (now, now, now);
                            c
                        }
                    };
                    let da = &mut self.nodes[d].attr;
                    da.mtime = now;
                    da.ctime = now;
                    let after = *da;
                    x.u32(status::OK).bool(true);
                    self.nodes[c].fh.encode(&mut x);
                    post_op_attr(&mut x, Some(&self.nodes[c].attr));
                    wcc_data(&mut x, &before, &after);
                }
                None => {
                    x.u32(status::STALE).bool(false).bool(false);
                }
            },
            Call::Commit { fh, .. } => match self.find(fh) {
                Some(i) => {
                    let a = self.nodes[i].attr;
                    x.u32(status::OK);
                    wcc_data(&mut x, &a, &a);
                    x.opaque_fixed(&self.verf);
                }
                None => {
                    x.u32(status::STALE).bool(false).bool(false);
                }
            },
            Call::Readdirplus { dir, .. } => match self.find(dir) {
                Some(d) => {
                    let da = self.nodes[d].attr;
                    x.u32(status::OK);
                    post_op_attr(&mut x, Some(&da));
                    x.opaque_fixed(&[0, 0, 0, 0, 0, 0, 0, 1]);
                    let parent = self.nodes[d].parent;
                    let mut entries = vec![(".".to_string(), d), ("..".to_string(), parent)];
                    entries.extend(
                        self.nodes[d]
                            .children
                            .iter()
                            .map(|&c| (self.nodes[c].name.clone(), c)),
                    );
                    for (k, (name, n)) in entries.iter().enumerate() {
                        let node = &self.nodes[*n];
                        x.bool(true)
                            .u64(node.attr.fileid)
                            .string(name)
                            .u64(k as u64 + 1);
                        post_op_attr(&mut x, Some(&node.attr));
                        x.bool(true);
                        node.fh.encode(&mut x);
                    }
                    x.bool(false).bool(true);
                }
                None => {
                    x.u32(status::STALE).bool(false);
                }
            },
        }
        x.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_returns_requested_count() {
        let mut s = Server::new(1, 1_700_000_000_000_000_000);
        let root = s.root();
        let f = s.add_file(&root, "a", 100_000);
        let r = s.handle(&Call::Read {
            fh: f,
            offset: 0,
            count: 65536,
        });
        // status + post_op_attr (4 + 84) + count + eof + opaque length.
        let base = 4 + 88;
        assert_eq!(&r[base..base + 4], &65536u32.to_be_bytes());
        assert_eq!(&r[base + 4..base + 8], &0u32.to_be_bytes());
        assert_eq!(r.len(), base + 12 + 65536);
        let r = s.handle(&Call::Read {
            fh: f,
            offset: 65536,
            count: 65536,
        });
        assert_eq!(&r[base..base + 4], &(100_000u32 - 65536).to_be_bytes());
        assert_eq!(&r[base + 4..base + 8], &1u32.to_be_bytes());
    }

    #[test]
    fn create_then_write_grows_file() {
        let mut s = Server::new(1, 1_700_000_000_000_000_000);
        let root = s.root();
        let r = s.handle(&Call::Create {
            dir: root,
            name: "new".into(),
            mode: 0o644,
        });
        assert_eq!(&r[..8], &[0, 0, 0, 0, 0, 0, 0, 1]);
        let mut fh = [0u8; 32];
        fh.copy_from_slice(&r[12..44]);
        let fh = FileHandle(fh);
        s.handle(&Call::Write {
            fh,
            offset: 4096,
            stable: Stable::Unstable,
            data: vec![1; 4096],
        });
        assert_eq!(s.attributes(&fh).unwrap().size, 8192);
    }
}
