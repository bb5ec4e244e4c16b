//! Writes MDP3 packets and messages: for tests, fixture generators and
//! simulators, never for the hot path (it allocates).
//!
//! Each message builder returns the whole message, `MsgSize` first, laid
//! out by [`template`]'s table. A [`Shape`] chooses the header's version
//! and the length of the root and of the entries it writes: the schema's
//! (that version's, for the definitions), longer (a newer version's
//! appended fields, filled with [`EXTRA_FILL`]), or exactly some length
//! (shorter ones cut the fields off: to build a `short_block`). Schema bytes
//! not written (fields not read, padding) are zero. Builders panic on a
//! template id of the wrong family or a value its field cannot hold: a
//! mistake of the caller, not of any data.

use super::packet::{HEADER_LEN, MESSAGE_HEADER_LEN, SCHEMA_ID};
use super::template::{
    self, definition, incremental, snapshot, status, text_len, Dimension, EntryType, Fields,
    LevelField, SizeField, Template, UpdateAction, I32_NULL, I8_NULL, PRICE_NULL, U32_NULL,
    U64_NULL, U8_NULL,
};

/// The fill of bytes past a schema's block, so that a reader reading them
/// by mistake shows.
pub const EXTRA_FILL: u8 = 0xa5;

/// The length of a block a builder writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Len {
    /// The schema's blockLength.
    #[default]
    Schema,
    /// The schema's and this many more bytes.
    Longer(u16),
    /// Exactly this many bytes.
    Exactly(u16),
}

impl Len {
    fn of(self, schema: u16) -> usize {
        usize::from(match self {
            Len::Schema => schema,
            Len::Longer(n) => schema + n,
            Len::Exactly(n) => n,
        })
    }
}

/// The version in a message's header and the lengths of its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The header's version.
    pub version: u16,
    /// The root block.
    pub root: Len,
    /// The entries of the group read (NoMDEntries, NoMDFeedTypes).
    pub entries: Len,
}

impl Shape {
    /// `version` with the schema's blocks.
    pub const fn new(version: u16) -> Shape {
        Shape {
            version,
            root: Len::Schema,
            entries: Len::Schema,
        }
    }

    /// With a root of `len`.
    pub const fn root(self, len: Len) -> Shape {
        Shape { root: len, ..self }
    }

    /// With entries of `len`.
    pub const fn entries(self, len: Len) -> Shape {
        Shape {
            entries: len,
            ..self
        }
    }

    /// With a root and entries `root` and `entry` bytes longer than the
    /// schema's (a newer version's layout).
    pub const fn longer(self, root: u16, entry: u16) -> Shape {
        self.root(Len::Longer(root)).entries(Len::Longer(entry))
    }
}

/// Builds a packet.
#[derive(Debug, Clone)]
pub struct PacketBuilder {
    buf: Vec<u8>,
    count: usize,
}

impl PacketBuilder {
    /// A packet `seq_num` sent at `sending_time` (ns since the Unix epoch).
    pub fn new(seq_num: u32, sending_time: u64) -> PacketBuilder {
        let mut buf = Vec::with_capacity(1500);
        buf.extend_from_slice(&seq_num.to_le_bytes());
        buf.extend_from_slice(&sending_time.to_le_bytes());
        PacketBuilder { buf, count: 0 }
    }

    /// Appends one message (as a builder of this module returns it).
    pub fn message(&mut self, m: &[u8]) -> &mut PacketBuilder {
        self.buf.extend_from_slice(m);
        self.count += 1;
        self
    }

    /// Messages so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True before the first message.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER_LEN
    }

    /// The datagram.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// A packet of `messages`.
pub fn packet(seq_num: u32, sending_time: u64, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut b = PacketBuilder::new(seq_num, sending_time);
    for m in messages {
        b.message(m);
    }
    b.finish()
}

/// Any message: its header, then `root` and `groups` as given (templates not
/// read, and hand-made layouts).
pub fn raw(template_id: u16, version: u16, root: &[u8], groups: &[u8]) -> Vec<u8> {
    let size = MESSAGE_HEADER_LEN + root.len() + groups.len();
    let size = u16::try_from(size).expect("a message over 65,535 bytes");
    let block = u16::try_from(root.len()).expect("a root block over 65,535 bytes");
    let mut m = Vec::with_capacity(usize::from(size));
    for v in [size, block, template_id, SCHEMA_ID, version] {
        m.extend_from_slice(&v.to_le_bytes());
    }
    m.extend_from_slice(root);
    m.extend_from_slice(groups);
    m
}

