//! The slice function: which of `slices` buckets an aggregate key falls in.
//!
//! Byte-for-byte the function of `docs/design.md#the-slice-function`: the first four bytes of SHA-256 over the key's UTF-8,
//! read big-endian, modulo the slice count. Every message of one key lands in one slice, so moving
//! whole slices between brokers keeps per-key order.
//!
//! # Guarantees
//! - Stable across processes, platforms and languages (see `docs/routing.md` for Node.js and Python).
//! - No allocation.

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use sha2::{Digest, Sha256};

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
const SHA256_IV: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// The longest message that fits one padded SHA-256 block (64 bytes less the `0x80` marker and
/// the 8-byte length).
const ONE_BLOCK: usize = 55;

/// The slice of `key` among `slices` (a `slices` of 0 is treated as 1).
///
/// ```
/// use queue_migrate_client::slice::slice_of;
///
/// assert_eq!(slice_of("order-0", 128), 8); // tests/fixtures/vectors/slices.jsonl
/// assert_eq!(slice_of("order-0", 1000), 272);
/// // A message goes to the new broker when its slice is below `slices_migrated`.
/// let goes_new = slice_of("order-0", 128) < 32;
/// assert!(goes_new);
/// ```
#[inline]
pub fn slice_of(key: &str, slices: u32) -> u32 {
    digest_head(key.as_bytes()) % slices.max(1)
}

/// The first four bytes of SHA-256(`bytes`), big-endian: the first word of the final state. A
/// message of up to 55 bytes (every realistic aggregate key) is padded here (FIPS 180-4, 5.1.1)
/// and compressed once, without the streaming hasher's buffer and finalization; a longer one goes
/// through [`Sha256`].
#[inline]
fn digest_head(bytes: &[u8]) -> u32 {
    if bytes.len() > ONE_BLOCK {
        let digest = Sha256::digest(bytes);
        return u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    }
    let mut block = [0_u8; 64];
    block[..bytes.len()].copy_from_slice(bytes);
    block[bytes.len()] = 0x80;
    // At most 55 bytes: the bit length fits easily.
    let bits = (bytes.len() as u64) * 8;
    block[56..].copy_from_slice(&bits.to_be_bytes());
    let mut state = SHA256_IV;
    sha2::block_api::compress256(&mut state, &[block]);
    state[0]
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

    /// The one-block path against the streaming hasher, at every length around the block
    /// boundary (55 fits, 56 does not) and beyond.
    #[test]
    fn one_block_digest_is_sha256_at_every_length() {
        let text: String = "aé🚀order-".chars().cycle().take(200).collect();
        for end in 0..=text.len() {
            let Some(key) = text.get(..end) else {
                continue; // inside a multibyte character
            };
            let digest = Sha256::digest(key.as_bytes());
            let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
            assert_eq!(digest_head(key.as_bytes()), head, "{} bytes", key.len());
        }
        for len in [0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120] {
            let key = vec![b'x'; len];
            let digest = Sha256::digest(&key);
            let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
            assert_eq!(digest_head(&key), head, "{len} bytes");
        }
    }

    #[test]
    fn zero_slices_does_not_panic() {
        assert_eq!(slice_of("anything", 0), 0);
    }
}
