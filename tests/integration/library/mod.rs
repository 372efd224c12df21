//! What producers and consumers link: slicing and stamp vectors, the routing follower, the
//! clients in other languages, the dedup backends (SQL, Redis).
//!
//! Filter a topic by its path: `cargo test --test integration -- library::slice_vectors::`.

mod clients;
mod dedup_redis;
mod dedup_sql;
mod router_follow;
mod slice_vectors;
mod stamp_wire;