/// A level update of 46 or 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookEntry {
    /// `MDEntryPx` mantissa (exponent −9); `None` writes null.
    pub price: Option<i64>,
    /// `MDEntrySize`; `None` writes null.
    pub size: Option<u64>,
    /// `SecurityID`.
    pub security_id: i32,
    /// `RptSeq`.
    pub rpt_seq: u32,
    /// `NumberOfOrders`; `None` writes null.
    pub orders: Option<i32>,
    /// `MDPriceLevel`.
    pub level: u8,
    /// `MDUpdateAction`.
    pub action: UpdateAction,
    /// `MDEntryType`.
    pub entry_type: EntryType,
}

/// A 30 SecurityStatus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status<'a> {
    /// `TransactTime`, ns since the Unix epoch.
    pub transact_time: u64,
    /// `SecurityGroup` (up to 6 bytes, NUL-padded).
    pub security_group: &'a str,
    /// `Asset` (up to 6 bytes).
    pub asset: &'a str,
    /// `SecurityID`; `None` writes null.
    pub security_id: Option<i32>,
    /// `MatchEventIndicator`.
    pub match_event_indicator: u8,
    /// `SecurityTradingStatus`; `None` writes null.
    pub trading_status: Option<u8>,
}

/// The root of a 52 or 69.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRoot {
    /// `LastMsgSeqNumProcessed`.
    pub last_msg_seq_num_processed: u32,
    /// `TotNumReports`.
    pub tot_num_reports: u32,
    /// `SecurityID`.
    pub security_id: i32,
    /// `RptSeq`.
    pub rpt_seq: u32,
    /// `TransactTime`, ns since the Unix epoch.
    pub transact_time: u64,
    /// `MDSecurityTradingStatus`; `None` writes null.
    pub trading_status: Option<u8>,
}

/// An entry of a 52 or 69.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// `MDEntryPx` mantissa; `None` writes null.
    pub price: Option<i64>,
    /// `MDEntrySize`; `None` writes null.
    pub size: Option<u64>,
    /// `NumberOfOrders`; `None` writes null.
    pub orders: Option<i32>,
    /// `MDPriceLevel`; `None` writes null.
    pub level: Option<u8>,
    /// `MDEntryType`.
    pub entry_type: EntryType,
}

/// The root of a definition (54–58, 63).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instrument<'a> {
    /// `MatchEventIndicator`.
    pub match_event_indicator: u8,
    /// `TotNumReports`; `None` writes null.
    pub tot_num_reports: Option<u32>,
    /// `SecurityUpdateAction` (`A`, `M`, `D`).
    pub security_update_action: u8,
    /// `MDSecurityTradingStatus`; `None` writes null.
    pub trading_status: Option<u8>,
    /// `ApplID`.
    pub appl_id: i16,
    /// `SecurityGroup` (up to 6 bytes).
    pub security_group: &'a str,
    /// `Asset` (up to 6 bytes).
    pub asset: &'a str,
    /// `Symbol` (up to 20 bytes).
    pub symbol: &'a str,
    /// `SecurityID`.
    pub security_id: i32,
    /// `MinPriceIncrement` mantissa; `None` writes 2^63−1.
    pub min_price_increment: Option<i64>,
    /// `DisplayFactor` mantissa (exponent −9).
    pub display_factor: i64,
}

/// A NoMDFeedTypes entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedType<'a> {
    /// `MDFeedType` (up to 3 bytes: `GBX`, `GBI`).
    pub md_feed_type: &'a str,
    /// `MarketDepth`.
    pub market_depth: i8,
}

/// 12 AdminHeartbeat.
pub fn heartbeat(shape: Shape) -> Vec<u8> {
    let t = &template::ADMIN_HEARTBEAT;
    raw(t.id, shape.version, &root(t, shape, Vec::new()), &[])
}

/// 4 ChannelReset, with one entry of its group (ApplID).
pub fn channel_reset(shape: Shape, transact_time: u64, mei: u8, appl_id: i16) -> Vec<u8> {
    let t = &template::CHANNEL_RESET;
    let mut groups = Vec::new();
    group_header(&mut groups, Dimension::GroupSize, 2, 1);
    groups.extend_from_slice(&appl_id.to_le_bytes());
    let r = incremental_root(t, shape, transact_time, mei);
    raw(t.id, shape.version, &r, &groups)
}

