//! The producer's hot path: `slice_of` and `Router::route`, on realistic aggregate keys.
//!
//! ```text
//! cargo bench -p queue-migrate-bench --bench slice   # criterion: ns per call, wall and CPU time
//! bench/slice.sh                  # the same, plus Node's baseline and callgrind counts
//! ```
//!
//! Before the timings, the binary checks (and panics otherwise) that neither function allocates:
//! a counting `#[global_allocator]` counts this thread's allocations during 100,000 calls of each,
//! idle and while another thread swaps routing documents. It also prints a checksum of the slices
//! of the key set, which `bench/slice_node.js` must reproduce with the migration article's
//! JavaScript.
//!
//! A baseline in the same run: `ArcSwapRouter`, the read path `Router::route` had first (an
//! `ArcSwapOption` load of the whole document, then `RoutingDocument::route`), measured idle and
//! under the same back-to-back swaps. A control: `slice_of_under_swaps`, `slice_of` while the
//! writer swaps documents into the router, to tell what the writer's mere presence costs the
//! machine from what it costs `route`.
//!
//! `QM_SLICE_LOOP=<slice_of|route|route_arcswap|empty>:<calls>` runs that many calls and exits, without
//! criterion: the entry point `bench/slice.sh` runs under `valgrind --tool=callgrind` to count
//! instructions per call.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use criterion::Criterion;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use queue_migrate::router::Router;
use queue_migrate::routing::{BrokerNames, Route, RoutingDocument, Side};
use queue_migrate::slice::slice_of;

// ---------------------------------------------------------------------------------------------
// A global allocator that counts the allocations of each thread.

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

/// Allocations made by this thread while `f` runs.
fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

// ---------------------------------------------------------------------------------------------
// The keys: the same 1,024 in bench/slice_node.js (mulberry32, seed 42).

const KEYS: usize = 1024;
const SLICES: u32 = 128;

/// mulberry32: a 32-bit generator that is easy to write identically in JavaScript.
struct Mulberry32(u32);

impl Mulberry32 {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x6D2B_79F5);
        let mut t = self.0;
        t = (t ^ (t >> 15)).wrapping_mul(t | 1);
        t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
        t ^ (t >> 14)
    }
}

/// Even indices `order-<uuid v4>`, odd indices `customer:<8 digits>`.
fn keys() -> Vec<String> {
    let mut rng = Mulberry32(42);
    (0..KEYS)
        .map(|i| {
            if i % 2 == 0 {
                let w: Vec<u32> = (0..4).map(|_| rng.next()).collect();
                let hex = format!("{:08x}{:08x}{:08x}{:08x}", w[0], w[1], w[2], w[3]);
                // version 4, variant 10xx
                let variant = ['8', '9', 'a', 'b'][(w[2] >> 28) as usize & 3];
                format!(
                    "order-{}-{}-4{}-{}{}-{}",
                    &hex[0..8],
                    &hex[8..12],
                    &hex[13..16],
                    variant,
                    &hex[17..20],
                    &hex[20..32]
                )
            } else {
                format!("customer:{:08}", rng.next() % 100_000_000)
            }
        })
        .collect()
}

/// FNV-1a over the slices of every key, in order: compared with Node's.
fn checksum(keys: &[String]) -> u32 {
    keys.iter().fold(0x811c_9dc5_u32, |h, k| {
        (h ^ slice_of(k, SLICES)).wrapping_mul(0x0100_0193)
    })
}

fn doc(generation: u64) -> RoutingDocument {
    RoutingDocument {
        migration: "orders".into(),
        generation,
        state: "slices".into(),
        step: Some(1),
        paused: false,
        slices_total: SLICES,
        slices_migrated: (generation % u64::from(SLICES + 1)) as u32,
        consume: vec![Side::Old, Side::New],
        brokers: BrokerNames {
            old: "rabbitmq".into(),
            new: "nats".into(),
        },
        updated_at: "2026-11-30T00:00:00Z".into(),
    }
}

/// The baseline: `Router::route`'s first read path, and its writer.
struct ArcSwapRouter {
    doc: ArcSwapOption<RoutingDocument>,
    write: Mutex<()>,
}

impl ArcSwapRouter {
    fn new() -> ArcSwapRouter {
        ArcSwapRouter {
            doc: ArcSwapOption::empty(),
            write: Mutex::new(()),
        }
    }

