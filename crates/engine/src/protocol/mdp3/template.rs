//! The templates this version reads: one table of offsets per template,
//! and the typed views over a checked message's root block and groups.
//!
//! Offsets are in bytes from the start of the root block or of one group
//! entry. Every field read has the same offset in each schema version 9 to
//! 13 that has its template (a version above 13 is read with them too); the
//! comment on each offset names the schema field, its wire type and the
//! versions carrying it. `bl` is the schema's blockLength, `min` the least
//! the validity walk accepts: every field read lies inside `min`, so once a
//! packet is checked every getter finds its bytes. The readers still look a
//! field up inside the *wire* block (a field past it reads as null, or as 0
//! where the type has no null), which keeps every getter panic-free and makes
//! a block longer than the schema's (a newer version appending fields) read
//! the same.
//!
//! ```text
//! incremental root | 0 TransactTime u64 | 8 MatchEventIndicator u8 | (2 bytes padding)  bl 11
//! 46 entry         | 0 MDEntryPx i64 | 8 MDEntrySize i32 | 12 SecurityID i32 | 16 RptSeq u32 |
//!                  | 20 NumberOfOrders i32 | 24 MDPriceLevel u8 | 25 MDUpdateAction u8 | 26 MDEntryType char |  bl 32
//! groupSize        | 0 blockLength u16 | 2 numInGroup u8 |
//! groupSize8Byte   | 0 blockLength u16 | 2..7 padding | 7 numInGroup u8 |
//! ```

use super::Reject;

/// Null of a `PRICENULL9` mantissa (and of the nullable `Decimal9`s).
pub const PRICE_NULL: i64 = i64::MAX;
/// Null of an `Int32NULL`.
pub const I32_NULL: i32 = i32::MAX;
/// Null of a `uInt32NULL`.
pub const U32_NULL: u32 = u32::MAX;
/// Null of a `uInt64NULL`.
pub const U64_NULL: u64 = u64::MAX;
/// Null of a `uInt8NULL` (and of the `SecurityTradingStatus` enum).
pub const U8_NULL: u8 = u8::MAX;
/// Null of an `Int8NULL`.
pub const I8_NULL: i8 = i8::MAX;

/// What a template is to a feed handler: the caller classifies a message
/// by it (count it, skip it, apply it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// 4 ChannelReset: the channel's books and sequences start over.
    ChannelReset,
    /// 12 AdminHeartbeat: liveness only.
    Heartbeat,
    /// 30 SecurityStatus.
    SecurityStatus,
    /// 46, 64: book entries (SecurityID, RptSeq and a level update).
    Book,
    /// 48, 65, 37, 66, 49, 50, 51, 67: trade summaries, volume, statistics
    /// and limits; entries carry (SecurityID, RptSeq) and change no book.
    Statistics,
    /// 52, 69: one instrument's book from the market recovery loop.
    Snapshot,
    /// 54, 55, 56, 57, 58, 63: instrument definitions.
    Definition,
    /// 47, 53: market by order, not read.
    Mbo,
    /// 39, 59, 60, 61, 62, 68, 15, 16: known, not read.
    Skipped,
    /// Any other template id: skipped by its MsgSize.
    Unknown,
}

impl Kind {
    /// The kind of `template_id`.
    #[inline]
    pub fn of(template_id: u16) -> Kind {
        match template(template_id) {
            Some(t) => t.kind,
            None => match template_id {
                47 | 53 => Kind::Mbo,
                15 | 16 | 39 | 59..=62 | 68 => Kind::Skipped,
                _ => Kind::Unknown,
            },
        }
    }

    /// True for the kinds this version reads (those with a [`Template`]).
    pub fn is_read(self) -> bool {
        !matches!(self, Kind::Mbo | Kind::Skipped | Kind::Unknown)
    }
}

/// A root block or a group entry: the schema's blockLength and the least
/// the validity walk accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// The schema's blockLength (its latest version's).
    pub bl: u16,
    /// Shorter is `short_block`.
    pub min: u16,
}

/// How a group's dimension header is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// `groupSize`: blockLength u16, numInGroup u8 (3 bytes).
    GroupSize,
    /// `groupSize8Byte`: blockLength u16, 5 bytes of padding, numInGroup u8
    /// (8 bytes).
    GroupSize8Byte,
}

impl Dimension {
    /// Bytes of the header.
    #[inline]
    pub const fn header_len(self) -> usize {
        match self {
            Dimension::GroupSize => 3,
            Dimension::GroupSize8Byte => 8,
        }
    }

    /// Offset of numInGroup in the header.
    #[inline]
    pub const fn count_at(self) -> usize {
        self.header_len() - 1
    }
}

/// A repeating group the validity walk steps over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// The schema's name.
    pub name: &'static str,
    /// Its dimension header.
    pub dimension: Dimension,
    /// Its entries (min 0 for a group whose entries are not read).
    pub entry: Block,
}

/// `MDEntrySize`: its offset in the entry and its wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeField {
    /// `Int32NULL`.
    I32(usize),
    /// `uInt64NULL`.
    U64(usize),
}

/// `MDPriceLevel` of a snapshot entry: its offset and its wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelField {
    /// `Int8NULL` (52).
    I8(usize),
    /// `uInt8NULL` (69).
    U8(usize),
}

/// The fields of an incremental entry (first group, NoMDEntries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryFields {
    /// `SecurityID` Int32.
    pub security_id: usize,
    /// `RptSeq` uInt32.
    pub rpt_seq: usize,
    /// The level update, for 46 and 64.
    pub book: Option<BookFields>,
}

/// The level update of a 46 or 64 entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookFields {
    /// `MDEntryPx` PRICENULL9.
    pub price: usize,
    /// `MDEntrySize`.
    pub size: SizeField,
    /// `NumberOfOrders` Int32NULL.
    pub orders: usize,
    /// `MDPriceLevel` uInt8.
    pub level: usize,
    /// `MDUpdateAction` uInt8 enum.
    pub action: usize,
    /// `MDEntryType` char (MDEntryTypeBook).
    pub entry_type: usize,
}

/// The fields of a snapshot entry (NoMDEntries of 52 and 69).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotFields {
    /// `MDEntryPx` PRICENULL9.
    pub price: usize,
    /// `MDEntrySize`.
    pub size: SizeField,
    /// `NumberOfOrders` Int32NULL.
    pub orders: usize,
    /// `MDPriceLevel`.
    pub level: LevelField,
    /// `MDEntryType` char.
    pub entry_type: usize,
}

/// The template-specific fields of a definition's root (the others are in
/// [`definition`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefinitionFields {
    /// `MinPriceIncrement`: an i64 mantissa, exponent −9.
    pub min_price_increment: usize,
    /// Whether it is a PRICENULL9 (null `i64::MAX`) rather than a PRICE9.
    pub min_price_increment_nullable: bool,
    /// `DisplayFactor` Decimal9: an i64 mantissa, exponent −9.
    pub display_factor: usize,
}

/// What a template's fields are, beyond its [`Block`]s and [`Group`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    /// 4 (the [`incremental`] root) and 12 (nothing).
    Root,
    /// An incremental template with entries (the [`incremental`] root).
    Entries(EntryFields),
    /// 30: the [`status`] root.
    Status,
    /// 52, 69: the [`snapshot`] root and these entries.
    Snapshot(SnapshotFields),
    /// 54–58, 63: the [`definition`] root with these fields.
    Definition(DefinitionFields),
}

/// One template read: its layout and offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Template {
    /// templateId.
    pub id: u16,
    /// The schema's name.
    pub name: &'static str,
    /// The first schema version that has it.
    pub since: u16,
    /// How a feed handler treats it.
    pub kind: Kind,
    /// The root block.
    pub root: Block,
    /// The groups the validity walk steps over, in schema order, up to the
    /// last one read (or counted); later groups are not walked.
    pub groups: &'static [Group],
    /// The fields read.
    pub fields: Fields,
}

impl Template {
    /// The schema blockLength of the root in `version`: the definitions of
    /// version 9 were shorter (54: 216, 55: 213, 56: 195); every other root
    /// kept its length.
    pub fn root_bl(&self, version: u16) -> u16 {
        match (self.id, version) {
            (54, ..=9) => 216,
            (55, ..=9) => 213,
            (56, ..=9) => 195,
            _ => self.root.bl,
        }
    }
}

/// Root of every incremental template (4, 37, 46–51, 64–67).
pub mod incremental {
    /// `TransactTime` uInt64, ns since the Unix epoch (UTC), start of the
    /// Globex event; v9–13.
    pub const TRANSACT_TIME: usize = 0;
    /// `MatchEventIndicator` uInt8 bitmap; v9–13.
    pub const MATCH_EVENT_INDICATOR: usize = 8;
}

/// Root of 30 SecurityStatus (bl 30, min 28).
pub mod status {
    /// `TransactTime` uInt64; v9–13.
    pub const TRANSACT_TIME: usize = 0;
    /// `SecurityGroup` `char[6]`; v9–13.
    pub const SECURITY_GROUP: usize = 8;
    /// `Asset` `char[6]`; v9–13.
    pub const ASSET: usize = 14;
    /// `SecurityID` Int32NULL (null: a group-level status); v9–13.
    pub const SECURITY_ID: usize = 20;
    /// `MatchEventIndicator` uInt8; v9–13.
    pub const MATCH_EVENT_INDICATOR: usize = 26;
    /// `SecurityTradingStatus` uInt8NULL enum; v9–13.
    pub const SECURITY_TRADING_STATUS: usize = 27;
}

/// Root of 52 SnapshotFullRefresh (v9–13) and 69 SnapshotFullRefreshLongQty
/// (v12–13): the same offsets (bl 59, min 35).
pub mod snapshot {
    /// `LastMsgSeqNumProcessed` uInt32: the incremental packet reflected.
    pub const LAST_MSG_SEQ_NUM_PROCESSED: usize = 0;
    /// `TotNumReports` uInt32: snapshots in the loop.
    pub const TOT_NUM_REPORTS: usize = 4;
    /// `SecurityID` Int32.
    pub const SECURITY_ID: usize = 8;
    /// `RptSeq` uInt32: the instrument's last entry included.
    pub const RPT_SEQ: usize = 12;
    /// `TransactTime` uInt64: the instrument's last event.
    pub const TRANSACT_TIME: usize = 16;
    /// `MDSecurityTradingStatus` uInt8NULL enum.
    pub const MD_SECURITY_TRADING_STATUS: usize = 34;
}

/// Root fields every definition has at the same offset (54, 55, 56: v9–13;
/// 57, 58: v10–13; 63: v12–13), and the entry of NoMDFeedTypes.
pub mod definition {
    /// `MatchEventIndicator` uInt8.
    pub const MATCH_EVENT_INDICATOR: usize = 0;
    /// `TotNumReports` uInt32NULL.
    pub const TOT_NUM_REPORTS: usize = 1;
    /// `SecurityUpdateAction` char: `A` add, `M` modify, `D` delete.
    pub const SECURITY_UPDATE_ACTION: usize = 5;
    /// `MDSecurityTradingStatus` uInt8NULL enum.
    pub const MD_SECURITY_TRADING_STATUS: usize = 14;
    /// `ApplID` Int16: the channel.
    pub const APPL_ID: usize = 15;
    /// `SecurityGroup` `char[6]`.
    pub const SECURITY_GROUP: usize = 23;
    /// `Asset` `char[6]`.
    pub const ASSET: usize = 29;
    /// `Symbol` `char[20]`.
    pub const SYMBOL: usize = 35;
    /// `SecurityID` Int32.
    pub const SECURITY_ID: usize = 55;
    /// NoMDFeedTypes entry: `MDFeedType` `char[3]` (`GBX` outright, `GBI`
    /// implied).
    pub const MD_FEED_TYPE: usize = 0;
    /// NoMDFeedTypes entry: `MarketDepth` Int8.
    pub const MARKET_DEPTH: usize = 3;
}