/// 30 SecurityStatus.
pub fn security_status(shape: Shape, s: &Status<'_>) -> Vec<u8> {
    let t = &template::SECURITY_STATUS;
    let mut r = vec![0u8; usize::from(t.root_bl(shape.version))];
    put(
        &mut r,
        status::TRANSACT_TIME,
        &s.transact_time.to_le_bytes(),
    );
    put_text(
        &mut r,
        status::SECURITY_GROUP,
        text_len::SECURITY_GROUP,
        s.security_group,
    );
    put_text(&mut r, status::ASSET, text_len::ASSET, s.asset);
    let id = s.security_id.unwrap_or(I32_NULL);
    put(&mut r, status::SECURITY_ID, &id.to_le_bytes());
    put(
        &mut r,
        status::MATCH_EVENT_INDICATOR,
        &[s.match_event_indicator],
    );
    let status = s.trading_status.unwrap_or(U8_NULL);
    put(&mut r, status::SECURITY_TRADING_STATUS, &[status]);
    raw(t.id, shape.version, &root(t, shape, r), &[])
}

/// 46 or 64 (`template_id`), with `mbo_order_entries` zeroed entries of
/// NoOrderIDEntries.
pub fn book(
    template_id: u16,
    shape: Shape,
    transact_time: u64,
    mei: u8,
    entries: &[BookEntry],
    mbo_order_entries: u8,
) -> Vec<u8> {
    let t = family(template_id, |t| t.kind == template::Kind::Book);
    let Fields::Entries(f) = t.fields else {
        unreachable!("a book template has entries")
    };
    let b = f.book.expect("a book template has level updates");
    let blocks = entries.iter().map(|e| {
        let mut x = vec![0u8; usize::from(t.groups[0].entry.bl)];
        put(
            &mut x,
            b.price,
            &e.price.unwrap_or(PRICE_NULL).to_le_bytes(),
        );
        put_size(&mut x, b.size, e.size);
        put(&mut x, f.security_id, &e.security_id.to_le_bytes());
        put(&mut x, f.rpt_seq, &e.rpt_seq.to_le_bytes());
        put(
            &mut x,
            b.orders,
            &e.orders.unwrap_or(I32_NULL).to_le_bytes(),
        );
        put(&mut x, b.level, &[e.level]);
        put(&mut x, b.action, &[e.action.code()]);
        put(&mut x, b.entry_type, &[e.entry_type.code()]);
        x
    });
    incremental(t, shape, transact_time, mei, blocks, mbo_order_entries)
}

/// 48, 65, 37, 66, 49, 50, 51 or 67 (`template_id`): entries of
/// (SecurityID, RptSeq), the fields not read zero; `mbo_order_entries`
/// zeroed entries of NoOrderIDEntries (48 and 65 only).
pub fn statistics(
    template_id: u16,
    shape: Shape,
    transact_time: u64,
    mei: u8,
    entries: &[(i32, u32)],
    mbo_order_entries: u8,
) -> Vec<u8> {
    let t = family(template_id, |t| t.kind == template::Kind::Statistics);
    let Fields::Entries(f) = t.fields else {
        unreachable!("a statistics template has entries")
    };
    let blocks = entries.iter().map(|&(security_id, rpt_seq)| {
        let mut x = vec![0u8; usize::from(t.groups[0].entry.bl)];
        put(&mut x, f.security_id, &security_id.to_le_bytes());
        put(&mut x, f.rpt_seq, &rpt_seq.to_le_bytes());
        x
    });
    incremental(t, shape, transact_time, mei, blocks, mbo_order_entries)
}

