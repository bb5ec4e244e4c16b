//! What code under test logs, captured as text (tests only).

use std::sync::{Arc, Mutex};

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

/// What `f` logs on this thread, as plain text lines (no colours).
pub fn logs_of(f: impl FnOnce()) -> String {
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