/// Bytes of each `char[n]` read.
pub mod text_len {
    /// `SecurityGroup`.
    pub const SECURITY_GROUP: usize = 6;
    /// `Asset`.
    pub const ASSET: usize = 6;
    /// `Symbol`.
    pub const SYMBOL: usize = 20;
    /// `MDFeedType`.
    pub const MD_FEED_TYPE: usize = 3;
}

const INCREMENTAL_ROOT: Block = Block { bl: 11, min: 9 };

/// NoMDEntries of an incremental template.
const fn entries(bl: u16, min: u16) -> Group {
    Group {
        name: "NoMDEntries",
        dimension: Dimension::GroupSize,
        entry: Block { bl, min },
    }
}

/// NoOrderIDEntries (MBO detail of 46, 64, 48, 65): only counted.
const fn order_ids(bl: u16) -> Group {
    Group {
        name: "NoOrderIDEntries",
        dimension: Dimension::GroupSize8Byte,
        entry: Block { bl, min: 0 },
    }
}

/// The groups of every definition read: NoEvents (skipped) then
/// NoMDFeedTypes.
const DEFINITION_GROUPS: &[Group] = &[
    Group {
        name: "NoEvents",
        dimension: Dimension::GroupSize,
        entry: Block { bl: 9, min: 0 },
    },
    Group {
        name: "NoMDFeedTypes",
        dimension: Dimension::GroupSize,
        entry: Block { bl: 4, min: 4 },
    },
];

/// An incremental template whose entries carry only (SecurityID, RptSeq)
/// for this version.
const fn statistics(
    id: u16,
    name: &'static str,
    since: u16,
    groups: &'static [Group],
    security_id: usize,
    rpt_seq: usize,
) -> Template {
    Template {
        id,
        name,
        since,
        kind: Kind::Statistics,
        root: INCREMENTAL_ROOT,
        groups,
        fields: Fields::Entries(EntryFields {
            security_id,
            rpt_seq,
            book: None,
        }),
    }
}

/// A definition: its root blockLength and its template-specific offsets
/// (min = DisplayFactor + 8).
const fn definition(
    id: u16,
    name: &'static str,
    since: u16,
    bl: u16,
    min_price_increment: usize,
    min_price_increment_nullable: bool,
    display_factor: usize,
) -> Template {
    Template {
        id,
        name,
        since,
        kind: Kind::Definition,
        root: Block {
            bl,
            min: display_factor as u16 + 8,
        },
        groups: DEFINITION_GROUPS,
        fields: Fields::Definition(DefinitionFields {
            min_price_increment,
            min_price_increment_nullable,
            display_factor,
        }),
    }
}

/// 4 ChannelReset, v9–13: root only (its group, ApplID entries, is not
/// read and not walked).
pub const CHANNEL_RESET: Template = Template {
    id: 4,
    name: "ChannelReset",
    since: 9,
    kind: Kind::ChannelReset,
    root: Block { bl: 9, min: 9 },
    groups: &[],
    fields: Fields::Root,
};

/// 12 AdminHeartbeat, v9–13: an empty root.
pub const ADMIN_HEARTBEAT: Template = Template {
    id: 12,
    name: "AdminHeartbeat",
    since: 9,
    kind: Kind::Heartbeat,
    root: Block { bl: 0, min: 0 },
    groups: &[],
    fields: Fields::Root,
};

/// 30 SecurityStatus, v9–13 ([`status`]).
pub const SECURITY_STATUS: Template = Template {
    id: 30,
    name: "SecurityStatus",
    since: 9,
    kind: Kind::SecurityStatus,
    root: Block { bl: 30, min: 28 },
    groups: &[],
    fields: Fields::Status,
};

/// 46 MDIncrementalRefreshBook, v9–13.
pub const BOOK: Template = Template {
    id: 46,
    name: "MDIncrementalRefreshBook",
    since: 9,
    kind: Kind::Book,
    root: INCREMENTAL_ROOT,
    // TradeableSize (27, Int32NULL, v10+) is not read: min stays 27.
    groups: &[entries(32, 27), order_ids(24)],
    fields: Fields::Entries(EntryFields {
        security_id: 12, // SecurityID Int32, v9–13
        rpt_seq: 16,     // RptSeq uInt32, v9–13
        book: Some(BookFields {
            price: 0,                // MDEntryPx PRICENULL9, v9–13
            size: SizeField::I32(8), // MDEntrySize Int32NULL, v9–13
            orders: 20,              // NumberOfOrders Int32NULL, v9–13
            level: 24,               // MDPriceLevel uInt8, v9–13
            action: 25,              // MDUpdateAction uInt8, v9–13
            entry_type: 26,          // MDEntryType char, v9–13
        }),
    }),
};

/// 64 MDIncrementalRefreshBookLongQty, v12–13.
pub const BOOK_LONG_QTY: Template = Template {
    id: 64,
    name: "MDIncrementalRefreshBookLongQty",
    since: 12,
    kind: Kind::Book,
    root: INCREMENTAL_ROOT,
    groups: &[entries(32, 31), order_ids(24)],
    fields: Fields::Entries(EntryFields {
        security_id: 16, // SecurityID Int32, v12–13
        rpt_seq: 20,     // RptSeq uInt32, v12–13
        book: Some(BookFields {
            price: 0,                // MDEntryPx PRICENULL9, v12–13
            size: SizeField::U64(8), // MDEntrySize uInt64NULL, v12–13
            orders: 24,              // NumberOfOrders Int32NULL, v12–13
            level: 28,               // MDPriceLevel uInt8, v12–13
            action: 29,              // MDUpdateAction uInt8, v12–13
            entry_type: 30,          // MDEntryType char, v12–13
        }),
    }),
};

/// 48 MDIncrementalRefreshTradeSummary, v9–13: SecurityID 12, RptSeq 16.
pub const TRADE_SUMMARY: Template = statistics(
    48,
    "MDIncrementalRefreshTradeSummary",
    9,
    &[entries(32, 20), order_ids(16)],
    12, // SecurityID Int32, v9–13
    16, // RptSeq uInt32, v9–13
);

/// 65 MDIncrementalRefreshTradeSummaryLongQty, v12–13: SecurityID 16,
/// RptSeq 20.
pub const TRADE_SUMMARY_LONG_QTY: Template = statistics(
    65,
    "MDIncrementalRefreshTradeSummaryLongQty",
    12,
    &[entries(40, 24), order_ids(16)],
    16, // SecurityID Int32, v12–13
    20, // RptSeq uInt32, v12–13
);

/// 37 MDIncrementalRefreshVolume, v9–13: SecurityID 4, RptSeq 8.
pub const VOLUME: Template = statistics(
    37,
    "MDIncrementalRefreshVolume",
    9,
    &[entries(16, 12)],
    4, // SecurityID Int32, v9–13
    8, // RptSeq uInt32, v9–13
);

/// 66 MDIncrementalRefreshVolumeLongQty, v12–13: SecurityID 8, RptSeq 12.
pub const VOLUME_LONG_QTY: Template = statistics(
    66,
    "MDIncrementalRefreshVolumeLongQty",
    12,
    &[entries(24, 16)],
    8,  // SecurityID Int32, v12–13
    12, // RptSeq uInt32, v12–13
);

/// 49 MDIncrementalRefreshDailyStatistics, v9–13: SecurityID 12, RptSeq 16.
pub const DAILY_STATISTICS: Template = statistics(
    49,
    "MDIncrementalRefreshDailyStatistics",
    9,
    &[entries(32, 20)],
    12, // SecurityID Int32, v9–13
    16, // RptSeq uInt32, v9–13
);

/// 50 MDIncrementalRefreshLimitsBanding, v9–13: SecurityID 24, RptSeq 28.
pub const LIMITS_BANDING: Template = statistics(
    50,
    "MDIncrementalRefreshLimitsBanding",
    9,
    &[entries(32, 32)],
    24, // SecurityID Int32, v9–13
    28, // RptSeq uInt32, v9–13
);

/// 51 MDIncrementalRefreshSessionStatistics, v9–13: SecurityID 8, RptSeq 12.
pub const SESSION_STATISTICS: Template = statistics(
    51,
    "MDIncrementalRefreshSessionStatistics",
    9,
    &[entries(24, 16)],
    8,  // SecurityID Int32, v9–13
    12, // RptSeq uInt32, v9–13
);

/// 67 MDIncrementalRefreshSessionStatisticsLongQty, v12–13: SecurityID 16,
/// RptSeq 20.
pub const SESSION_STATISTICS_LONG_QTY: Template = statistics(
    67,
    "MDIncrementalRefreshSessionStatisticsLongQty",
    12,
    &[entries(32, 24)],
    16, // SecurityID Int32, v12–13
    20, // RptSeq uInt32, v12–13
);

/// 52 SnapshotFullRefresh, v9–13 ([`snapshot`] root).
pub const SNAPSHOT: Template = Template {
    id: 52,
    name: "SnapshotFullRefresh",
    since: 9,
    kind: Kind::Snapshot,
    root: Block { bl: 59, min: 35 },
    groups: &[entries(22, 22)],
    fields: Fields::Snapshot(SnapshotFields {
        price: 0,                  // MDEntryPx PRICENULL9, v9–13
        size: SizeField::I32(8),   // MDEntrySize Int32NULL, v9–13
        orders: 12,                // NumberOfOrders Int32NULL, v9–13
        level: LevelField::I8(16), // MDPriceLevel Int8NULL, v9–13
        entry_type: 21,            // MDEntryType char, v9–13
    }),
};

/// 69 SnapshotFullRefreshLongQty, v12–13 ([`snapshot`] root).
pub const SNAPSHOT_LONG_QTY: Template = Template {
    id: 69,
    name: "SnapshotFullRefreshLongQty",
    since: 12,
    kind: Kind::Snapshot,
    root: Block { bl: 59, min: 35 },
    groups: &[entries(23, 23)],
    fields: Fields::Snapshot(SnapshotFields {
        price: 0,                  // MDEntryPx PRICENULL9, v12–13
        size: SizeField::U64(8),   // MDEntrySize uInt64NULL, v12–13
        orders: 16,                // NumberOfOrders Int32NULL, v12–13
        level: LevelField::U8(20), // MDPriceLevel uInt8NULL, v12–13
        entry_type: 22,            // MDEntryType char, v12–13
    }),
};

/// 54 MDInstrumentDefinitionFuture, v9–13 (bl 216 in v9, 224 after):
/// MinPriceIncrement PRICE9 at 91, DisplayFactor at 99.
pub const DEFINITION_FUTURE: Template =
    definition(54, "MDInstrumentDefinitionFuture", 9, 224, 91, false, 99);

/// 55 MDInstrumentDefinitionOption, v9–13 (bl 213 in v9, 221 after):
/// MinPriceIncrement PRICENULL9 at 111, DisplayFactor at 127.
pub const DEFINITION_OPTION: Template =
    definition(55, "MDInstrumentDefinitionOption", 9, 221, 111, true, 127);

/// 56 MDInstrumentDefinitionSpread, v9–13 (bl 195 in v9, 255 after):
/// MinPriceIncrement PRICENULL9 at 94, DisplayFactor at 102.
pub const DEFINITION_SPREAD: Template =
    definition(56, "MDInstrumentDefinitionSpread", 9, 255, 94, true, 102);

/// 57 MDInstrumentDefinitionFixedIncome, v10–13 (bl 338 in v12):
/// MinPriceIncrement PRICENULL9 at 86, DisplayFactor at 94.
pub const DEFINITION_FIXED_INCOME: Template = definition(
    57,
    "MDInstrumentDefinitionFixedIncome",
    10,
    338,
    86,
    true,
    94,
);