/// 52 or 69 (`template_id`).
pub fn snapshot(
    template_id: u16,
    shape: Shape,
    head: &SnapshotRoot,
    entries: &[SnapshotEntry],
) -> Vec<u8> {
    let t = family(template_id, |t| t.kind == template::Kind::Snapshot);
    let Fields::Snapshot(f) = t.fields else {
        unreachable!("a snapshot template has snapshot entries")
    };
    let mut r = vec![0u8; usize::from(t.root_bl(shape.version))];
    let seq = head.last_msg_seq_num_processed.to_le_bytes();
    put(&mut r, snapshot::LAST_MSG_SEQ_NUM_PROCESSED, &seq);
    put(
        &mut r,
        snapshot::TOT_NUM_REPORTS,
        &head.tot_num_reports.to_le_bytes(),
    );
    put(
        &mut r,
        snapshot::SECURITY_ID,
        &head.security_id.to_le_bytes(),
    );
    put(&mut r, snapshot::RPT_SEQ, &head.rpt_seq.to_le_bytes());
    put(
        &mut r,
        snapshot::TRANSACT_TIME,
        &head.transact_time.to_le_bytes(),
    );
    let status = head.trading_status.unwrap_or(U8_NULL);
    put(&mut r, snapshot::MD_SECURITY_TRADING_STATUS, &[status]);
    let blocks = entries.iter().map(|e| {
        let mut x = vec![0u8; usize::from(t.groups[0].entry.bl)];
        put(
            &mut x,
            f.price,
            &e.price.unwrap_or(PRICE_NULL).to_le_bytes(),
        );
        put_size(&mut x, f.size, e.size);
        put(
            &mut x,
            f.orders,
            &e.orders.unwrap_or(I32_NULL).to_le_bytes(),
        );
        match f.level {
            LevelField::I8(at) => {
                let level = e.level.map_or(I8_NULL, |l| {
                    i8::try_from(l).expect("a level over 127 in an Int8")
                });
                put(&mut x, at, &level.to_le_bytes());
            }
            LevelField::U8(at) => put(&mut x, at, &[e.level.unwrap_or(U8_NULL)]),
        }
        put(&mut x, f.entry_type, &[e.entry_type.code()]);
        x
    });
    let mut groups = Vec::new();
    write_group(&mut groups, t, 0, shape.entries, blocks);
    raw(t.id, shape.version, &root(t, shape, r), &groups)
}

/// A definition, 54, 55, 56, 57, 58 or 63 (`template_id`), with `events`
/// zeroed NoEvents entries and the NoMDFeedTypes entries given (later
/// groups absent).
pub fn definition(
    template_id: u16,
    shape: Shape,
    d: &Instrument<'_>,
    events: u8,
    feed_types: &[FeedType<'_>],
) -> Vec<u8> {
    let t = family(template_id, |t| t.kind == template::Kind::Definition);
    let Fields::Definition(f) = t.fields else {
        unreachable!("a definition template has definition fields")
    };
    let mut r = vec![0u8; usize::from(t.root_bl(shape.version))];
    put(
        &mut r,
        definition::MATCH_EVENT_INDICATOR,
        &[d.match_event_indicator],
    );
    let reports = d.tot_num_reports.unwrap_or(U32_NULL);
    put(&mut r, definition::TOT_NUM_REPORTS, &reports.to_le_bytes());
    put(
        &mut r,
        definition::SECURITY_UPDATE_ACTION,
        &[d.security_update_action],
    );
    let status = d.trading_status.unwrap_or(U8_NULL);
    put(&mut r, definition::MD_SECURITY_TRADING_STATUS, &[status]);
    put(&mut r, definition::APPL_ID, &d.appl_id.to_le_bytes());
    put_text(
        &mut r,
        definition::SECURITY_GROUP,
        text_len::SECURITY_GROUP,
        d.security_group,
    );
    put_text(&mut r, definition::ASSET, text_len::ASSET, d.asset);
    put_text(&mut r, definition::SYMBOL, text_len::SYMBOL, d.symbol);
    put(
        &mut r,
        definition::SECURITY_ID,
        &d.security_id.to_le_bytes(),
    );
    let tick = d.min_price_increment.unwrap_or(PRICE_NULL);
    put(&mut r, f.min_price_increment, &tick.to_le_bytes());
    put(&mut r, f.display_factor, &d.display_factor.to_le_bytes());
    let mut groups = Vec::new();
    let event = usize::from(t.groups[0].entry.bl);
    write_group(
        &mut groups,
        t,
        0,
        Len::Schema,
        (0..events).map(|_| vec![0u8; event]),
    );
    let feeds = feed_types.iter().map(|ft| {
        let mut x = vec![0u8; usize::from(t.groups[1].entry.bl)];
        put_text(
            &mut x,
            definition::MD_FEED_TYPE,
            text_len::MD_FEED_TYPE,
            ft.md_feed_type,
        );
        put(
            &mut x,
            definition::MARKET_DEPTH,
            &ft.market_depth.to_le_bytes(),
        );
        x
    });
    write_group(&mut groups, t, 1, shape.entries, feeds);
    raw(t.id, shape.version, &root(t, shape, r), &groups)
}

/// The template `id`, which must satisfy `is` (the builder's family).
fn family(id: u16, is: impl Fn(&Template) -> bool) -> &'static Template {
    match template::template(id) {
        Some(t) if is(t) => t,
        _ => panic!("template {id} is not of this builder's family"),
    }
}

