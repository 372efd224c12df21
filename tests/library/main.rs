//! What producers and consumers link: slicing and stamp vectors, the routing follower, the
//! clients in other languages, the dedup backends (SQL, Redis).
//!
//! One test binary for the area (ripgrep's habit: a module per topic, `tests/common` compiled
//! once). Filter a topic by its module: `cargo test --test library -- slice_vectors::`.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod dedup_redis;
mod dedup_sql;
mod router_follow;
mod slice_vectors;
mod stamp_wire;