    fn route(&self, key: &str) -> Route {
        match &*self.doc.load() {
            Some(doc) => doc.route(key),
            None => Route::new(Side::Old, slice_of(key, SLICES), 0),
        }
    }

    fn offer(&self, doc: RoutingDocument) {
        let _writer = self.write.lock().expect("the writer lock");
        let current = self.doc.load_full();
        if current.is_none_or(|c| c.generation < doc.generation) {
            self.doc.store(Some(Arc::new(doc)));
        }
    }

    fn generation(&self) -> u64 {
        self.doc.load().as_ref().map_or(0, |d| d.generation)
    }
}

/// What a `Swapper` offers documents to.
trait Target: Send + Sync + 'static {
    fn offer_generation(&self, generation: u64);
    fn current(&self) -> u64;
}

impl Target for Router {
    fn offer_generation(&self, generation: u64) {
        self.offer(doc(generation)).expect("a coherent document");
    }
    fn current(&self) -> u64 {
        self.generation()
    }
}

impl Target for Arc<ArcSwapRouter> {
    fn offer_generation(&self, generation: u64) {
        self.offer(doc(generation));
    }
    fn current(&self) -> u64 {
        self.generation()
    }
}

/// How a `Swapper` paces its offers.
#[derive(Clone, Copy)]
enum Pace {
    /// One after the other.
    BackToBack,
    /// Busy-waits this long after each (sleeping would take the thread off the core for longer).
    Spin(Duration),
    /// Sleeps this long after each.
    Sleep(Duration),
}

/// A thread offering ever newer documents to a router until dropped, at `pace`.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    started: Instant,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start<T: Target + Clone>(router: &T, pace: Pace) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let (r, s, n) = (router.clone(), stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            let mut generation = r.current();
            while !s.load(Ordering::Relaxed) {
                generation += 1;
                r.offer_generation(generation);
                n.fetch_add(1, Ordering::Relaxed);
                match pace {
                    Pace::BackToBack => {}
                    Pace::Spin(p) => {
                        let until = Instant::now() + p;
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                    }
                    Pace::Sleep(p) => std::thread::sleep(p),
                }
            }
        });
        Swapper {
            stop,
            swaps,
            started: Instant::now(),
            thread: Some(thread),
        }
    }

    /// Stop; documents swapped in per second.
    fn finish(mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("the swapper thread");
        }
        self.swaps.load(Ordering::Relaxed) as f64 / self.started.elapsed().as_secs_f64()
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// No allocation on the hot path, idle and under swaps; panics otherwise.
fn check_no_allocation(keys: &[String]) {
    const CALLS: usize = 100_000;
    let router = Router::builder("orders").build();
    router.offer(doc(1)).expect("a coherent document");
    // Warm up: arc-swap registers this thread's debt slots on its first load.
    for k in keys {
        black_box(router.route(black_box(k)));
    }
    let slice = allocations_during(|| {
        for i in 0..CALLS {
            black_box(slice_of(black_box(&keys[i % KEYS]), SLICES));
        }
    });
    let idle = allocations_during(|| {
        for i in 0..CALLS {
            black_box(router.route(black_box(&keys[i % KEYS])));
        }
    });
    let swapper = Swapper::start(&router, Pace::BackToBack);
    std::thread::sleep(Duration::from_millis(20));
    let before = router.generation();
    let swapping = allocations_during(|| {
        for i in 0..CALLS {
            black_box(router.route(black_box(&keys[i % KEYS])));
        }
    });
    let seen = router.generation() - before;
    let rate = swapper.finish();
    println!(
        "allocations in {CALLS} calls: slice_of {slice}, route idle {idle}, route under swaps {swapping} \
         ({seen} generations swapped in meanwhile, {rate:.0} swaps/s)"
    );
    assert_eq!(slice, 0, "slice_of allocated");
    assert_eq!(idle, 0, "route allocated");
    assert_eq!(swapping, 0, "route allocated while documents were swapped");
    assert!(seen > 0, "no document was swapped in during the check");
}

/// The CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`): unlike wall time, it does not
/// count the time the thread waits for a core on a shared machine.
#[derive(Clone, Copy)]
struct ThreadCpu;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

unsafe extern "C" {
    fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
}

/// Linux's `CLOCK_THREAD_CPUTIME_ID`.
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