/// 58 MDInstrumentDefinitionRepo, v10–13 (bl 275 in v12): MinPriceIncrement
/// PRICE9 at 86, DisplayFactor at 94.
pub const DEFINITION_REPO: Template =
    definition(58, "MDInstrumentDefinitionRepo", 10, 275, 86, false, 94);

/// 63 MDInstrumentDefinitionFX, v12–13 (bl 309 in v12): MinPriceIncrement
/// PRICE9 at 89, DisplayFactor at 97.
pub const DEFINITION_FX: Template =
    definition(63, "MDInstrumentDefinitionFX", 12, 309, 89, false, 97);

/// Every template read, by id.
pub const ALL: [&Template; 21] = [
    &CHANNEL_RESET,
    &ADMIN_HEARTBEAT,
    &SECURITY_STATUS,
    &VOLUME,
    &BOOK,
    &TRADE_SUMMARY,
    &DAILY_STATISTICS,
    &LIMITS_BANDING,
    &SESSION_STATISTICS,
    &SNAPSHOT,
    &DEFINITION_FUTURE,
    &DEFINITION_OPTION,
    &DEFINITION_SPREAD,
    &DEFINITION_FIXED_INCOME,
    &DEFINITION_REPO,
    &DEFINITION_FX,
    &BOOK_LONG_QTY,
    &TRADE_SUMMARY_LONG_QTY,
    &VOLUME_LONG_QTY,
    &SESSION_STATISTICS_LONG_QTY,
    &SNAPSHOT_LONG_QTY,
];

/// The template read for `id`, `None` for one this version does not read
/// (see [`Kind::of`]).
#[inline]
pub fn template(id: u16) -> Option<&'static Template> {
    Some(match id {
        4 => &CHANNEL_RESET,
        12 => &ADMIN_HEARTBEAT,
        30 => &SECURITY_STATUS,
        37 => &VOLUME,
        46 => &BOOK,
        48 => &TRADE_SUMMARY,
        49 => &DAILY_STATISTICS,
        50 => &LIMITS_BANDING,
        51 => &SESSION_STATISTICS,
        52 => &SNAPSHOT,
        54 => &DEFINITION_FUTURE,
        55 => &DEFINITION_OPTION,
        56 => &DEFINITION_SPREAD,
        57 => &DEFINITION_FIXED_INCOME,
        58 => &DEFINITION_REPO,
        63 => &DEFINITION_FX,
        64 => &BOOK_LONG_QTY,
        65 => &TRADE_SUMMARY_LONG_QTY,
        66 => &VOLUME_LONG_QTY,
        67 => &SESSION_STATISTICS_LONG_QTY,
        69 => &SNAPSHOT_LONG_QTY,
        _ => return None,
    })
}

// ---------------------------------------------------------------------------
// Readers: little-endian fields looked up inside a block, `None` past it.

/// The `N` bytes at `at` of `b`, if they lie inside it.
#[inline(always)]
fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

macro_rules! readers {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("The little-endian `", stringify!($t), "` at `at` of `b`, if inside it.")]
        #[inline(always)]
        pub(super) fn $name(b: &[u8], at: usize) -> Option<$t> {
            bytes(b, at).map(<$t>::from_le_bytes)
        }
    )*};
}

readers!(u8_at: u8, i8_at: i8, u16_at: u16, i16_at: i16, u32_at: u32, i32_at: i32, u64_at: u64, i64_at: i64);

/// A `PRICENULL9` mantissa.
#[inline]
fn price_at(b: &[u8], at: usize) -> Option<i64> {
    i64_at(b, at).filter(|&p| p != PRICE_NULL)
}

/// An `Int32NULL`.
#[inline]
fn i32_null_at(b: &[u8], at: usize) -> Option<i32> {
    i32_at(b, at).filter(|&v| v != I32_NULL)
}

/// A `uInt8NULL`.
#[inline]
fn u8_null_at(b: &[u8], at: usize) -> Option<u8> {
    u8_at(b, at).filter(|&v| v != U8_NULL)
}

/// `MDEntrySize` as a quantity: null, and a negative `Int32` (no quantity
/// is negative: the sender's error), read as `None`.
#[inline]
fn size_at(b: &[u8], field: SizeField) -> Option<u64> {
    match field {
        SizeField::I32(at) => i32_null_at(b, at).and_then(|v| u64::try_from(v).ok()),
        SizeField::U64(at) => u64_at(b, at).filter(|&v| v != U64_NULL),
    }
}

/// A snapshot's `MDPriceLevel` as a level: null, and a negative `Int8`
/// (levels start at 1), read as `None`.
#[inline]
fn level_at(b: &[u8], field: LevelField) -> Option<u8> {
    match field {
        LevelField::I8(at) => i8_at(b, at)
            .filter(|&v| v != I8_NULL)
            .and_then(|v| u8::try_from(v).ok()),
        LevelField::U8(at) => u8_null_at(b, at),
    }
}

/// The `char[n]` at `at`, its NUL and space padding trimmed from the end
/// (empty when it does not lie inside `b`).
#[inline]
fn text_at(b: &[u8], at: usize, n: usize) -> &[u8] {
    let field = at.checked_add(n).and_then(|end| b.get(at..end));
    trim(field.unwrap_or_default())
}

/// `s` without its trailing NULs and spaces.
#[inline]
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., 0 | b' '] = s {
        s = rest;
    }
    s
}

// ---------------------------------------------------------------------------
// Codes

/// `MatchEventIndicator`: which kinds of update of the Globex event end with
/// this message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MatchEventIndicator(pub u8);

impl MatchEventIndicator {
    /// Bit 0: last trade message of the event.
    pub const LAST_TRADE: u8 = 1 << 0;
    /// Bit 1: last electronic volume message.
    pub const LAST_VOLUME: u8 = 1 << 1;
    /// Bit 2: last real (outright) quote message.
    pub const LAST_QUOTE: u8 = 1 << 2;
    /// Bit 3: last statistics message.
    pub const LAST_STATISTICS: u8 = 1 << 3;
    /// Bit 4: last implied quote message.
    pub const LAST_IMPLIED: u8 = 1 << 4;
    /// Bit 5: sent during a recovery process.
    pub const RECOVERY: u8 = 1 << 5;
    /// Bit 7: the last message of the event; books are consistent after it.
    pub const END_OF_EVENT: u8 = 1 << 7;

    /// Bit 7 is set.
    #[inline]
    pub fn end_of_event(self) -> bool {
        self.0 & Self::END_OF_EVENT != 0
    }

    /// Every bit of `mask` is set.
    #[inline]
    pub fn has(self, mask: u8) -> bool {
        self.0 & mask == mask
    }
}

/// `MDUpdateAction`: what a book entry does at its level. An unknown value is
/// data, kept raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateAction {
    /// 0: inserts at the level; deeper levels shift down.
    New,
    /// 1: overwrites the level.
    Change,
    /// 2: removes the level; deeper levels shift up.
    Delete,
    /// 3: empties the side.
    DeleteThru,
    /// 4: removes levels 1 to n.
    DeleteFrom,
    /// 5: overwrites the level (as Change).
    Overlay,
    /// Any other value.
    Unknown(u8),
}

impl UpdateAction {
    /// The action of a wire value.
    #[inline]
    pub fn from_code(code: u8) -> UpdateAction {
        match code {
            0 => UpdateAction::New,
            1 => UpdateAction::Change,
            2 => UpdateAction::Delete,
            3 => UpdateAction::DeleteThru,
            4 => UpdateAction::DeleteFrom,
            5 => UpdateAction::Overlay,
            code => UpdateAction::Unknown(code),
        }
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            UpdateAction::New => 0,
            UpdateAction::Change => 1,
            UpdateAction::Delete => 2,
            UpdateAction::DeleteThru => 3,
            UpdateAction::DeleteFrom => 4,
            UpdateAction::Overlay => 5,
            UpdateAction::Unknown(code) => code,
        }
    }
}

/// `MDEntryType` of a book or snapshot entry: the book types by name, any
/// other code (a snapshot's trade or statistics entries, or an unknown one)
/// kept raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// `0`.
    Bid,
    /// `1`.
    Offer,
    /// `E`.
    ImpliedBid,
    /// `F`.
    ImpliedOffer,
    /// `J`: both books empty.
    BookReset,
    /// `w` (v12+): no book change.
    MarketBestOffer,
    /// `x` (v12+): no book change.
    MarketBestBid,
    /// Any other code.
    Other(u8),
}

impl EntryType {
    /// The type of a wire character.
    #[inline]
    pub fn from_code(code: u8) -> EntryType {
        match code {
            b'0' => EntryType::Bid,
            b'1' => EntryType::Offer,
            b'E' => EntryType::ImpliedBid,
            b'F' => EntryType::ImpliedOffer,
            b'J' => EntryType::BookReset,
            b'w' => EntryType::MarketBestOffer,
            b'x' => EntryType::MarketBestBid,
            code => EntryType::Other(code),
        }
    }

    /// The wire character.
    pub fn code(self) -> u8 {
        match self {
            EntryType::Bid => b'0',
            EntryType::Offer => b'1',
            EntryType::ImpliedBid => b'E',
            EntryType::ImpliedOffer => b'F',
            EntryType::BookReset => b'J',
            EntryType::MarketBestOffer => b'w',
            EntryType::MarketBestBid => b'x',
            EntryType::Other(code) => code,
        }
    }
}

/// `SecurityTradingStatus` values (uInt8NULL; null 255 reads as `None`).
pub mod trading_status {
    pub const TRADING_HALT: u8 = 2;
    pub const CLOSE: u8 = 4;
    pub const NEW_PRICE_INDICATION: u8 = 15;
    pub const READY_TO_TRADE: u8 = 17;
    pub const NOT_AVAILABLE_FOR_TRADING: u8 = 18;
    pub const UNKNOWN_OR_INVALID: u8 = 20;
    pub const PRE_OPEN: u8 = 21;
    pub const PRE_CROSS: u8 = 24;
    pub const CROSS: u8 = 25;
    pub const POST_CLOSE: u8 = 26;
    pub const NO_CHANGE: u8 = 103;
    /// v11+.
    pub const PRIVATE_WORKUP: u8 = 201;
    /// v11+.
    pub const PUBLIC_WORKUP: u8 = 202;
}

// ---------------------------------------------------------------------------
// Groups

/// One group's entries inside a checked message: `count` blocks of
/// `block` bytes (the wire blockLength).
#[derive(Debug, Clone, Copy, Default)]
struct Span<'a> {
    bytes: &'a [u8],
    block: usize,
    count: u8,
}

impl<'a> Span<'a> {
    /// The group `g` whose dimension header starts at `at` of `b` (the
    /// bytes after the root), and where the next group starts, if it
    /// holds: its header inside `b` (else `bad_group`), its entry
    /// blockLength at least the template's (`short_block`), its entries
    /// inside `b` (`bad_group`).
    #[inline(always)]
    fn checked(b: &'a [u8], at: usize, g: &Group) -> Result<(Span<'a>, usize), Reject> {
        let dimension = g.dimension;
        let start = at + dimension.header_len();
        let header = b.get(at..start).ok_or(Reject::BadGroup)?;
        let block = u16_at(header, 0).ok_or(Reject::BadGroup)?;
        let count = u8_at(header, dimension.count_at()).ok_or(Reject::BadGroup)?;
        if block < g.entry.min {
            return Err(Reject::ShortBlock);
        }
        let end = start + usize::from(block) * usize::from(count);
        let bytes = b.get(start..end).ok_or(Reject::BadGroup)?;
        let block = usize::from(block);
        Ok((
            Span {
                bytes,
                block,
                count,
            },
            end,
        ))
    }

    #[inline]
    fn blocks(self) -> Blocks<'a> {
        Blocks {
            rest: self.bytes,
            block: self.block,
            left: self.count,
        }
    }
}

/// The entries of one group, each as its wire block.
#[derive(Debug, Clone)]
struct Blocks<'a> {
    rest: &'a [u8],
    block: usize,
    left: u8,
}

