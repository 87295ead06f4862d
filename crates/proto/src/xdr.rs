//! A bounded big-endian XDR (RFC 4506) cursor.
//!
//! Every read checks the remaining length first and returns
//! [`ParseError::Incomplete`] instead of reading past the end, so parsers
//! built on it cannot panic on truncated input. Variable-length items carry
//! an explicit maximum so that a corrupt length field is reported as
//! `Malformed` rather than driving a huge skip or allocation.

use crate::error::{ParseError, Result};

/// Longest name or path copied out of a record (bytes). Longer than any
/// real NAME_MAX/PATH_MAX, short enough to bound allocations.
pub const MAX_NAME_LEN: u32 = 4096;

/// Upper bound accepted for an array element count before it is treated as
/// malformed; loops are further bounded by the bytes actually present.
pub const MAX_ARRAY_LEN: u32 = 1 << 20;

/// Round `n` up to the next multiple of 4 (XDR alignment), without overflow.
#[inline]
pub fn pad4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

#[derive(Debug, Clone)]
pub struct XdrCursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> XdrCursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread bytes.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Take exactly `n` bytes, no padding.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(ParseError::Incomplete)?;
        let s = self.buf.get(self.pos..end).ok_or(ParseError::Incomplete)?;
        self.pos = end;
        Ok(s)
    }

    /// Skip `n` bytes, no padding.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.take(n).map(|_| ())
    }

    /// Skip `n` bytes plus XDR padding.
    pub fn skip_padded(&mut self, n: usize) -> Result<()> {
        self.skip(pad4(n))
    }

    /// Consume everything left (used when a payload is known to be cut).
    pub fn skip_to_end(&mut self) {
        self.pos = self.buf.len();
    }

    pub fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self) -> Result<i32> {
        self.u32().map(|v| v as i32)
    }

    pub fn u64(&mut self) -> Result<u64> {
        let hi = self.u32()? as u64;
        let lo = self.u32()? as u64;
        Ok((hi << 32) | lo)
    }

    pub fn i64(&mut self) -> Result<i64> {
        self.u64().map(|v| v as i64)
    }

    /// XDR bool: strictly 0 or 1.
    pub fn bool(&mut self) -> Result<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ParseError::Malformed("xdr bool not 0 or 1")),
        }
    }

    /// Fixed-length opaque of `n` bytes followed by padding.
    pub fn opaque_fixed(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self.take(n)?;
        self.skip(pad4(n) - n)?;
        Ok(s)
    }

    /// Fixed-length opaque into an array (e.g. verifiers, session ids).
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.opaque_fixed(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    /// Only the length word of a variable opaque, checked against `max`.
    pub fn opaque_len(&mut self, max: u32) -> Result<u32> {
        let len = self.u32()?;
        if len > max {
            return Err(ParseError::Malformed("xdr opaque longer than its bound"));
        }
        Ok(len)
    }

    /// Variable-length opaque `<max>` with padding.
    pub fn opaque(&mut self, max: u32) -> Result<&'a [u8]> {
        let len = self.opaque_len(max)? as usize;
        self.opaque_fixed(len)
    }

    /// Skip a variable-length opaque `<max>`.
    pub fn skip_opaque(&mut self, max: u32) -> Result<()> {
        self.opaque(max).map(|_| ())
    }

    /// XDR string: the same encoding as a variable opaque.
    pub fn string(&mut self, max: u32) -> Result<&'a [u8]> {
        self.opaque(max)
    }

    /// A string decoded as UTF-8 (lossy), bounded by [`MAX_NAME_LEN`].
    pub fn name(&mut self) -> Result<String> {
        let s = self.string(MAX_NAME_LEN)?;
        Ok(String::from_utf8_lossy(s).into_owned())
    }

    /// An array element count, bounded by `max`.
    pub fn count(&mut self, max: u32) -> Result<u32> {
        let n = self.u32()?;
        if n > max {
            return Err(ParseError::Malformed("xdr array longer than its bound"));
        }
        Ok(n)
    }

    /// Capacity to reserve for `count` elements of at least `min_size`
    /// bytes each: never more than could fit in what is left.
    pub fn capacity_hint(&self, count: u32, min_size: usize) -> usize {
        (count as usize).min(self.remaining() / min_size.max(1))
    }

    /// Skip an array of u32 `<max>` (e.g. bitmap4, gid lists).
    pub fn skip_u32_array(&mut self, max: u32) -> Result<()> {
        let n = self.count(max)? as usize;
        self.skip(n.saturating_mul(4))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_and_padding() {
        let b = [
            0, 0, 0, 7, // u32
            0xff, 0xff, 0xff, 0xfe, // i32 -2
            0, 0, 0, 1, 0, 0, 0, 2, // u64
            0, 0, 0, 1, // bool
            0, 0, 0, 3, b'a', b'b', b'c', 0, // string "abc" + pad
            1, 2, 0, 0, // fixed 2 + pad
        ];
        let mut c = XdrCursor::new(&b);
        assert_eq!(c.u32(), Ok(7));
        assert_eq!(c.i32(), Ok(-2));
        assert_eq!(c.u64(), Ok((1 << 32) | 2));
        assert_eq!(c.bool(), Ok(true));
        assert_eq!(c.name().as_deref(), Ok("abc"));
        assert_eq!(c.opaque_fixed(2), Ok(&[1u8, 2][..]));
        assert!(c.is_empty());
        assert_eq!(c.u32(), Err(ParseError::Incomplete));
    }

    #[test]
    fn bounds_and_errors() {
        let mut c = XdrCursor::new(&[0, 0, 0, 2]);
        assert_eq!(c.bool(), Err(ParseError::Malformed("xdr bool not 0 or 1")));
        let mut c = XdrCursor::new(&[0, 0, 0, 9, 1, 2]);
        assert!(matches!(c.opaque(8), Err(ParseError::Malformed(_))));
        let mut c = XdrCursor::new(&[0, 0, 0, 5, 1, 2, 3, 4, 5, 0]);
        assert_eq!(c.opaque(8), Err(ParseError::Incomplete));
        let mut c = XdrCursor::new(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(c.opaque(u32::MAX), Err(ParseError::Incomplete));
        let mut c = XdrCursor::new(&[1, 2, 3]);
        assert_eq!(c.u32(), Err(ParseError::Incomplete));
        assert_eq!(c.pos(), 0);
        assert_eq!(c.capacity_hint(1000, 8), 0);
        assert_eq!(pad4(usize::MAX), usize::MAX & !3);
    }
}
