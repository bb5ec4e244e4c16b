//! What code under test logs, captured as text (tests only).
//!
//! `tracing` caches, per call site and for the whole process, whether any
//! subscriber is interested in it, computed by the thread that first
//! reaches it. A test thread without a subscriber of its own reaching a
//! call site first would cache "never" (against the default no-op
//! subscriber), and another test capturing on its own thread would then
//! miss that call site's events: a capture that passes alone and fails in
//! a parallel run. So the process's global default is an [`Anchor`],
//! interested in every call site "sometimes" and enabling nothing: the
//! cache then never says "never", and each event asks its own thread's
//! subscriber.

use std::sync::{Arc, Mutex};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{span, Event, Metadata, Subscriber};

/// A writer keeping what it is given.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The global default while tests capture logs: see the module's notes.
struct Anchor;

impl Subscriber for Anchor {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// What `f` logs on this thread, as plain text lines (no colours).
pub fn logs_of(f: impl FnOnce()) -> String {
    static ANCHORED: std::sync::Once = std::sync::Once::new();
    ANCHORED.call_once(|| {
        // (Another global default set first would anchor nothing: then
        // captures are as before.)
        let _ = tracing::subscriber::set_global_default(Anchor);
        tracing::callsite::rebuild_interest_cache();
    });
    let buf = Buf::default();
    let w = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let out = buf.0.lock().unwrap().clone();
    String::from_utf8(out).unwrap()
}