impl<'a> Iterator for Blocks<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        self.left = self.left.checked_sub(1)?;
        let (entry, rest) = self.rest.split_at_checked(self.block)?;
        self.rest = rest;
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(usize::from(self.left)))
    }
}

/// Defines a typed iterator over a group's entries.
macro_rules! entries_iter {
    ($(#[$doc:meta])* $name:ident => $item:ident, $fields:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<'a> {
            blocks: Blocks<'a>,
            fields: &'static $fields,
        }

        impl<'a> Iterator for $name<'a> {
            type Item = $item<'a>;

            #[inline]
            fn next(&mut self) -> Option<$item<'a>> {
                let bytes = self.blocks.next()?;
                Some($item { bytes, fields: self.fields })
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                self.blocks.size_hint()
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Views

/// A checked message's body, by template.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    /// 4.
    ChannelReset(Incremental<'a>),
    /// 12.
    Heartbeat,
    /// 30.
    SecurityStatus(SecurityStatus<'a>),
    /// 46, 64 ([`Kind::Book`]) and 48, 65, 37, 66, 49, 50, 51, 67
    /// ([`Kind::Statistics`]).
    Incremental(Incremental<'a>),
    /// 52, 69.
    Snapshot(Snapshot<'a>),
    /// 54–58, 63.
    Definition(Definition<'a>),
    /// A template this version does not read ([`Kind::Mbo`],
    /// [`Kind::Skipped`], [`Kind::Unknown`]).
    NotRead,
}

/// Entry fields of a template without entries (4).
const NO_ENTRIES: EntryFields = EntryFields {
    security_id: 0,
    rpt_seq: 0,
    book: None,
};

impl<'a> Body<'a> {
    /// The body of template `id` whose wire root block is `root` and whose
    /// groups start at the beginning of `groups` (the rest of the
    /// message), if its layout holds: the root at least the template's
    /// min (`short_block`), then each group it names, in schema order, as
    /// [`Span::checked`] checks it. A template this version does not read
    /// is [`Body::NotRead`]. The validity walk's body checks; a checked
    /// packet's messages never fail them.
    #[inline]
    pub(super) fn checked(id: u16, root: &'a [u8], groups: &'a [u8]) -> Result<Body<'a>, Reject> {
        // 46, the bulk of a channel, with its layout known when compiled.
        if id == BOOK.id {
            return Body::checked_as(&BOOK, root, groups);
        }
        match template(id) {
            Some(t) => Body::checked_as(t, root, groups),
            None => Ok(Body::NotRead),
        }
    }

    /// Its `MatchEventIndicator`, for the templates that carry one (the
    /// incremental ones, 4, 30, the definitions).
    #[inline]
    pub fn match_event_indicator(&self) -> Option<MatchEventIndicator> {
        match self {
            Body::ChannelReset(m) | Body::Incremental(m) => Some(m.match_event_indicator()),
            Body::SecurityStatus(st) => Some(st.match_event_indicator()),
            Body::Definition(d) => Some(d.match_event_indicator()),
            Body::Heartbeat | Body::Snapshot(_) | Body::NotRead => None,
        }
    }

    /// [`checked`](Self::checked) for the template `t`.
    #[inline(always)]
    fn checked_as(
        t: &'static Template,
        root: &'a [u8],
        groups: &'a [u8],
    ) -> Result<Body<'a>, Reject> {
        if root.len() < usize::from(t.root.min) {
            return Err(Reject::ShortBlock);
        }
        // Every group named is checked; the first two are read.
        let mut spans = [Span::default(); 2];
        let mut at = 0;
        for (i, g) in t.groups.iter().enumerate() {
            let (span, next) = Span::checked(groups, at, g)?;
            if let Some(s) = spans.get_mut(i) {
                *s = span;
            }
            at = next;
        }
        let [first, second] = spans;
        Ok(match &t.fields {
            Fields::Root if t.kind == Kind::ChannelReset => Body::ChannelReset(Incremental {
                template: t,
                root,
                entries: Span::default(),
                fields: &NO_ENTRIES,
                order_entries: 0,
            }),
            Fields::Root => Body::Heartbeat,
            Fields::Entries(fields) => Body::Incremental(Incremental {
                template: t,
                root,
                entries: first,
                fields,
                order_entries: second.count,
            }),
            Fields::Status => Body::SecurityStatus(SecurityStatus { root }),
            Fields::Snapshot(fields) => Body::Snapshot(Snapshot {
                template: t,
                root,
                entries: first,
                fields,
            }),
            Fields::Definition(fields) => Body::Definition(Definition {
                template: t,
                root,
                events: first.count,
                feed_types: second,
                fields,
            }),
        })
    }
}

/// An incremental message (4, 46, 64, 48, 65, 37, 66, 49, 50, 51, 67): its
/// root and its entries.
#[derive(Debug, Clone, Copy)]
pub struct Incremental<'a> {
    template: &'static Template,
    root: &'a [u8],
    entries: Span<'a>,
    fields: &'static EntryFields,
    order_entries: u8,
}

impl<'a> Incremental<'a> {
    /// Its template.
    #[inline]
    pub fn template(&self) -> &'static Template {
        self.template
    }

    /// `TransactTime`: ns since the Unix epoch (UTC), start of the Globex
    /// event (events in one packet may share it: it does not identify one).
    #[inline]
    pub fn transact_time(&self) -> u64 {
        u64_at(self.root, incremental::TRANSACT_TIME).unwrap_or(0)
    }

    /// `MatchEventIndicator`.
    #[inline]
    pub fn match_event_indicator(&self) -> MatchEventIndicator {
        MatchEventIndicator(u8_at(self.root, incremental::MATCH_EVENT_INDICATOR).unwrap_or(0))
    }

    /// The entries (NoMDEntries) in order; none for a ChannelReset (its
    /// group is not read).
    #[inline]
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            blocks: self.entries.blocks(),
            fields: self.fields,
        }
    }

    /// numInGroup of the entries.
    #[inline]
    pub fn entry_count(&self) -> u8 {
        self.entries.count
    }

    /// numInGroup of NoOrderIDEntries, the MBO detail of 46, 64, 48 and 65
    /// (0 for the other templates): counted, not read.
    #[inline]
    pub fn mbo_order_entries(&self) -> u8 {
        self.order_entries
    }
}

entries_iter!(
    /// The entries of an [`Incremental`].
    Entries => Entry, EntryFields
);

/// One incremental entry: (SecurityID, RptSeq), and a level update for 46
/// and 64.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    bytes: &'a [u8],
    fields: &'static EntryFields,
}

impl<'a> Entry<'a> {
    /// `SecurityID`.
    #[inline]
    pub fn security_id(&self) -> i32 {
        i32_at(self.bytes, self.fields.security_id).unwrap_or(0)
    }

    /// `RptSeq`: the instrument's entry sequence, all templates together.
    #[inline]
    pub fn rpt_seq(&self) -> u32 {
        u32_at(self.bytes, self.fields.rpt_seq).unwrap_or(0)
    }

    /// The level update, for an entry of 46 or 64.
    #[inline]
    pub fn book(&self) -> Option<BookEntry<'a>> {
        let fields = self.fields.book.as_ref()?;
        Some(BookEntry {
            entry: *self,
            fields,
        })
    }

    /// The entry's wire block (its blockLength, newer fields included).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Every field a handler reads of an entry of a 46
    /// (MDIncrementalRefreshBook), read at once at [`BOOK`]'s fixed offsets:
    /// the values [`security_id`](Self::security_id),
    /// [`rpt_seq`](Self::rpt_seq) and [`book`](Self::book)'s getters give,
    /// in a few instructions (no offset table, one bounds check). Only for
    /// an entry of a 46 (the caller checks the template); `None` for a
    /// block shorter than 46's min (never, in a checked packet).
    #[inline]
    pub fn book_46(&self) -> Option<Book46> {
        let b = self.bytes.first_chunk::<27>()?;
        let i32_at = |at: usize| i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let price = i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let size = i32_at(8);
        let orders = i32_at(20);
        Some(Book46 {
            security_id: i32_at(12),
            rpt_seq: i32_at(16) as u32,
            price: (price != PRICE_NULL).then_some(price),
            // Null and negative read as `None`, as `size_at` reads them.
            size: (size != I32_NULL && size >= 0).then_some(size as u64),
            orders: (orders != I32_NULL).then_some(orders),
            level: b[24],
            action: b[25],
            entry_type: b[26],
        })
    }
}

/// The fields of a 46 entry a handler reads ([`Entry::book_46`]), as
/// the getters give them: prices as mantissas, nulls as `None`, the
/// action and entry type as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Book46 {
    /// `SecurityID`.
    pub security_id: i32,
    /// `RptSeq`.
    pub rpt_seq: u32,
    /// `MDEntryPx`.
    pub price: Option<i64>,
    /// `MDEntrySize` (null or negative: `None`).
    pub size: Option<u64>,
    /// `NumberOfOrders`.
    pub orders: Option<i32>,
    /// `MDPriceLevel`.
    pub level: u8,
    /// `MDUpdateAction`, as sent.
    pub action: u8,
    /// `MDEntryType`, as sent.
    pub entry_type: u8,
}

/// The level update of a 46 or 64 entry. Prices are i64 mantissas with
/// exponent −9 (negative prices are valid).
#[derive(Debug, Clone, Copy)]
pub struct BookEntry<'a> {
    entry: Entry<'a>,
    fields: &'static BookFields,
}

impl<'a> BookEntry<'a> {
    /// `SecurityID`.
    #[inline]
    pub fn security_id(&self) -> i32 {
        self.entry.security_id()
    }

    /// `RptSeq`.
    #[inline]
    pub fn rpt_seq(&self) -> u32 {
        self.entry.rpt_seq()
    }

    /// `MDEntryPx`: mantissa, exponent −9; `None` when null.
    #[inline]
    pub fn price(&self) -> Option<i64> {
        price_at(self.entry.bytes, self.fields.price)
    }

    /// `MDEntrySize` (Int32 in 46, UInt64 in 64); `None` when null or
    /// negative.
    #[inline]
    pub fn size(&self) -> Option<u64> {
        size_at(self.entry.bytes, self.fields.size)
    }

    /// `NumberOfOrders`; `None` when null.
    #[inline]
    pub fn orders(&self) -> Option<i32> {
        i32_null_at(self.entry.bytes, self.fields.orders)
    }

    /// `MDPriceLevel` (1 is the top).
    #[inline]
    pub fn level(&self) -> u8 {
        u8_at(self.entry.bytes, self.fields.level).unwrap_or(0)
    }

    /// `MDUpdateAction`.
    #[inline]
    pub fn action(&self) -> UpdateAction {
        UpdateAction::from_code(u8_at(self.entry.bytes, self.fields.action).unwrap_or(0))
    }

    /// `MDEntryType`.
    #[inline]
    pub fn entry_type(&self) -> EntryType {
        EntryType::from_code(u8_at(self.entry.bytes, self.fields.entry_type).unwrap_or(0))
    }
}

/// 30 SecurityStatus: the status of an instrument, or of a security group
/// and asset.
#[derive(Debug, Clone, Copy)]
pub struct SecurityStatus<'a> {
    root: &'a [u8],
}

impl<'a> SecurityStatus<'a> {
    /// `TransactTime`: ns since the Unix epoch (UTC).
    #[inline]
    pub fn transact_time(&self) -> u64 {
        u64_at(self.root, status::TRANSACT_TIME).unwrap_or(0)
    }

