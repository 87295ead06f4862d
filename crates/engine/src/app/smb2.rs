//! SMB2/3 over NetBIOS session framing: requests matched to responses by
//! MessageId, with async interim responses, credits, shares and file names.
//! (Being written.)

use super::{Ctx, StreamParser};
use crate::reassembly::Chunk;

pub struct Smb2Parser {
    stream: u32,
}

impl Smb2Parser {
    pub fn new(stream: u32) -> Self {
        Smb2Parser { stream }
    }
}

impl StreamParser for Smb2Parser {
    fn chunk(&mut self, _dir: u8, _chunk: Chunk<'_>, _ctx: &mut Ctx<'_>) {
        let _ = self.stream;
    }
    fn finish(&mut self, _ctx: &mut Ctx<'_>) {}
}
