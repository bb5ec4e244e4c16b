//! An `sqf` feed's own key (spec sqf-v1 §7), `kind`, and the service the
//! feed receives on: its lines.
//!
//! ```toml
//! [[feed]]
//! name = "lp1"
//! kind = "full"                      # or "delta"; required
//! lines = ["239.1.1.1:30001", "239.1.1.2:30002"]
//! stale_threshold_ms = 500
//! source_threshold_ms = 2000
//! ```

use crate::config::keys::{FeedKeys, FeedProtocol, Problem, Range};
use crate::config::services::Service;
use crate::state::FeedKind;
use std::net::SocketAddrV4;

/// `kind` as written: [`FeedKind`]'s names.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Full,
    Delta,
}

impl From<Kind> for FeedKind {
    fn from(k: Kind) -> FeedKind {
        match k {
            Kind::Full => FeedKind::Full,
            Kind::Delta => FeedKind::Delta,
        }
    }
}

/// An `sqf` feed's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqfConfig {
    /// Whether a quote carries the whole state or a change (`kind`).
    pub kind: FeedKind,
}

impl FeedProtocol for SqfConfig {
    /// Binary prices: 5 decimals show a pip of a currency pair.
    const PRICE_DECIMALS: u8 = 5;

    const KEYS: &'static [&'static str] = &["kind"];

    const RANGES: &'static [Range] = &[];

    fn resolve(keys: &mut FeedKeys) -> Result<SqfConfig, Problem> {
        match keys.named::<Kind>("kind")? {
            Some(kind) => Ok(SqfConfig {
                kind: kind.into_inner().into(),
            }),
            None => Err(keys.missing("missing key kind (\"full\" or \"delta\")".into())),
        }
    }

    fn kind(&self) -> FeedKind {
        self.kind
    }

    fn services(&self, lines: &[SocketAddrV4]) -> Vec<Service> {
        vec![Service::lines("lines", lines)]
    }
}
