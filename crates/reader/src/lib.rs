//! The read side of a tickguard publication, for the process that asks
//! before an order leaves: map the file the feed handler writes (under
//! `/dev/shm`), look an instrument up once, then ask for its verdict —
//! `ok`, or the reasons it must not be traded on — in tens of nanoseconds,
//! without a system call.
//!
//! ```no_run
//! use tickguard_reader::{Reader, WallClock};
//!
//! // Once, at start-up.
//! let reader = Reader::open("/dev/shm/tickguard");
//! let clock = WallClock::new();
//! let Some(eurusd) = reader.lookup("lp1", "EURUSD") else {
//!     panic!("lp1/EURUSD is not published (yet)");
//! };
//! // Before every order.
//! let verdict = reader.check(&eurusd, clock.now_ns());
//! if !verdict.is_ok() {
//!     eprintln!("refusing: {} ({})", verdict.reasons, verdict.health);
//! }
//! ```
//!
//! The crate holds what a reader needs and nothing else: the layout the
//! writer and readers share ([`layout`]), the seqlock that keeps a copy
//! consistent ([`seqlock`]), a slot's record ([`slot`]), the feed status
//! and the verdict function every reader uses ([`status::verdict`]), and
//! [`Reader`]. It depends on `libc` and `memmap2` only.
//!
//! A publication truncated under a reader's mapping (only its owner or
//! root can) raises SIGBUS on the next read: call [`guard::install`] once
//! at start-up to answer `stale` instead (the library installs no signal
//! handler by itself).
#![deny(unsafe_code)]

// The publication's words are read with 64-bit atomic loads from a
// read-only mapping: a 32-bit target may make such a load with a write
// (`cmpxchg8b`), which faults there. The C header refuses those targets
// too.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("tickguard-reader needs a 64-bit target: it reads 64-bit words atomically from a read-only mapping");
// The publication's words are little-endian, and the writer and reader
// store and load them natively: on a big-endian host the file would not
// be the documented format (and every reader would refuse it). The C
// header refuses those hosts too.
#[cfg(target_endian = "big")]
compile_error!("tickguard-reader needs a little-endian target: the publication's words are little-endian and are read natively");

pub mod clock;
pub mod file;
pub mod guard;
pub mod layout;
pub mod memory;
pub mod price;
pub mod quote;
pub mod reader;
pub mod seqlock;
pub mod slot;
pub mod status;
pub mod symbol;
pub mod verdict;

pub use clock::WallClock;
pub use layout::{CounterKind, Descriptor};
pub use reader::{FeedInfo, Handle, Health, Reader, Reading, Verdict};
