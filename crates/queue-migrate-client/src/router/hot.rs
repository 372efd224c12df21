//! The router's hot path: the current document's numbers, readable lock-free without touching
//! the document ([`Hot`]).

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::routing::RoutingDocument;

/// What `route` needs of the current document, readable without touching the document: two
/// slots that the (one, serialised) writer fills in turn, and the number of the last filled.
///
/// Document number `n` goes into `slots[n % 2]`, whose `seq` is `2n + 1` while it is written and
/// `2n + 2` once it holds number `n`; then `current` becomes `n`. A writer therefore only ever
/// writes the slot readers are not sent to, and a reader that still read the older slot while the
/// writer came back to it sees `seq` moved on and starts again from `current`. Everything sits in
/// one cache line, so a read touches one line and a swap dirties it once.
#[repr(align(64))]
pub(super) struct Hot {
    pub(super) current: AtomicU64,
    pub(super) slots: [Slot; 2],
}

/// One document's numbers and the sequence word that says which document they are.
pub(super) struct Slot {
    pub(super) seq: AtomicU64,
    pub(super) generation: AtomicU64,
    /// `slices_total << 32 | slices_migrated`.
    pub(super) slices: AtomicU64,
}

impl Slot {
    fn new(seq: u64, generation: u64, slices: u64) -> Slot {
        Slot {
            seq: AtomicU64::new(seq),
            generation: AtomicU64::new(generation),
            slices: AtomicU64::new(slices),
        }
    }
}

/// A slot's `seq` while document `number` is written into it.
pub(super) fn filling(number: u64) -> u64 {
    number.wrapping_mul(2).wrapping_add(1)
}

/// A slot's `seq` once it holds document `number`.
fn filled(number: u64) -> u64 {
    number.wrapping_mul(2).wrapping_add(2)
}

impl Hot {
    /// The safe default, as document number 0: generation 0, no slice migrated.
    pub(super) fn new(default_slices: u32) -> Hot {
        Hot {
            current: AtomicU64::new(0),
            slots: [
                Slot::new(filled(0), 0, u64::from(default_slices) << 32),
                Slot::new(0, 0, 0),
            ],
        }
    }

    /// `(generation, slices_total, slices_migrated)` of the current document.
    ///
    /// Lock-free: it reads again only if the writer filled the slot it was reading meanwhile,
    /// that is if at least one newer document was stored. Successive reads by one thread never
    /// go back to an older document: each answers the number it read from `current`.
    #[inline]
    pub(super) fn read(&self) -> (u64, u32, u32) {
        loop {
            if let Some(words) = self.try_read() {
                return words;
            }
            std::hint::spin_loop();
        }
    }

    /// One attempt: `None` if the slot `current` named was being rewritten meanwhile.
    #[inline]
    pub(super) fn try_read(&self) -> Option<(u64, u32, u32)> {
        let number = self.current.load(Ordering::Acquire);
        let slot = &self.slots[(number & 1) as usize];
        let holding = filled(number);
        // Acquire pairs with the writer's release of `current`: the loads below see document
        // `number`'s words or a later fill's, and the check of `seq` after them tells which.
        let generation = slot.generation.load(Ordering::Relaxed);
        let slices = slot.slices.load(Ordering::Relaxed);
        // Orders the loads of the words before the load of `seq`: if that one still sees
        // `holding`, no store of the words by a later fill of this slot was read.
        fence(Ordering::Acquire);
        if slot.seq.load(Ordering::Relaxed) != holding {
            return None;
        }
        Some((generation, (slices >> 32) as u32, slices as u32))
    }

    /// Store a document's numbers as the next number. Callers hold `Inner::write`: there is one
    /// writer at a time.
    pub(super) fn write(&self, doc: &RoutingDocument) {
        let number = self.fill(doc);
        self.publish(number);
    }

    /// Write `doc`'s numbers into the slot readers are not sent to, as the next number, and
    /// return that number. Readers go on answering the current document until [`Hot::publish`].
    pub(super) fn fill(&self, doc: &RoutingDocument) -> u64 {
        let number = self.current.load(Ordering::Relaxed).wrapping_add(1);
        let slot = &self.slots[(number & 1) as usize];
        slot.seq.store(filling(number), Ordering::Relaxed);
        // A reader that sees any of the stores below sees the odd `seq` too.
        fence(Ordering::Release);
        slot.generation.store(doc.generation, Ordering::Relaxed);
        slot.slices.store(
            (u64::from(doc.slices_total) << 32) | u64::from(doc.slices_migrated),
            Ordering::Relaxed,
        );
        slot.seq.store(filled(number), Ordering::Release);
        number
    }

    /// Send readers to the slot filled with `number`.
    pub(super) fn publish(&self, number: u64) {
        self.current.store(number, Ordering::Release);
    }
}
