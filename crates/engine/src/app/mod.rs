//! Application layers over reassembled TCP (and UDP) payload: detection by
//! content, and the stream parsers that turn ONC RPC / NFS and SMB2/3 PDUs
//! into [`Transaction`](crate::transactions::Transaction)s.

use crate::reassembly::Chunk;
use crate::transactions::TransactionLog;

pub mod rpc;
pub mod smb2;
mod spares;

/// Context handed to a stream parser with every chunk.
pub struct Ctx<'a> {
    /// tcp.stream of the connection.
    pub stream: u32,
    pub log: &'a mut TransactionLog,
}

/// A parser of one TCP connection's application protocol. It receives both
/// directions' in-order chunks (direction 0 = a→b of the conversation) and
/// matches requests to replies itself.
pub trait StreamParser {
    fn chunk(&mut self, dir: u8, chunk: Chunk<'_>, ctx: &mut Ctx<'_>);
    /// End of the connection or of the capture: requests without a reply
    /// are emitted as unanswered transactions.
    fn finish(&mut self, ctx: &mut Ctx<'_>);
}

pub mod layer;
