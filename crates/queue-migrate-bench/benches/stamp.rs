//! The producer's stamp path: `Router::stamp_into` (route + the six stamp headers written into a
//! reusable `StampHeaders`) beside `Router::route` alone and the allocating `Router::stamp` +
//! `RouteStamp::headers`, in one run, so that their ratio is read on the same machine state.
//!
//! ```text
//! cargo bench -p queue-migrate-bench --bench stamp
//! ```
//!
//! Before the timings, the binary checks (and panics otherwise) that `stamp_into` allocates
//! nothing: a counting `#[global_allocator]` counts this thread's allocations during 100,000
//! calls. After them it prints each function's median and the ratio `stamp_into / route`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use queue_migrate::router::Router;
use queue_migrate::routing::{BrokerNames, RoutingDocument, Side};
use queue_migrate::stamp::StampHeaders;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only a
// const-initialised thread-local without destructor, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const KEYS: usize = 1024;

/// Realistic aggregate keys: `order-<n>` and `customer:<8 digits>`, both sides of the cut.
fn keys() -> Vec<String> {
    (0..KEYS)
        .map(|i| {
            if i % 2 == 0 {
                format!("order-{:08x}-{:04x}", i * 2_654_435_761 % 4_294_967_291, i)
            } else {
                format!("customer:{:08}", i * 7_919)
            }
        })
        .collect()
}

fn doc() -> RoutingDocument {
    RoutingDocument {
        migration: "orders".into(),
        generation: 7,
        state: "slices".into(),
        step: Some(1),
        paused: false,
        slices_total: 128,
        slices_migrated: 64,
        consume: vec![Side::Old, Side::New],
        brokers: BrokerNames {
            old: "rabbitmq".into(),
            new: "nats".into(),
        },
        updated_at: "2026-11-30T00:00:00Z".into(),
    }
}

fn check_no_allocation(router: &Router, keys: &[String]) {
    const CALLS: usize = 100_000;
    let mut headers = StampHeaders::new("checkout").expect("a valid producer name");
    // Warm up: arc-swap registers this thread's debt slots on its first load.
    for k in keys {
        black_box(router.stamp_into(k, 1, &mut headers).expect("a stamp"));
    }
    let before = ALLOCS.with(Cell::get);
    for i in 0..CALLS {
        let at = 1_764_460_800_000 + i as i64;
        black_box(
            router
                .stamp_into(black_box(&keys[i % KEYS]), at, &mut headers)
                .ok(),
        );
        black_box(headers.pairs());
    }
    let n = ALLOCS.with(Cell::get) - before;
    println!("allocations in {CALLS} calls of stamp_into: {n}");
    assert_eq!(n, 0, "stamp_into allocated");
}

fn main() {
    let keys = keys();
    let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
    router.offer(doc()).expect("a coherent document");
    check_no_allocation(&router, &keys);

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = c.benchmark_group("stamp");
    let mut i = 0usize;
    let mut next = move || {
        i = (i + 1) % KEYS;
        i
    };
    group.bench_function("route", |b| {
        b.iter(|| router.route(black_box(&keys[next()])));
    });
    let mut headers = StampHeaders::new("checkout").expect("a valid producer name");
    group.bench_function("stamp_into", |b| {
        b.iter(|| {
            let route = router.stamp_into(
                black_box(&keys[next()]),
                black_box(1_764_460_800_123),
                &mut headers,
            );
            black_box(headers.pairs());
            route
        });
    });
    group.bench_function("stamp_allocating", |b| {
        b.iter(|| {
            let route = router.route(black_box(&keys[next()]));
            router
                .stamp(&route, "checkout", black_box(1_764_460_800_123))
                .map(|s| s.headers())
        });
    });
    group.finish();
    c.final_summary();
}