    /// `SecurityGroup`, trimmed (empty when blank).
    #[inline]
    pub fn security_group(&self) -> &'a [u8] {
        text_at(self.root, status::SECURITY_GROUP, text_len::SECURITY_GROUP)
    }

    /// `Asset`, trimmed (empty when blank).
    #[inline]
    pub fn asset(&self) -> &'a [u8] {
        text_at(self.root, status::ASSET, text_len::ASSET)
    }

    /// `SecurityID`; `None` (null) for a status of a group and asset.
    #[inline]
    pub fn security_id(&self) -> Option<i32> {
        i32_null_at(self.root, status::SECURITY_ID)
    }

    /// `MatchEventIndicator`.
    #[inline]
    pub fn match_event_indicator(&self) -> MatchEventIndicator {
        MatchEventIndicator(u8_at(self.root, status::MATCH_EVENT_INDICATOR).unwrap_or(0))
    }

    /// `SecurityTradingStatus` ([`trading_status`]); `None` when null.
    #[inline]
    pub fn trading_status(&self) -> Option<u8> {
        u8_null_at(self.root, status::SECURITY_TRADING_STATUS)
    }
}

/// 52 or 69: one instrument's book and state in the recovery loop.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    template: &'static Template,
    root: &'a [u8],
    entries: Span<'a>,
    fields: &'static SnapshotFields,
}

impl<'a> Snapshot<'a> {
    /// Its template.
    #[inline]
    pub fn template(&self) -> &'static Template {
        self.template
    }

    /// `LastMsgSeqNumProcessed`: the incremental packet this snapshot
    /// reflects.
    #[inline]
    pub fn last_msg_seq_num_processed(&self) -> u32 {
        u32_at(self.root, snapshot::LAST_MSG_SEQ_NUM_PROCESSED).unwrap_or(0)
    }

    /// `TotNumReports`: snapshots in one loop.
    #[inline]
    pub fn tot_num_reports(&self) -> u32 {
        u32_at(self.root, snapshot::TOT_NUM_REPORTS).unwrap_or(0)
    }

    /// `SecurityID`.
    #[inline]
    pub fn security_id(&self) -> i32 {
        i32_at(self.root, snapshot::SECURITY_ID).unwrap_or(0)
    }

    /// `RptSeq`: the instrument's last entry this snapshot includes.
    #[inline]
    pub fn rpt_seq(&self) -> u32 {
        u32_at(self.root, snapshot::RPT_SEQ).unwrap_or(0)
    }

    /// `TransactTime`: ns since the Unix epoch (UTC) of the instrument's
    /// last event.
    #[inline]
    pub fn transact_time(&self) -> u64 {
        u64_at(self.root, snapshot::TRANSACT_TIME).unwrap_or(0)
    }

    /// `MDSecurityTradingStatus` ([`trading_status`]); `None` when null.
    #[inline]
    pub fn trading_status(&self) -> Option<u8> {
        u8_null_at(self.root, snapshot::MD_SECURITY_TRADING_STATUS)
    }

    /// The entries (NoMDEntries) in order.
    #[inline]
    pub fn entries(&self) -> SnapshotEntries<'a> {
        SnapshotEntries {
            blocks: self.entries.blocks(),
            fields: self.fields,
        }
    }

    /// numInGroup of the entries.
    #[inline]
    pub fn entry_count(&self) -> u8 {
        self.entries.count
    }
}

entries_iter!(
    /// The entries of a [`Snapshot`].
    SnapshotEntries => SnapshotEntry, SnapshotFields
);

/// One snapshot entry: a book level, or a statistic the book ignores.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotEntry<'a> {
    bytes: &'a [u8],
    fields: &'static SnapshotFields,
}

impl<'a> SnapshotEntry<'a> {
    /// `MDEntryPx`: mantissa, exponent −9; `None` when null.
    #[inline]
    pub fn price(&self) -> Option<i64> {
        price_at(self.bytes, self.fields.price)
    }

    /// `MDEntrySize` (Int32 in 52, UInt64 in 69); `None` when null or
    /// negative.
    #[inline]
    pub fn size(&self) -> Option<u64> {
        size_at(self.bytes, self.fields.size)
    }

    /// `NumberOfOrders`; `None` when null.
    #[inline]
    pub fn orders(&self) -> Option<i32> {
        i32_null_at(self.bytes, self.fields.orders)
    }

    /// `MDPriceLevel` (Int8 in 52, UInt8 in 69); `None` when null or
    /// negative.
    #[inline]
    pub fn level(&self) -> Option<u8> {
        level_at(self.bytes, self.fields.level)
    }

    /// `MDEntryType`.
    #[inline]
    pub fn entry_type(&self) -> EntryType {
        EntryType::from_code(u8_at(self.bytes, self.fields.entry_type).unwrap_or(0))
    }

    /// The entry's wire block.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// An instrument definition (54–58, 63).
#[derive(Debug, Clone, Copy)]
pub struct Definition<'a> {
    template: &'static Template,
    root: &'a [u8],
    events: u8,
    feed_types: Span<'a>,
    fields: &'static DefinitionFields,
}

impl<'a> Definition<'a> {
    /// Its template.
    #[inline]
    pub fn template(&self) -> &'static Template {
        self.template
    }

    /// `MatchEventIndicator`.
    #[inline]
    pub fn match_event_indicator(&self) -> MatchEventIndicator {
        MatchEventIndicator(u8_at(self.root, definition::MATCH_EVENT_INDICATOR).unwrap_or(0))
    }

    /// `TotNumReports`: definitions in one loop; `None` when null.
    #[inline]
    pub fn tot_num_reports(&self) -> Option<u32> {
        u32_at(self.root, definition::TOT_NUM_REPORTS).filter(|&v| v != U32_NULL)
    }

    /// `SecurityUpdateAction`: `A` add, `M` modify, `D` delete.
    #[inline]
    pub fn security_update_action(&self) -> u8 {
        u8_at(self.root, definition::SECURITY_UPDATE_ACTION).unwrap_or(0)
    }

    /// `MDSecurityTradingStatus` ([`trading_status`]); `None` when null.
    #[inline]
    pub fn trading_status(&self) -> Option<u8> {
        u8_null_at(self.root, definition::MD_SECURITY_TRADING_STATUS)
    }

    /// `ApplID`: the channel.
    #[inline]
    pub fn appl_id(&self) -> i16 {
        i16_at(self.root, definition::APPL_ID).unwrap_or(0)
    }

    /// `SecurityGroup`, trimmed.
    #[inline]
    pub fn security_group(&self) -> &'a [u8] {
        text_at(
            self.root,
            definition::SECURITY_GROUP,
            text_len::SECURITY_GROUP,
        )
    }

    /// `Asset`, trimmed.
    #[inline]
    pub fn asset(&self) -> &'a [u8] {
        text_at(self.root, definition::ASSET, text_len::ASSET)
    }

    /// `Symbol`, trimmed.
    #[inline]
    pub fn symbol(&self) -> &'a [u8] {
        text_at(self.root, definition::SYMBOL, text_len::SYMBOL)
    }

    /// `SecurityID`.
    #[inline]
    pub fn security_id(&self) -> i32 {
        i32_at(self.root, definition::SECURITY_ID).unwrap_or(0)
    }

    /// `MinPriceIncrement`: mantissa, exponent −9; `None` when null (only
    /// in 55, 56 and 57, where the schema allows it).
    #[inline]
    pub fn min_price_increment(&self) -> Option<i64> {
        let v = i64_at(self.root, self.fields.min_price_increment)?;
        match self.fields.min_price_increment_nullable {
            true => Some(v).filter(|&v| v != PRICE_NULL),
            false => Some(v),
        }
    }

    /// `DisplayFactor`: mantissa, exponent −9.
    #[inline]
    pub fn display_factor(&self) -> i64 {
        i64_at(self.root, self.fields.display_factor).unwrap_or(0)
    }

    /// numInGroup of NoEvents (skipped).
    #[inline]
    pub fn event_count(&self) -> u8 {
        self.events
    }

    /// The entries of NoMDFeedTypes in order.
    #[inline]
    pub fn feed_types(&self) -> FeedTypes<'a> {
        FeedTypes {
            blocks: self.feed_types.blocks(),
        }
    }
}

/// The NoMDFeedTypes entries of a [`Definition`].
#[derive(Debug, Clone)]
pub struct FeedTypes<'a> {
    blocks: Blocks<'a>,
}

impl<'a> Iterator for FeedTypes<'a> {
    type Item = FeedType<'a>;

    #[inline]
    fn next(&mut self) -> Option<FeedType<'a>> {
        let bytes = self.blocks.next()?;
        Some(FeedType { bytes })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.blocks.size_hint()
    }
}

/// One NoMDFeedTypes entry: a book the instrument has, and its depth.
#[derive(Debug, Clone, Copy)]
pub struct FeedType<'a> {
    bytes: &'a [u8],
}

