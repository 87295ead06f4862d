//! ONC RPC over TCP record marking (and UDP): calls matched to replies by
//! XID; NFS v2/v3/v4.x, MOUNT, portmapper and NFSACL decoded into
//! transactions. (Being written.)

use super::{Ctx, StreamParser};
use crate::reassembly::Chunk;

pub struct RpcParser {
    stream: u32,
}

impl RpcParser {
    pub fn new(stream: u32) -> Self {
        RpcParser { stream }
    }
}

impl StreamParser for RpcParser {
    fn chunk(&mut self, _dir: u8, _chunk: Chunk<'_>, _ctx: &mut Ctx<'_>) {
        let _ = self.stream;
    }
    fn finish(&mut self, _ctx: &mut Ctx<'_>) {}
}