fn thread_cpu_now() -> Duration {
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, started: Duration) -> Duration {
        thread_cpu_now().saturating_sub(started)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

fn benches<M: Measurement>(c: &mut Criterion<M>, clock: &str) {
    let keys = keys();
    let mut i = 0usize;
    let mut next = move || {
        i = (i + 1) % KEYS;
        i
    };

    let mut group = c.benchmark_group(clock);
    group.bench_function("slice_of", |b| {
        b.iter(|| slice_of(black_box(&keys[next()]), black_box(SLICES)));
    });

    let router = Router::builder("orders").build();
    router.offer(doc(1)).expect("a coherent document");
    group.bench_function("route_idle", |b| {
        b.iter(|| router.route(black_box(&keys[next()])));
    });

    let swapper = Swapper::start(&router, Pace::BackToBack);
    group.bench_function("slice_of_under_swaps", |b| {
        b.iter(|| slice_of(black_box(&keys[next()]), black_box(SLICES)));
    });
    group.bench_function("route_under_swaps", |b| {
        b.iter(|| router.route(black_box(&keys[next()])));
    });
    let tight = swapper.finish();

    let swapper = Swapper::start(&router, Pace::Spin(Duration::from_micros(1)));
    group.bench_function("route_under_swaps_1us", |b| {
        b.iter(|| router.route(black_box(&keys[next()])));
    });
    let spaced_1us = swapper.finish();

    let swapper = Swapper::start(&router, Pace::Spin(Duration::from_micros(10)));
    group.bench_function("route_under_swaps_10us", |b| {
        b.iter(|| router.route(black_box(&keys[next()])));
    });
    let spaced = swapper.finish();

    let swapper = Swapper::start(&router, Pace::Sleep(Duration::from_millis(1)));
    group.bench_function("route_under_swaps_1ms", |b| {
        b.iter(|| router.route(black_box(&keys[next()])));
    });
    let paced = swapper.finish();

    let baseline = Arc::new(ArcSwapRouter::new());
    baseline.offer(doc(1));
    group.bench_function("route_arcswap_idle", |b| {
        b.iter(|| baseline.route(black_box(&keys[next()])));
    });
    let swapper = Swapper::start(&baseline, Pace::BackToBack);
    group.bench_function("route_arcswap_under_swaps", |b| {
        b.iter(|| baseline.route(black_box(&keys[next()])));
    });
    let baseline_tight = swapper.finish();
    group.finish();
    println!(
        "{clock}: the writer swapped {tight:.0} documents per second back to back, {spaced_1us:.0} per second spinning 1 µs between, {spaced:.0} spinning 10 µs, {paced:.0} per second with 1 ms pauses; \
         {baseline_tight:.0} per second back to back into the ArcSwap baseline"
    );
}

/// `QM_SLICE_LOOP=what:calls`: the loop alone, for callgrind.
fn callgrind_loop(spec: &str) {
    let (what, calls) = spec.split_once(':').expect("QM_SLICE_LOOP=what:calls");
    let calls: usize = calls.parse().expect("a number of calls");
    let keys = keys();
    let router = Router::builder("orders").build();
    router.offer(doc(1)).expect("a coherent document");
    let mut acc = 0u64;
    match what {
        "slice_of" => {
            for i in 0..calls {
                acc += u64::from(slice_of(black_box(&keys[i % KEYS]), black_box(SLICES)));
            }
        }
        "route" => {
            for i in 0..calls {
                acc += u64::from(router.route(black_box(&keys[i % KEYS])).slice);
            }
        }
        "route_arcswap" => {
            let baseline = ArcSwapRouter::new();
            baseline.offer(doc(1));
            for i in 0..calls {
                acc += u64::from(baseline.route(black_box(&keys[i % KEYS])).slice);
            }
        }
        "empty" => {
            for i in 0..calls {
                acc += black_box(&keys[i % KEYS]).len() as u64;
            }
        }
        other => panic!("QM_SLICE_LOOP: unknown {other:?}"),
    }
    println!("{what} x {calls}: {acc}");
}

fn main() {
    if let Ok(spec) = std::env::var("QM_SLICE_LOOP") {
        callgrind_loop(&spec);
        return;
    }
    let keys = keys();
    println!(
        "keys: {KEYS} ({} .. {}), slices of {SLICES}, checksum {:08x}",
        keys[0],
        keys[1],
        checksum(&keys)
    );
    check_no_allocation(&keys);
    let mut wall = Criterion::default().configure_from_args();
    benches(&mut wall, "wall");
    let mut cpu = Criterion::default()
        .with_measurement(ThreadCpu)
        .configure_from_args();
    benches(&mut cpu, "thread_cpu");
    cpu.final_summary();
}
