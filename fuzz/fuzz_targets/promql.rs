//! The Prometheus HTTP API response decoders of `queue_migrate::indicators::promql`:
//! `decode_instant` and `decode_batch` (the first byte is the number of queries of the batch).
//!
//! Besides "never panics", checks what the module documents: a success is exactly one finite
//! number (for a batch: one entry per query, each finite or absent), and every error renders as
//! a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queue_migrate::indicators::promql::{PromError, decode_batch, decode_instant};

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((&parts, rest)) = data.split_first()
        && let Ok(rest) = std::str::from_utf8(rest)
    {
        let parts = usize::from(parts % 16);
        match decode_batch(rest, parts) {
            Ok(values) => {
                assert_eq!(values.len(), parts, "{values:?} from {rest:?}");
                assert!(values.iter().flatten().all(|v| v.is_finite()), "{values:?}");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    match decode_instant(body) {
        Ok(v) => assert!(
            v.is_finite(),
            "decoded a non-finite value {v} from {body:?}"
        ),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if let PromError::SeveralSeries { count, .. } = e {
                assert!(count >= 2, "SeveralSeries with {count} series");
            }
        }
    }
});
