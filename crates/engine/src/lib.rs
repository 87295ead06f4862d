//! The nastriage engine: one streaming pass over one or more captures
//! (merged in time order) that decodes every frame and feeds the analysers,
//! then hands back columnar (Arrow) tables and capture metadata.
//!
//! Data flows one way: capture → frames → analysers → tables. Nothing here
//! knows about Python; the binding in `crates/py` is a thin layer over
//! [`analyze`] and [`Analysis`].

mod analysis;
pub mod app;
mod columns;
pub mod concurrency;
mod connection_digest;
pub mod conversations;
mod deferred;
pub mod derived;
mod driver;
mod heap;
mod in_order;
mod interner;
pub mod json_text;
mod order_stats;
mod orphan_table;
mod pipeline;
pub mod reassembly;
mod spill;
mod srt_table;
mod stream_summary;
mod tables;
pub mod tcp;
#[cfg(test)]
mod test_rng;
pub mod time_profile;
mod transaction_table;
pub mod transactions;
mod tx_facts;
pub mod tx_store;

pub use analysis::{Analysis, CaptureSummary, ProtocolCount};
pub use driver::{analyze, AnalyzeOptions, Progress};
pub use nastriage_capture::CaptureError;

/// Version of the engine (and of the package).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