/// An incremental message: root, NoMDEntries of `blocks` (each the
/// schema's entry length), and NoOrderIDEntries where the template has it.
fn incremental(
    t: &Template,
    shape: Shape,
    transact_time: u64,
    mei: u8,
    blocks: impl Iterator<Item = Vec<u8>>,
    mbo_order_entries: u8,
) -> Vec<u8> {
    let mut groups = Vec::new();
    write_group(&mut groups, t, 0, shape.entries, blocks);
    match t.groups.get(1) {
        Some(g) => {
            let order = usize::from(g.entry.bl);
            let orders = (0..mbo_order_entries).map(|_| vec![0u8; order]);
            write_group(&mut groups, t, 1, Len::Schema, orders);
        }
        None => assert_eq!(mbo_order_entries, 0, "template {} has no MBO group", t.id),
    }
    let r = incremental_root(t, shape, transact_time, mei);
    raw(t.id, shape.version, &r, &groups)
}

/// The incremental root of `t`, at `shape`'s length.
fn incremental_root(t: &Template, shape: Shape, transact_time: u64, mei: u8) -> Vec<u8> {
    let mut r = vec![0u8; usize::from(t.root_bl(shape.version))];
    put(
        &mut r,
        incremental::TRANSACT_TIME,
        &transact_time.to_le_bytes(),
    );
    put(&mut r, incremental::MATCH_EVENT_INDICATOR, &[mei]);
    root(t, shape, r)
}

/// `r` (the schema's root of `t`, fields written) at `shape`'s length.
fn root(t: &Template, shape: Shape, r: Vec<u8>) -> Vec<u8> {
    let len = shape.root.of(t.root_bl(shape.version));
    fit(r, len)
}

/// Group `i` of `t`: its header and `blocks` (each the schema's entry
/// length) cut or extended to `len`.
fn write_group(
    out: &mut Vec<u8>,
    t: &Template,
    i: usize,
    len: Len,
    blocks: impl Iterator<Item = Vec<u8>>,
) {
    let g = &t.groups[i];
    let block = len.of(g.entry.bl);
    let blocks: Vec<Vec<u8>> = blocks.map(|b| fit(b, block)).collect();
    let count = u8::try_from(blocks.len()).expect("more than 255 entries in a group");
    let block = u16::try_from(block).expect("an entry over 65,535 bytes");
    group_header(out, g.dimension, block, count);
    blocks.iter().for_each(|b| out.extend_from_slice(b));
}

/// A dimension header.
fn group_header(out: &mut Vec<u8>, dimension: Dimension, block: u16, count: u8) {
    out.extend_from_slice(&block.to_le_bytes());
    out.resize(out.len() + dimension.count_at() - 2, 0);
    out.push(count);
}

/// `b` cut or extended (with [`EXTRA_FILL`]) to `len`.
fn fit(mut b: Vec<u8>, len: usize) -> Vec<u8> {
    b.resize(len, EXTRA_FILL);
    b
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// `s` into the `char[n]` at `at`, NUL-padded (cut at `n` bytes).
fn put_text(b: &mut [u8], at: usize, n: usize, s: &str) {
    let s = &s.as_bytes()[..s.len().min(n)];
    put(b, at, s);
}

fn put_size(b: &mut [u8], field: SizeField, size: Option<u64>) {
    match field {
        SizeField::I32(at) => {
            let v = size.map_or(I32_NULL, |s| {
                i32::try_from(s).expect("a size over 2^31 in an Int32")
            });
            put(b, at, &v.to_le_bytes());
        }
        SizeField::U64(at) => put(b, at, &size.unwrap_or(U64_NULL).to_le_bytes()),
    }
}
