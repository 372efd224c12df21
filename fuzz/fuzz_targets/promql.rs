//! The Prometheus HTTP API response decoder: `queue_migrate::indicators::promql::decode_instant`
//! (the module's only public decoder).
//!
//! Besides "never panics", checks what the module documents: a success is exactly one finite
//! number, and every error renders as a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queue_migrate::indicators::promql::{PromError, decode_instant};

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
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
