//! placeholder
mod error;
pub mod mount_records;
pub mod nfs2_records;
pub mod nfs3_records;
pub mod rpc_records;
#[cfg(test)]
mod testutil;
pub mod xdr;
