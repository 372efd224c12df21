//! The SQL function the SQLite backend adds to each of its connections: `qm_f64_bits(x)`, the
//! IEEE 754 bits of a real as a signed integer ([`super::scrapes::to_bits`]). Schema 6 uses it
//! to write the samples of the rows it gathers into scrapes as their bits: SQLite's own text for
//! a real does not read back exact (15 significant digits; and `printf`'s decoding of a double,
//! even with 20 digits, is a unit in the last place off for some values beyond about 1e±80).
//!
//! # Guarantees
//! - `qm_f64_bits(x)` is `x`'s bits for a real (an integer is first converted to a real, as
//!   SQLite does), and NULL for anything else (NULL, text, a blob: a value edited by hand
//!   becomes a `null` that the reader reports as a corrupt row, never a made-up number).

use std::ffi::{CStr, c_int};

use libsqlite3_sys as ffi;
use sqlx::SqliteConnection;

use super::scrapes::to_bits;

/// The function's name, as the queries spell it.
const NAME: &CStr = c"qm_f64_bits";

/// The function itself, as SQLite calls it (with one value: it is registered with one).
///
/// # Safety
/// `ctx` and the `argc` values in `argv` must be valid for the call, as SQLite passes them.
unsafe extern "C" fn f64_bits(
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: as the caller guarantees; `*argv` is read only when there is one value.
    unsafe {
        let number = argc == 1
            && matches!(
                ffi::sqlite3_value_type(*argv),
                ffi::SQLITE_FLOAT | ffi::SQLITE_INTEGER
            );
        if !number {
            ffi::sqlite3_result_null(ctx);
            return;
        }
        ffi::sqlite3_result_int64(ctx, to_bits(ffi::sqlite3_value_double(*argv)));
    }
}

/// The oldest SQLite with the JSON functions built in (3.38.0), which the store's writes and
/// schema 6 use.
const OLDEST_VERSION: c_int = 3_038_000;

/// The SQLite library linked in, when it cannot run the store's queries: older than
/// [`OLDEST_VERSION`], or built without its JSON functions (`SQLITE_OMIT_JSON`); `None` when it
/// will do. sqlx links its bundled SQLite (3.51 with this lock file), unless the build was told
/// to use the system's.
pub(super) fn too_old() -> Option<String> {
    // SAFETY: the calls only read constants of the library; the option's name is a static C
    // string.
    let (number, text, no_json) = unsafe {
        (
            ffi::sqlite3_libversion_number(),
            CStr::from_ptr(ffi::sqlite3_libversion()),
            ffi::sqlite3_compileoption_used(c"OMIT_JSON".as_ptr()) == 1,
        )
    };
    let version = text.to_string_lossy();
    if number < OLDEST_VERSION {
        Some(version.into_owned())
    } else if no_json {
        Some(format!("{version} built without its JSON functions"))
    } else {
        None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linked_sqlite_has_the_json_functions() {
        assert_eq!(too_old(), None);
    }
}