impl<'a> FeedType<'a> {
    /// `MDFeedType`, trimmed: `GBX` outright book, `GBI` implied book.
    #[inline]
    pub fn md_feed_type(&self) -> &'a [u8] {
        text_at(self.bytes, definition::MD_FEED_TYPE, text_len::MD_FEED_TYPE)
    }

    /// `MarketDepth`: levels of that book.
    #[inline]
    pub fn market_depth(&self) -> i8 {
        i8_at(self.bytes, definition::MARKET_DEPTH).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode::{self, Len, Shape};
    use super::super::packet::{Message, Packet};
    use super::super::testing::{describe, sample, T0};
    use super::*;

    /// `f` of the only message of a packet of `m`, which must be valid.
    fn with_message<R>(m: &[u8], f: impl FnOnce(Message<'_>) -> R) -> R {
        let p = encode::packet(1, T0, &[m.to_vec()]);
        let packet = Packet::new_checked(&p[..]).unwrap_or_else(|r| panic!("{r:?}: {m:?}"));
        assert_eq!(packet.message_count(), 1);
        f(packet.messages().next().unwrap())
    }

    fn incremental_of<'a>(m: &Message<'a>) -> Incremental<'a> {
        match m.body() {
            Body::Incremental(i) => i,
            other => panic!("not incremental: {other:?}"),
        }
    }

    /// The contract's layouts, written out by number (not from the
    /// constants they check): blocks and groups of every template read,
    /// then the offsets of every field read.
    #[test]
    fn the_table_is_the_contracts() {
        const DEF: &[(usize, u16, u16)] = &[(3, 9, 0), (3, 4, 4)];
        // (id, root bl, root min, [(dimension header, entry bl, entry min)])
        type Groups = &'static [(usize, u16, u16)];
        let spec: [(u16, u16, u16, Groups); 21] = [
            (4, 9, 9, &[]),
            (12, 0, 0, &[]),
            (30, 30, 28, &[]),
            (37, 11, 9, &[(3, 16, 12)]),
            (46, 11, 9, &[(3, 32, 27), (8, 24, 0)]),
            (48, 11, 9, &[(3, 32, 20), (8, 16, 0)]),
            (49, 11, 9, &[(3, 32, 20)]),
            (50, 11, 9, &[(3, 32, 32)]),
            (51, 11, 9, &[(3, 24, 16)]),
            (52, 59, 35, &[(3, 22, 22)]),
            (54, 224, 107, DEF),
            (55, 221, 135, DEF),
            (56, 255, 110, DEF),
            (57, 338, 102, DEF),
            (58, 275, 102, DEF),
            (63, 309, 105, DEF),
            (64, 11, 9, &[(3, 32, 31), (8, 24, 0)]),
            (65, 11, 9, &[(3, 40, 24), (8, 16, 0)]),
            (66, 11, 9, &[(3, 24, 16)]),
            (67, 11, 9, &[(3, 32, 24)]),
            (69, 59, 35, &[(3, 23, 23)]),
        ];
        for (id, bl, min, groups) in spec {
            let t = template(id).unwrap();
            assert_eq!((t.id, t.root.bl, t.root.min), (id, bl, min));
            let got: Vec<(usize, u16, u16)> = t
                .groups
                .iter()
                .map(|g| (g.dimension.header_len(), g.entry.bl, g.entry.min))
                .collect();
            assert_eq!(got, groups, "{id}");
        }
        let mut ids: Vec<u16> = ALL.iter().map(|t| t.id).collect();
        ids.sort();
        assert_eq!(ids, spec.map(|s| s.0), "ALL lists each template once");
        assert_eq!(
            (0..=u16::MAX).filter(|&i| template(i).is_some()).count(),
            21
        );
        // (SecurityID, RptSeq) of each incremental entry.
        for (id, security_id, rpt_seq) in [
            (46, 12, 16),
            (64, 16, 20),
            (48, 12, 16),
            (65, 16, 20),
            (37, 4, 8),
            (66, 8, 12),
            (49, 12, 16),
            (50, 24, 28),
            (51, 8, 12),
            (67, 16, 20),
        ] {
            let Fields::Entries(f) = template(id).unwrap().fields else {
                panic!("{id}")
            };
            assert_eq!((f.security_id, f.rpt_seq), (security_id, rpt_seq), "{id}");
            assert_eq!(f.book.is_some(), id == 46 || id == 64);
        }
        let book = |id| match template(id).unwrap().fields {
            Fields::Entries(EntryFields { book: Some(b), .. }) => b,
            _ => panic!("{id}"),
        };
        let b = book(46);
        let got = (b.price, b.size, b.orders, b.level, b.action, b.entry_type);
        assert_eq!(got, (0, SizeField::I32(8), 20, 24, 25, 26));
        let b = book(64);
        let got = (b.price, b.size, b.orders, b.level, b.action, b.entry_type);
        assert_eq!(got, (0, SizeField::U64(8), 24, 28, 29, 30));
        let snap = |id| match template(id).unwrap().fields {
            Fields::Snapshot(f) => (f.price, f.size, f.orders, f.level, f.entry_type),
            _ => panic!("{id}"),
        };
        assert_eq!(snap(52), (0, SizeField::I32(8), 12, LevelField::I8(16), 21));
        assert_eq!(snap(69), (0, SizeField::U64(8), 16, LevelField::U8(20), 22));
        for (id, tick, nullable, display) in [
            (54, 91, false, 99),
            (55, 111, true, 127),
            (56, 94, true, 102),
            (57, 86, true, 94),
            (58, 86, false, 94),
            (63, 89, false, 97),
        ] {
            let Fields::Definition(f) = template(id).unwrap().fields else {
                panic!("{id}")
            };
            let got = (
                f.min_price_increment,
                f.min_price_increment_nullable,
                f.display_factor,
            );
            assert_eq!(got, (tick, nullable, display), "{id}");
        }
        use super::{definition as d, snapshot as s, status as st};
        let inc = (
            incremental::TRANSACT_TIME,
            incremental::MATCH_EVENT_INDICATOR,
        );
        assert_eq!(inc, (0, 8));
        let status = [
            st::TRANSACT_TIME,
            st::SECURITY_GROUP,
            st::ASSET,
            st::SECURITY_ID,
            st::MATCH_EVENT_INDICATOR,
            st::SECURITY_TRADING_STATUS,
        ];
        assert_eq!(status, [0, 8, 14, 20, 26, 27]);
        let snapshot = [
            s::LAST_MSG_SEQ_NUM_PROCESSED,
            s::TOT_NUM_REPORTS,
            s::SECURITY_ID,
            s::RPT_SEQ,
            s::TRANSACT_TIME,
            s::MD_SECURITY_TRADING_STATUS,
        ];
        assert_eq!(snapshot, [0, 4, 8, 12, 16, 34]);
        let definition = [
            d::MATCH_EVENT_INDICATOR,
            d::TOT_NUM_REPORTS,
            d::SECURITY_UPDATE_ACTION,
            d::MD_SECURITY_TRADING_STATUS,
            d::APPL_ID,
            d::SECURITY_GROUP,
            d::ASSET,
            d::SYMBOL,
            d::SECURITY_ID,
            d::MD_FEED_TYPE,
            d::MARKET_DEPTH,
        ];
        assert_eq!(definition, [0, 1, 5, 14, 15, 23, 29, 35, 55, 0, 3]);
        // The definitions of v9 were shorter; the others kept their length.
        let v9: Vec<(u16, u16)> = ALL.iter().map(|t| (t.id, t.root_bl(9))).collect();
        assert!(v9.contains(&(54, 216)) && v9.contains(&(55, 213)) && v9.contains(&(56, 195)));
        assert!(ALL.iter().all(|t| t.root_bl(10) == t.root.bl));
    }

    /// The least accepted block holds every field read, so a checked
    /// message never reads a field as absent.
    #[test]
    fn every_field_read_lies_inside_min() {
        let size_end = |s: SizeField| match s {
            SizeField::I32(at) => at + 4,
            SizeField::U64(at) => at + 8,
        };
        for t in ALL {
            let root_end = match t.fields {
                Fields::Root if t.kind == Kind::Heartbeat => 0,
                Fields::Root | Fields::Entries(_) => incremental::MATCH_EVENT_INDICATOR + 1,
                Fields::Status => status::SECURITY_TRADING_STATUS + 1,
                Fields::Snapshot(_) => snapshot::MD_SECURITY_TRADING_STATUS + 1,
                Fields::Definition(f) => (f.min_price_increment + 8)
                    .max(f.display_factor + 8)
                    .max(definition::SECURITY_ID + 4),
            };
            assert!(root_end <= usize::from(t.root.min), "{}", t.id);
            let entry_end = match t.fields {
                Fields::Entries(f) => {
                    let mut end = (f.security_id + 4).max(f.rpt_seq + 4);
                    if let Some(b) = f.book {
                        let ends = [
                            b.price + 8,
                            size_end(b.size),
                            b.orders + 4,
                            b.entry_type + 1,
                        ];
                        end = end.max(ends.into_iter().max().unwrap());
                        end = end.max(b.level + 1).max(b.action + 1);
                    }
                    Some((0, end))
                }
                Fields::Snapshot(f) => {
                    let level = match f.level {
                        LevelField::I8(at) | LevelField::U8(at) => at + 1,
                    };
                    let ends = [
                        f.price + 8,
                        size_end(f.size),
                        f.orders + 4,
                        level,
                        f.entry_type + 1,
                    ];
                    Some((0, ends.into_iter().max().unwrap()))
                }
                Fields::Definition(_) => Some((1, definition::MARKET_DEPTH + 1)),
                Fields::Root | Fields::Status => None,
            };
            if let Some((group, end)) = entry_end {
                assert!(end <= usize::from(t.groups[group].entry.min), "{}", t.id);
            }
        }
    }

    #[test]
    fn kinds_classify_every_template_id() {
        for t in ALL {
            assert_eq!(Kind::of(t.id), t.kind);
            assert!(t.kind.is_read());
            assert_eq!(template(t.id), Some(t));
        }
        let expected = [
            (4, Kind::ChannelReset),
            (12, Kind::Heartbeat),
            (30, Kind::SecurityStatus),
            (46, Kind::Book),
            (64, Kind::Book),
            (48, Kind::Statistics),
            (65, Kind::Statistics),
            (37, Kind::Statistics),
            (66, Kind::Statistics),
            (49, Kind::Statistics),
            (50, Kind::Statistics),
            (51, Kind::Statistics),
            (67, Kind::Statistics),
            (52, Kind::Snapshot),
            (69, Kind::Snapshot),
            (54, Kind::Definition),
            (55, Kind::Definition),
            (56, Kind::Definition),
            (57, Kind::Definition),
            (58, Kind::Definition),
            (63, Kind::Definition),
            (47, Kind::Mbo),
            (53, Kind::Mbo),
            (39, Kind::Skipped),
            (59, Kind::Skipped),
            (60, Kind::Skipped),
            (61, Kind::Skipped),
            (62, Kind::Skipped),
            (68, Kind::Skipped),
            (15, Kind::Skipped),
            (16, Kind::Skipped),
            (0, Kind::Unknown),
            (5, Kind::Unknown),
            (70, Kind::Unknown),
            (u16::MAX, Kind::Unknown),
        ];
        for (id, kind) in expected {
            assert_eq!(Kind::of(id), kind, "{id}");
            assert_eq!(template(id).is_some(), kind.is_read(), "{id}");
        }
    }

    #[test]
    fn codes_round_trip_and_keep_unknown_values() {
        for c in 0..=u8::MAX {
            assert_eq!(UpdateAction::from_code(c).code(), c);
            assert_eq!(EntryType::from_code(c).code(), c);
        }
        let actions = [
            UpdateAction::New,
            UpdateAction::Change,
            UpdateAction::Delete,
            UpdateAction::DeleteThru,
            UpdateAction::DeleteFrom,
            UpdateAction::Overlay,
        ];
        for (i, a) in actions.into_iter().enumerate() {
            assert_eq!(UpdateAction::from_code(i as u8), a);
        }
        assert_eq!(UpdateAction::from_code(6), UpdateAction::Unknown(6));
        let types = [
            (b'0', EntryType::Bid),
            (b'1', EntryType::Offer),
            (b'E', EntryType::ImpliedBid),
            (b'F', EntryType::ImpliedOffer),
            (b'J', EntryType::BookReset),
            (b'w', EntryType::MarketBestOffer),
            (b'x', EntryType::MarketBestBid),
            (b'2', EntryType::Other(b'2')),
        ];
        for (c, t) in types {
            assert_eq!(EntryType::from_code(c), t);
        }
        let m = MatchEventIndicator(0x84);
        assert!(m.end_of_event() && m.has(MatchEventIndicator::LAST_QUOTE));
        assert!(!MatchEventIndicator(0x7f).end_of_event());
        assert_eq!(trim(b"ES\0\0\0\0"), b"ES");
        assert_eq!(trim(b"ES  \0 "), b"ES");
        assert_eq!(trim(b" E S"), b" E S", "only the end is padding");
        assert_eq!(trim(b"\0\0"), b"");
        assert_eq!(trim(b""), b"");
    }

    /// An empty 46 as CME sends it, byte by byte: 2 + 8 header bytes, the
    /// 11-byte root, a 3-byte groupSize and an 8-byte groupSize8Byte,
    /// both empty: 32 bytes.
    #[test]
    fn an_empty_book_message_is_32_bytes() {
        let mut m = vec![32, 0, 11, 0, 46, 0, 1, 0, 9, 0];
        m.extend_from_slice(&T0.to_le_bytes());
        m.extend_from_slice(&[0x80, 0, 0]); // MatchEventIndicator, padding
        m.extend_from_slice(&[32, 0, 0]); // NoMDEntries: bl 32, none
        m.extend_from_slice(&[24, 0, 0, 0, 0, 0, 0, 0]); // NoOrderIDEntries
        assert_eq!(m.len(), 32);
        assert_eq!(encode::book(46, Shape::new(9), T0, 0x80, &[], 0), m);
        with_message(&m, |msg| {
            assert_eq!(msg.size(), 32);
            let i = incremental_of(&msg);
            assert_eq!((i.entry_count(), i.mbo_order_entries()), (0, 0));
            assert_eq!(i.entries().count(), 0);
            assert_eq!(i.transact_time(), T0);
            assert!(i.match_event_indicator().end_of_event());
        });
    }

    /// Messages laid out by hand from the contract (not by the encoder):
    /// a 46 entry, a 52 with one entry, a definition cut at its min.
    #[test]
    fn hand_made_messages_read_as_the_contract_says() {
        let mut entry = Vec::new();
        entry.extend_from_slice(&(-12_500_000_000i64).to_le_bytes()); // price −12.5
        entry.extend_from_slice(&7i32.to_le_bytes()); // size
        entry.extend_from_slice(&123_456i32.to_le_bytes()); // SecurityID
        entry.extend_from_slice(&99u32.to_le_bytes()); // RptSeq
        entry.extend_from_slice(&i32::MAX.to_le_bytes()); // orders: null
        entry.extend_from_slice(&[3, 4, b'E']); // level, DeleteFrom, implied bid
        entry.extend_from_slice(&[0xee; 5]); // TradeableSize, padding
        let mut m = vec![0, 0, 11, 0, 46, 0, 1, 0, 13, 0];
        m.extend_from_slice(&5u64.to_le_bytes());
        m.extend_from_slice(&[0x04, 0, 0, 32, 0, 1]);
        m.extend_from_slice(&entry);
        m.extend_from_slice(&[24, 0, 9, 9, 9, 9, 9, 0]);
        m[0] = m.len() as u8;
        with_message(&m, |msg| {
            let i = incremental_of(&msg);
            assert_eq!((i.transact_time(), i.match_event_indicator().0), (5, 0x04));
            let e = i.entries().next().unwrap();
            assert_eq!((e.security_id(), e.rpt_seq()), (123_456, 99));
            let b = e.book().unwrap();
            assert_eq!(b.price(), Some(-12_500_000_000));
            assert_eq!((b.size(), b.orders(), b.level()), (Some(7), None, 3));
            assert_eq!(
                (b.action(), b.entry_type()),
                (UpdateAction::DeleteFrom, EntryType::ImpliedBid)
            );
        });

        let mut root = vec![0u8; 59];
        root[0..4].copy_from_slice(&8_000u32.to_le_bytes());
        root[4..8].copy_from_slice(&2u32.to_le_bytes());
        root[8..12].copy_from_slice(&(-42i32).to_le_bytes());
        root[12..16].copy_from_slice(&1_000u32.to_le_bytes());
        root[16..24].copy_from_slice(&T0.to_le_bytes());
        root[34] = 17;
        let mut groups = vec![22, 0, 1];
        let mut e = vec![0u8; 22];
        e[0..8].copy_from_slice(&i64::MAX.to_le_bytes());
        e[8..12].copy_from_slice(&3i32.to_le_bytes());
        e[12..16].copy_from_slice(&1i32.to_le_bytes());
        e[16] = 127; // level: null
        e[21] = b'J';
        groups.extend_from_slice(&e);
        with_message(&encode::raw(52, 9, &root, &groups), |msg| {
            let Body::Snapshot(s) = msg.body() else {
                panic!("{msg:?}")
            };
            let root = (
                s.last_msg_seq_num_processed(),
                s.tot_num_reports(),
                s.security_id(),
            );
            assert_eq!(root, (8_000, 2, -42));
            assert_eq!(
                (s.rpt_seq(), s.transact_time(), s.trading_status()),
                (1_000, T0, Some(17))
            );
            let e = s.entries().next().unwrap();
            assert_eq!(
                (e.price(), e.size(), e.orders(), e.level()),
                (None, Some(3), Some(1), None)
            );
            assert_eq!(e.entry_type(), EntryType::BookReset);
        });

        // A 56 cut right after DisplayFactor (its min, 110 bytes).
        let mut root = vec![b' '; 110];
        root[0] = 0x80;
        root[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        root[5] = b'A';
        root[14] = 255;
        root[15..17].copy_from_slice(&310i16.to_le_bytes());
        root[23..29].copy_from_slice(b"GE\0\0\0\0");
        // Asset char[6], whole (a shorter read would pass a shorter name).
        root[29..35].copy_from_slice(b"ABCDEF");
        root[35..55].copy_from_slice(b"GEZ6-GEH7\0\0\0\0\0\0\0\0\0\0\0");
        root[55..59].copy_from_slice(&77i32.to_le_bytes());
        root[94..102].copy_from_slice(&i64::MAX.to_le_bytes());
        root[102..110].copy_from_slice(&10_000_000i64.to_le_bytes());
        let groups = [9, 0, 0, 4, 0, 1, b'G', b'B', b'I', 2];
        with_message(&encode::raw(56, 13, &root, &groups), |msg| {
            let Body::Definition(d) = msg.body() else {
                panic!("{msg:?}")
            };
            assert_eq!(msg.match_event_indicator(), Some(MatchEventIndicator(0x80)));
            assert_eq!(
                (d.tot_num_reports(), d.security_update_action()),
                (None, b'A')
            );
            assert_eq!((d.trading_status(), d.appl_id()), (None, 310));
            let text = (d.security_group(), d.asset(), d.symbol());
            assert_eq!(text, (&b"GE"[..], &b"ABCDEF"[..], &b"GEZ6-GEH7"[..]));
            assert_eq!((d.security_id(), d.min_price_increment()), (77, None));
            assert_eq!((d.display_factor(), d.event_count()), (10_000_000, 0));
            let f: Vec<(&[u8], i8)> = d
                .feed_types()
                .map(|f| (f.md_feed_type(), f.market_depth()))
                .collect();
            assert_eq!(f, [(&b"GBI"[..], 2)]);
        });
    }

    #[test]
    fn book_entries_round_trip() {
        let entries = |long: bool| {
            [
                encode::BookEntry {
                    price: Some(-1_234_500_000_000),
                    size: Some(if long {
                        u64::MAX - 1
                    } else {
                        i32::MAX as u64 - 1
                    }),
                    security_id: 42,
                    rpt_seq: 7,
                    orders: Some(3),
                    level: 2,
                    action: UpdateAction::Change,
                    entry_type: EntryType::Offer,
                },
                encode::BookEntry {
                    price: None,
                    size: None,
                    security_id: i32::MIN,
                    rpt_seq: u32::MAX,
                    orders: None,
                    level: 255,
                    action: UpdateAction::Unknown(200),
                    entry_type: EntryType::Other(b'Z'),
                },
                encode::BookEntry {
                    price: Some(i64::MIN),
                    size: Some(0),
                    security_id: 0,
                    rpt_seq: 0,
                    orders: Some(i32::MIN),
                    level: 0,
                    action: UpdateAction::Overlay,
                    entry_type: EntryType::MarketBestBid,
                },
            ]
        };
        for (id, version) in [(46, 9), (46, 13), (64, 12), (64, 13), (64, 14)] {
            for shape in [Shape::new(version), Shape::new(version).longer(5, 9)] {
                let sent = entries(id == 64);
                let m = encode::book(id, shape, T0 + 1, 0x84, &sent, 3);
                with_message(&m, |msg| {
                    let h = msg.header();
                    assert_eq!((h.template_id, h.schema_id, h.version), (id, 1, version));
                    assert_eq!(msg.kind(), Kind::Book);
                    assert_eq!(msg.transact_time(), Some(T0 + 1));
                    let i = incremental_of(&msg);
                    assert_eq!(i.template().id, id);
                    assert_eq!(i.match_event_indicator(), MatchEventIndicator(0x84));
                    assert_eq!((i.entry_count(), i.mbo_order_entries()), (3, 3));
                    let got: Vec<encode::BookEntry> = i
                        .entries()
                        .map(|e| {
                            let b = e.book().unwrap();
                            assert_eq!(
                                (b.security_id(), b.rpt_seq()),
                                (e.security_id(), e.rpt_seq())
                            );
                            encode::BookEntry {
                                price: b.price(),
                                size: b.size(),
                                security_id: e.security_id(),
                                rpt_seq: e.rpt_seq(),
                                orders: b.orders(),
                                level: b.level(),
                                action: b.action(),
                                entry_type: b.entry_type(),
                            }
                        })
                        .collect();
                    assert_eq!(got, sent, "{id} {shape:?}");
                });
            }
        }
    }

    /// `book_46` reads what the getters read, whatever the entry's bytes
    /// (nulls, negative sizes, unknown codes), in the schema's entry
    /// blockLength and in longer ones.
    #[test]
    fn book_46_reads_what_the_getters_read() {
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let nulls = [PRICE_NULL.to_le_bytes(), (I32_NULL as i64).to_le_bytes()];
        for case in 0..2_000 {
            let extra = (case % 3) as u16 * 4;
            let shape = Shape::new(13).longer(0, extra);
            let mut m = encode::book(46, shape, T0, 0x80, &[sample_entry(); 3], 0);
            let bl = 32 + usize::from(extra);
            for k in 0..3 {
                let e = &mut m[24 + k * bl..24 + (k + 1) * bl];
                for b in e.iter_mut() {
                    *b = next() as u8;
                }
                // Nulls and negatives often enough to be seen.
                match next() % 4 {
                    0 => e[0..8].copy_from_slice(&nulls[0]),
                    1 => e[8..12].copy_from_slice(&nulls[1][..4]),
                    2 => e[20..24].copy_from_slice(&nulls[1][..4]),
                    _ => {}
                }
            }
            with_message(&m, |msg| {
                assert_eq!(incremental_of(&msg).entries().count(), 3, "case {case}");
                for e in incremental_of(&msg).entries() {
                    let b = e.book().unwrap();
                    let want = Book46 {
                        security_id: e.security_id(),
                        rpt_seq: e.rpt_seq(),
                        price: b.price(),
                        size: b.size(),
                        orders: b.orders(),
                        level: b.level(),
                        action: b.action().code(),
                        entry_type: b.entry_type().code(),
                    };
                    assert_eq!(e.book_46(), Some(want), "case {case}");
                }
            });
        }
    }

    fn sample_entry() -> encode::BookEntry {
        encode::BookEntry {
            price: Some(1),
            size: Some(1),
            security_id: 1,
            rpt_seq: 1,
            orders: Some(1),
            level: 1,
            action: UpdateAction::New,
            entry_type: EntryType::Bid,
        }
    }

    #[test]
    fn statistics_entries_round_trip() {
        for t in ALL.iter().filter(|t| t.kind == Kind::Statistics) {
            let orders = if t.groups.len() == 2 { 4 } else { 0 };
            let sent = [(5, 1), (i32::MIN, u32::MAX), (-1, 0)];
            let version = t.since.max(9);
            for shape in [Shape::new(version), Shape::new(13).longer(1, 3)] {
                let m = encode::statistics(t.id, shape, 9, 0x08, &sent, orders);
                with_message(&m, |msg| {
                    assert_eq!(msg.kind(), Kind::Statistics);
                    let i = incremental_of(&msg);
                    let got: Vec<(i32, u32)> = i
                        .entries()
                        .inspect(|e| assert!(e.book().is_none()))
                        .map(|e| (e.security_id(), e.rpt_seq()))
                        .collect();
                    assert_eq!(got, sent, "{}", t.id);
                    assert_eq!(i.mbo_order_entries(), orders);
                    assert_eq!((i.transact_time(), i.match_event_indicator().0), (9, 0x08));
                });
            }
        }
    }

    #[test]
    fn channel_reset_heartbeat_and_status_round_trip() {
        with_message(
            &encode::channel_reset(Shape::new(9), T0, 0x80, 310),
            |msg| {
                let Body::ChannelReset(i) = msg.body() else {
                    panic!("{msg:?}")
                };
                assert_eq!(msg.kind(), Kind::ChannelReset);
                assert_eq!(
                    (i.transact_time(), i.entry_count(), i.entries().count()),
                    (T0, 0, 0)
                );
                assert!(i.match_event_indicator().end_of_event());
            },
        );
        with_message(&encode::heartbeat(Shape::new(9)), |msg| {
            assert!(matches!(msg.body(), Body::Heartbeat));
            assert_eq!((msg.size(), msg.root().len()), (10, 0));
            assert_eq!(
                (msg.transact_time(), msg.match_event_indicator()),
                (None, None)
            );
        });
        for status in [
            encode::Status {
                transact_time: T0,
                security_group: "ES",
                asset: "ES",
                security_id: Some(123),
                match_event_indicator: 0x80,
                trading_status: Some(trading_status::PRE_OPEN),
            },
            encode::Status {
                transact_time: 0,
                security_group: "ABCDEF",
                asset: "UVWXYZ",
                security_id: None,
                match_event_indicator: 0,
                trading_status: None,
            },
        ] {
            with_message(&encode::security_status(Shape::new(13), &status), |msg| {
                let Body::SecurityStatus(s) = msg.body() else {
                    panic!("{msg:?}")
                };
                let got = encode::Status {
                    transact_time: s.transact_time(),
                    security_group: std::str::from_utf8(s.security_group()).unwrap(),
                    asset: std::str::from_utf8(s.asset()).unwrap(),
                    security_id: s.security_id(),
                    match_event_indicator: s.match_event_indicator().0,
                    trading_status: s.trading_status(),
                };
                assert_eq!(got, status);
                assert_eq!(msg.transact_time(), Some(status.transact_time));
            });
        }
    }

    #[test]
    fn snapshots_round_trip() {
        for (id, version) in [(52, 9), (52, 13), (69, 12), (69, 15)] {
            let long = id == 69;
            let head = encode::SnapshotRoot {
                last_msg_seq_num_processed: u32::MAX,
                tot_num_reports: 12,
                security_id: -9,
                rpt_seq: 4_000_000_000,
                transact_time: T0,
                trading_status: Some(trading_status::READY_TO_TRADE),
            };
            let sent = [
                encode::SnapshotEntry {
                    price: Some(99_750_000_000),
                    size: Some(if long { 1 << 50 } else { 1 << 30 }),
                    orders: Some(2),
                    level: Some(if long { 254 } else { 126 }),
                    entry_type: EntryType::Bid,
                },
                encode::SnapshotEntry {
                    price: None,
                    size: None,
                    orders: None,
                    level: None,
                    entry_type: EntryType::Other(b'7'),
                },
            ];
            for shape in [Shape::new(version), Shape::new(version).longer(8, 4)] {
                let m = encode::snapshot(id, shape, &head, &sent);
                with_message(&m, |msg| {
                    let Body::Snapshot(s) = msg.body() else {
                        panic!("{msg:?}")
                    };
                    assert_eq!((msg.kind(), s.template().id), (Kind::Snapshot, id));
                    let got = encode::SnapshotRoot {
                        last_msg_seq_num_processed: s.last_msg_seq_num_processed(),
                        tot_num_reports: s.tot_num_reports(),
                        security_id: s.security_id(),
                        rpt_seq: s.rpt_seq(),
                        transact_time: s.transact_time(),
                        trading_status: s.trading_status(),
                    };
                    assert_eq!(got, head);
                    assert_eq!(msg.transact_time(), Some(T0));
                    let got: Vec<encode::SnapshotEntry> = s
                        .entries()
                        .map(|e| encode::SnapshotEntry {
                            price: e.price(),
                            size: e.size(),
                            orders: e.orders(),
                            level: e.level(),
                            entry_type: e.entry_type(),
                        })
                        .collect();
                    assert_eq!(got, sent, "{id} {shape:?}");
                    assert_eq!(s.entry_count(), 2);
                });
            }
        }
    }

    #[test]
    fn definitions_round_trip() {
        for t in ALL.iter().filter(|t| t.kind == Kind::Definition) {
            let sent = encode::Instrument {
                match_event_indicator: 0x80,
                tot_num_reports: Some(7),
                security_update_action: b'M',
                trading_status: Some(trading_status::CLOSE),
                appl_id: -2,
                security_group: "GE",
                asset: "GE",
                symbol: "GEZ6-GEH7 12345678901",
                security_id: 2_000_000_000,
                min_price_increment: Some(-50_000_000),
                display_factor: 100,
            };
            let feeds = [
                encode::FeedType {
                    md_feed_type: "GBX",
                    market_depth: 10,
                },
                encode::FeedType {
                    md_feed_type: "GBI",
                    market_depth: -1,
                },
            ];
            for shape in [
                Shape::new(t.since),
                Shape::new(9),
                Shape::new(13).longer(11, 1),
            ] {
                let m = encode::definition(t.id, shape, &sent, 2, &feeds);
                with_message(&m, |msg| {
                    let Body::Definition(d) = msg.body() else {
                        panic!("{msg:?}")
                    };
                    assert_eq!(
                        msg.root().len(),
                        usize::from(t.root_bl(shape.version))
                            + match shape.root {
                                Len::Longer(n) => usize::from(n),
                                _ => 0,
                            }
                    );
                    let got = encode::Instrument {
                        match_event_indicator: d.match_event_indicator().0,
                        tot_num_reports: d.tot_num_reports(),
                        security_update_action: d.security_update_action(),
                        trading_status: d.trading_status(),
                        appl_id: d.appl_id(),
                        security_group: std::str::from_utf8(d.security_group()).unwrap(),
                        asset: std::str::from_utf8(d.asset()).unwrap(),
                        symbol: std::str::from_utf8(d.symbol()).unwrap(),
                        security_id: d.security_id(),
                        min_price_increment: d.min_price_increment(),
                        display_factor: d.display_factor(),
                    };
                    // The Symbol is cut at its 20 bytes.
                    let expected = encode::Instrument {
                        symbol: "GEZ6-GEH7 1234567890",
                        ..sent
                    };
                    assert_eq!(got, expected, "{}", t.id);
                    assert_eq!(d.event_count(), 2);
                    let got: Vec<(&[u8], i8)> = d
                        .feed_types()
                        .map(|f| (f.md_feed_type(), f.market_depth()))
                        .collect();
                    assert_eq!(got, [(&b"GBX"[..], 10), (&b"GBI"[..], -1)]);
                    assert_eq!(msg.transact_time(), None);
                });
            }
        }
    }

    /// Every template reads the same whatever the shape: longer roots and
    /// entries (a newer version's, their extra bytes 0xa5), blocks cut to
    /// their min, and versions 9 to 13 and above.
    #[test]
    fn every_template_reads_the_same_in_every_shape() {
        for t in ALL {
            for k in 0..6 {
                let base = sample(t, Shape::new(13), k);
                let expected = with_message(&base, |m| describe(&m));
                let shapes = [
                    Shape::new(9),
                    Shape::new(12),
                    Shape::new(14),
                    Shape::new(u16::MAX),
                    Shape::new(13).longer(1, 1),
                    Shape::new(13).longer(40, 17),
                    Shape::new(13).root(Len::Exactly(t.root.min)),
                    Shape::new(13).entries(Len::Exactly(
                        t.groups.iter().map(|g| g.entry.min).max().unwrap_or(0),
                    )),
                ];
                for shape in shapes {
                    let m = sample(t, shape, k);
                    let got = with_message(&m, |m| describe(&m));
                    assert_eq!(got, expected, "{} {shape:?}", t.id);
                }
            }
        }
    }

    /// Each null reads as `None`, the value next to it as a value.
    #[test]
    fn nulls() {
        // The schema's nulls, written out (spec mdp3 §2), so that the
        // encoder and the reader sharing a wrong constant still fails.
        assert_eq!(
            PRICE_NULL, 9_223_372_036_854_775_807,
            "PRICENULL9 = 2^63 - 1"
        );
        assert_eq!(I32_NULL, 2_147_483_647);
        assert_eq!(U32_NULL, 4_294_967_295);
        assert_eq!(U64_NULL, 18_446_744_073_709_551_615);
        assert_eq!((U8_NULL, I8_NULL), (255, 127));
        let entry = |price, size, orders| encode::BookEntry {
            price,
            size,
            security_id: 1,
            rpt_seq: 1,
            orders,
            level: 1,
            action: UpdateAction::New,
            entry_type: EntryType::Bid,
        };
        let book = |id, e| {
            let m = encode::book(id, Shape::new(13), 0, 0, &[e], 0);
            with_message(&m, |msg| {
                let b = incremental_of(&msg)
                    .entries()
                    .next()
                    .unwrap()
                    .book()
                    .unwrap();
                (b.price(), b.size(), b.orders())
            })
        };
        let max32 = i32::MAX as u64;
        let e = entry(Some(PRICE_NULL), Some(max32), Some(I32_NULL));
        assert_eq!(book(46, e), (None, None, None), "PRICENULL9, Int32NULL");
        let e = entry(Some(PRICE_NULL - 1), Some(max32 - 1), Some(I32_NULL - 1));
        assert_eq!(
            book(46, e),
            (Some(PRICE_NULL - 1), Some(max32 - 1), Some(I32_NULL - 1))
        );
        let e = entry(None, Some(U64_NULL), None);
        assert_eq!(book(64, e), (None, None, None), "uInt64NULL");
        let e = entry(None, Some(U64_NULL - 1), None);
        assert_eq!(book(64, e).1, Some(U64_NULL - 1));
        // A negative Int32 size reads as no quantity.
        let mut m = encode::book(46, Shape::new(13), 0, 0, &[entry(None, Some(1), None)], 0);
        m[24 + 8..24 + 12].copy_from_slice(&(-5i32).to_le_bytes());
        with_message(&m, |msg| {
            let b = incremental_of(&msg)
                .entries()
                .next()
                .unwrap()
                .book()
                .unwrap();
            assert_eq!(b.size(), None);
        });

        // uInt8NULL (status), Int32NULL (SecurityID).
        let status = |security_id, trading_status| encode::Status {
            transact_time: 0,
            security_group: "",
            asset: "",
            security_id,
            match_event_indicator: 0,
            trading_status,
        };
        let read = |s: encode::Status<'_>| {
            with_message(
                &encode::security_status(Shape::new(13), &s),
                |msg| match msg.body() {
                    Body::SecurityStatus(s) => (s.security_id(), s.trading_status()),
                    other => panic!("{other:?}"),
                },
            )
        };
        assert_eq!(read(status(Some(I32_NULL), Some(U8_NULL))), (None, None));
        assert_eq!(
            read(status(Some(I32_NULL - 1), Some(254))),
            (Some(I32_NULL - 1), Some(254))
        );

        // Int8NULL (52's level), uInt8NULL (69's level), a negative Int8.
        let level = |id, level: u8| {
            let e = encode::SnapshotEntry {
                price: None,
                size: None,
                orders: None,
                level: Some(1),
                entry_type: EntryType::Bid,
            };
            let head = encode::SnapshotRoot {
                last_msg_seq_num_processed: 0,
                tot_num_reports: 0,
                security_id: 0,
                rpt_seq: 0,
                transact_time: 0,
                trading_status: None,
            };
            let mut m = encode::snapshot(id, Shape::new(13), &head, &[e]);
            let at = 10 + 59 + 3 + if id == 52 { 16 } else { 20 };
            m[at] = level;
            with_message(&m, |msg| match msg.body() {
                Body::Snapshot(s) => s.entries().next().unwrap().level(),
                other => panic!("{other:?}"),
            })
        };
        assert_eq!((level(52, 127), level(52, 126)), (None, Some(126)));
        assert_eq!(level(52, (-2i8) as u8), None, "a negative level");
        assert_eq!((level(69, 255), level(69, 254)), (None, Some(254)));

        // uInt32NULL (a definition's TotNumReports); MinPriceIncrement is
        // null only where the schema says so.
        let def = |id, reports, tick| {
            let d = encode::Instrument {
                match_event_indicator: 0,
                tot_num_reports: reports,
                security_update_action: b'A',
                trading_status: None,
                appl_id: 0,
                security_group: "",
                asset: "",
                symbol: "",
                security_id: 0,
                min_price_increment: tick,
                display_factor: 0,
            };
            with_message(
                &encode::definition(id, Shape::new(13), &d, 0, &[]),
                |msg| match msg.body() {
                    Body::Definition(d) => (d.tot_num_reports(), d.min_price_increment()),
                    other => panic!("{other:?}"),
                },
            )
        };
        assert_eq!(def(55, Some(U32_NULL), None), (None, None));
        assert_eq!(
            def(55, Some(U32_NULL - 1), Some(1)),
            (Some(U32_NULL - 1), Some(1))
        );
        for id in [55, 56, 57] {
            assert_eq!(def(id, None, None).1, None, "{id}");
        }
        for id in [54, 58, 63] {
            assert_eq!(def(id, None, None).1, Some(PRICE_NULL), "{id}: PRICE9");
        }
    }
}
