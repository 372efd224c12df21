//! The slice function: which of `slices` buckets an aggregate key falls in.
//!
//! Byte-for-byte the function of seed 000: the first four bytes of SHA-256 over the key's UTF-8,
//! read big-endian, modulo the slice count. Every message of one key lands in one slice, so moving
//! whole slices between brokers keeps per-key order.
//!
//! # Guarantees
//! - Stable across processes, platforms and languages (see `docs/routing.md` for Node.js and Python).
//! - No allocation.

use sha2::{Digest, Sha256};

/// The slice of `key` among `slices` (a `slices` of 0 is treated as 1).
pub fn slice_of(key: &str, slices: u32) -> u32 {
    let digest = Sha256::digest(key.as_bytes());
    let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    head % slices.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors_from_seed_000() {
        assert_eq!(slice_of("order-0", 128), 8);
        assert_eq!(slice_of("order-0", 1000), 272);
        assert_eq!(slice_of("order-1", 128), 33);
    }

    #[test]
    fn zero_slices_does_not_panic() {
        assert_eq!(slice_of("anything", 0), 0);
    }
}
