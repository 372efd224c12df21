//! The SQL function the SQLite backend adds to each of its connections: `qm_f64_bits(x)`, the
//! IEEE 754 bits of a real as an integer. A scrape history is read one row per series, its
//! values gathered by `group_concat`; integers come back exactly from that text, while SQLite's
//! text for a real does not (15 significant digits; and `printf`'s decoding of a double, even
//! with 20 digits, is a unit in the last place off for some values beyond about 1e±80).
//!
//! # Guarantees
//! - `qm_f64_bits(x)` is `x`'s bits for a real (an integer is first converted to a real, as
//!   SQLite does) and NULL for NULL; [`from_bits`] turns the integer back into the same double.

use std::ffi::{CStr, c_int};

use libsqlite3_sys as ffi;
use sqlx::SqliteConnection;

/// The function's name, as the queries spell it.
const NAME: &CStr = c"qm_f64_bits";

/// The double whose bits `qm_f64_bits` answered.
pub(super) fn from_bits(bits: i64) -> f64 {
    f64::from_bits(u64::from_ne_bytes(bits.to_ne_bytes()))
}

/// The function itself, as SQLite calls it (with one value: it is registered with one).
extern "C" fn f64_bits(
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite passes `argc` valid values in `argv` and a valid context, for the
    // duration of the call.
    unsafe {
        if argc != 1 || ffi::sqlite3_value_type(*argv) == ffi::SQLITE_NULL {
            ffi::sqlite3_result_null(ctx);
            return;
        }
        let bits = ffi::sqlite3_value_double(*argv).to_bits();
        ffi::sqlite3_result_int64(ctx, i64::from_ne_bytes(bits.to_ne_bytes()));
    }
}

/// Add `qm_f64_bits` to `conn` (every connection of the store's pool, as it opens).
///
/// # Errors
/// The handle cannot be had (the connection's worker stopped), or SQLite refuses the function.
pub(super) async fn register(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    // SAFETY: the handle is locked away from the connection's worker for the call; the name
    // is a static C string; no user data, so no destructor.
    let rc = unsafe {
        ffi::sqlite3_create_function_v2(
            db,
            NAME.as_ptr(),
            1,
            ffi::SQLITE_UTF8 | ffi::SQLITE_DETERMINISTIC | ffi::SQLITE_INNOCUOUS,
            std::ptr::null_mut(),
            Some(f64_bits),
            None,
            None,
            None,
        )
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Configuration(
            format!(
                "cannot add the SQL function {NAME:?} to the SQLite connection (SQLite error {rc})"
            )
            .into(),
        ))
    }
}
