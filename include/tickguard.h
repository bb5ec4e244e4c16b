/*
 * tickguard.h — header-only C99 reader of a tickguard sidecar's
 * shared-memory publication (default /dev/shm/tickguard).
 *
 * The C counterpart of the Rust `tickguard_reader::Reader` (crates/reader/src/reader.rs): open
 * once, look a (feed, symbol) up once into a handle, then check it as often as
 * needed. A check makes no system call, takes no lock and allocates nothing;
 * the reader never writes to the mapping (it is mapped PROT_READ).
 *
 * Needs: C99 (or C++), GCC or Clang (`__atomic` builtins, `__int128`), POSIX
 * (open, fstat, pread, mmap, geteuid, clock_gettime). Nothing to link. Under a strict
 * `-std=c99`, include this header before any system header (it then asks for
 * POSIX itself) or define _POSIX_C_SOURCE=200809L.
 *
 *     tg_reader r;
 *     tg_handle h;
 *     uint64_t version;
 *     tg_open(&r, "/dev/shm/tickguard", TG_DEFAULT_DEAD_AFTER_NS);
 *     (or tg_open_owned(&r, path, TG_DEFAULT_DEAD_AFTER_NS, writer_uid) when
 *     the sidecar runs as another user than the reader)
 *     if (tg_lookup(&r, "lp1", "EURUSD", &h) == 0) {
 *         uint32_t reasons = tg_check(&r, &h, tg_now_ns(), &version);
 *         if (reasons == 0) { ... send the order ... }
 *         (tg_read_quote(&r, &h, &q) gives the book top, prices exact: a
 *         read of its own, so price from it only when q.version == version,
 *         else check again; examples/c/check.c shows the loop)
 *     }
 *     tg_close(&r);
 *
 * ---------------------------------------------------------------------------
 * Verdict (SQF v1 section 5, ITCH v1 section 4): a bit set, 0 means ok.
 * The same for every protocol: the feed extension (per feed) counts with
 * the slot (per symbol).
 *
 *   bit  value  name             meaning
 *   0    1      no_quote         symbol unknown, or neither a bid nor an ask
 *                                (SQF: no valid price yet); alone when set
 *   1    2      stale            now - max(slot last_alive, feed last_alive) > stale_ns,
 *                                or that time more than TG_MAX_AHEAD_NS ahead of
 *                                now (the clock stepped back); also: writer not
 *                                healthy
 *   2    4      stale_at_source  now - max(slot source_time, feed source_watermark)
 *                                - offset > source_ns (128-bit math; the slot's
 *                                source_time counts only with its has_price bit;
 *                                the offset taken within +-2^64)
 *   3    8      suspect          slot or feed suspect: gap not repaired, or a
 *                                delta feed waiting for a snapshot
 *   4    16     invalid_price    the last price message was invalid, or the book is crossed
 *   5    32     halted           trading in the instrument halted (slot; never SQF)
 *   6    64     closed           the market is closed (feed or slot; never SQF)
 *
 * A dead sidecar never reads as ok: a missing, unready or malformed file, a
 * writer that closed the publication, a writer replaced by another process
 * (pid or start time changed), or a writer heartbeat older than the bound
 * (`dead_after_ns`) make every answer TG_STALE. tg_health() says which.
 * A check may also answer TG_STALE with tg_health() saying the writer is
 * alive, for the handle or its slot alone: a handle looked up in another
 * writer's publication or naming a slot past the capacity, or a slot left
 * mid-update (see "Threads" and the seqlock paragraph below).
 *
 * Nor does a file someone else made. What a reader must do, and this one
 * does at open (tg_open, tg_refresh), never per check:
 *
 * - open with O_NOFOLLOW (a symbolic link is refused) and O_NONBLOCK (a FIFO
 *   planted at the path does not block), then check the opened descriptor
 *   (fstat), not the path: a regular file, owned by the expected user (the
 *   reader's effective uid unless tg_open_owned names another) or root, not
 *   writable by group or others (mode & 022 == 0). Anyone else could forge
 *   it, or truncate it under the mapping. Otherwise: TG_HEALTH_UNTRUSTED.
 * - read the header with pread and check the file is at least `file_len`
 *   long before mapping; map `file_len` bytes, never more. Touching a mapped
 *   page past the end of a file is SIGBUS, which kills the reader.
 * - treat a heartbeat or start time more than TG_MAX_AHEAD_NS ahead of its
 *   own clock as untrustworthy (a forged file or a clock stepped back):
 *   TG_HEALTH_WRITER_AHEAD.
 *
 * Only the owner (or root) can then truncate the file; the sidecar never
 * does. A reader that maps a file which is later truncated by them still
 * gets SIGBUS: that is why ownership and mode are checked. (The sidecar
 * survives it and publishes a new file (within a heartbeat when the cut
 * faults its mapping; a cut inside the last page is found by the length
 * it reads back every 128 heartbeats), giving the old
 * one its length back; the Rust reader's guard maps zero pages over a
 * faulting mapping, which then answers stale. This header installs no
 * signal handler: a C program that must survive a truncation handles
 * SIGBUS itself.)
 *
 * ---------------------------------------------------------------------------
 * File layout (version 4; every field a little-endian u64 unless noted;
 * pinned by `layout_is_pinned` in crates/reader/src/layout.rs and slot.rs). A
 * file of any other version is refused (TG_HEALTH_BAD_LAYOUT, ENOTSUP;
 * tg_reader.found_version says which):
 *
 *   offset              size            section
 *   0                   128             header
 *   feeds_offset=128    1024 x feeds    feed block per feed, configuration order
 *   descriptors         32768 x feeds   per feed, 128 counter descriptors of 256 bytes
 *   directory_offset    96 x capacity   directory entry per name (2 x capacity)
 *   slots_offset        128 x capacity  slot per (feed, symbol)
 *
 *   descriptors      = 128 + 1024 * feeds
 *   directory_offset = align(descriptors + 32768 * feeds, 128)
 *   slots_offset     = align(directory_offset + 96 * capacity, 4096)
 *   file_len         = align(slots_offset + 128 * capacity, 4096)
 *
 * Header:
 *   0   magic             "TKGUARD1" read as a little-endian u64
 *   8   version           4; stored last by the writer (Release); 0 = not ready
 *   16  state             1 running, 2 closed by the writer
 *   24  writer_pid
 *   32  start_time_ns     writer start, ns since the Unix epoch (CLOCK_REALTIME)
 *   40  heartbeat_ns      writer's last sign of life (CLOCK_REALTIME ns)
 *   48  heartbeat_period_ns
 *   56  capacity          slots
 *   64  feed_count
 *   72  directory_len     entries published (Release after each entry)
 *   80  feeds_offset
 *   88  directory_offset
 *   96  slots_offset
 *   104 file_len
 *   112 worst_cycle_ns    longest receiver duty cycle so far
 *   120 datagrams         datagrams received so far, all lines
 *
 * Feed block (1024 bytes):
 *   0..64    name, UTF-8, NUL padded
 *   64       kind: 0 full, 1 delta
 *   72       protocol: its name (ASCII, NUL padded: "sqf", "itch50")
 *   80       traits: bit 0 (TG_TRAIT_SYMBOL_COUNTS) each slot counts its own
 *            ticks_lost and duplicates; otherwise the feed counts them only;
 *            bits 8..16 (TG_TRAIT_PRICE_DECIMALS_SHIFT): the decimals the
 *            feed's prices print with, plus 1 (0: not said)
 *   88, 96   line A, line B: ipv4 << 16 | port, 0 = none
 *   104      counters stamp (seqlock over every counter of the block: odd
 *            while the writer stores one heartbeat's set, +2 per set)
 *   112      descriptors offset: bytes from the start of the file to the
 *            feed's descriptor table (descriptors + 32768 * feed)
 *   120      descriptor count (at most 128)
 *   128      offset stamp (seqlock: odd while written)
 *   136      offset low word   } i128, ns, local clock - provider clock
 *   144      offset high word  }
 *   152..256 counters 32..45
 *   256..512 counters 0..32 (u64 each; a counter id's word: tg__counter_word)
 *   feed extension (SQF leaves it zero):
 *   512      state stamp (seqlock over 520..544: odd while written)
 *   520      flags: bit 0 suspect, 1 closed, 2 joined, 3 orders refused
 *   528      last_alive        ns since the Unix epoch, local clock; 0 = none
 *   536      source_watermark  ns since the Unix epoch, provider clock; 0 = none
 *   544..1024 counters 64..124 (under the counters stamp; layout.rs `counter`)
 *
 * Counter descriptor (256 bytes; what a counter is, apart from its value,
 * as Aeron's counter metadata; written once before the version, so read
 * Relaxed after tg_open; tg_counter_describe decodes one):
 *   0        id (u16): the counter holding the value (unused for a flag)
 *   2        kind (u8): 1 counter (only grows), 2 gauge, 3 timestamp_ns (0 none),
 *            4 text (ASCII over `width` consecutive counters, NUL padded),
 *            5 bucket (a histogram's: events up to `param` ns, UINT64_MAX
 *            open; not cumulative), 6 reason (0 none, else 1 + the `param`
 *            of the descriptor whose key is "reason"), 7 flag (bit `param`
 *            of the feed's flags word, not a counter)
 *   3        width (u8): counters the value spans (text), else 1
 *   8        param (u64): a bucket's bound, a flag's bit, a reason's index
 *   16..48   name (ASCII, NUL padded): "packets", "gaps_open", "session"
 *   48..112  metric: the Prometheus name less "tickguard_"; empty: not exported
 *   112..128 key: attribute name ("line", "reason"); empty: none
 *   128..192 value: attribute value ("A", "bad_magic")
 *   192..256 note: printed after the value (a reason's hint)
 * Descriptors of one name are one family ("rejected", "rejected{line=A}",
 * "rejected{reason=short}"). A reader skips a kind it does not know.
 * To print every counter of a feed: tg_read_counters once, then for each
 * i < tg_counter_count: tg_counter_describe and tg_counter_value (or
 * tg_counter_text for text). Strings from the file are not sanitized.
 *
 * Directory entry (48 bytes):
 *   0   key (SQF, ITCH: the 8 symbol bytes, space padded, as a little-endian u64)
 *   8   feed << 32 | slot; bit 63 TG_D_MOVABLE: a name that may move
 *   16..48 name, UTF-8, NUL padded (SQF, ITCH: the symbol without its
 *       trailing spaces); tg_lookup compares these words. A slot has an
 *       entry per name (MDP3: "#SecurityID", then its Symbol); the last
 *       entry of a name is the one in force. When a movable name is
 *       entered again for another slot, or withdrawn, the slot it found
 *       counts it in names_left after the new entry is published
 *
 * Slot (128 bytes, 128-aligned):
 *   0    stamp        seqlock: odd while a write is in progress, +2 per update
 *   8    symbol       key as above; 0 = empty slot
 *   16   meta         bits 0..16 feed id, 16 baseline, 17 suspect,
 *                     18 invalid, 19 has_price, 20 halted, 21 has_bid,
 *                     22 has_ask, 23 closed, 24..32 price format (0 f64 bits,
 *                     1 decimal: i64 mantissa), 32..40 decimal exponent (i8)
 *   24   last_seq     SQF: the symbol's last applied sequence; ITCH: the
 *                     stream sequence of the last message that named the
 *                     symbol or changed its book (not the stream's
 *                     position); MDP3: the instrument's RptSeq (its own
 *                     count, not the channel's MsgSeqNum); 0 = none
 *   32   bid          f64 bits, or the decimal's i64 mantissa
 *   40   ask          as bid
 *   48   source_time  ns since the Unix epoch, provider clock; 0 = none
 *   56   last_alive   ns since the Unix epoch, local clock; 0 = none
 *   64   ticks_lost
 *   72   duplicates
 *   80   stale_ns     stale threshold in force for this symbol
 *   88   source_ns    source threshold in force for this symbol
 *   96   bid_size     0 = unknown
 *   104  ask_size     0 = unknown
 *   112  names_left   names that left the slot (entered for another slot,
 *                     or withdrawn); a handle found by a movable name
 *                     answers for it while the count is the one it saw
 *   120..128 reserved
 *
 * ---------------------------------------------------------------------------
 * Memory ordering (mirrors crates/reader/src/reader.rs, layout.rs, slot.rs):
 *
 * - version: Acquire load, pairs with the writer's Release store in
 *   Publication::ready(); everything the writer filled in before (header,
 *   feed blocks) is then visible and read Relaxed.
 * - state: Acquire load, pairs with the Release store in Publication::close().
 * - writer_pid, start_time_ns, heartbeat_ns: Relaxed (plain values).
 * - directory_len: Acquire load, pairs with the Release store in
 *   publish_entry(); the entries below it are complete and read Relaxed.
 * - names_left (tg_lookup, through a movable entry): Acquire load, pairs
 *   with the Release fence after the odd stamp of the writer's seqlock
 *   write of the count, which follows its Release store of directory_len
 *   for the entry that moved the name; directory_len is then loaded again
 *   (Acquire), so a count that includes the move is never kept for the
 *   slot the name left without that entry seen.
 * - slot seqlock: stamp Acquire (pairs with the writer's Release store of
 *   the even stamp), words Relaxed, Acquire fence (pairs with the writer's
 *   Release fence after the odd stamp), stamp Relaxed; equal even stamps
 *   mean a consistent copy, otherwise retry.
 * - feed offset seqlock: the same protocol over (stamp, low, high); the
 *   feed extension's state stamp over (flags, last_alive, source_watermark).
 *
 * Threads: after tg_open() a tg_reader is only read, so any number of threads
 * may call tg_lookup/tg_check/tg_check_symbol/tg_health on it concurrently;
 * tg_open/tg_refresh/tg_close need exclusive access (tg_close while another
 * thread checks unmaps what it reads). A tg_handle is a plain value for the
 * writer whose publication it was looked up in: checked after tg_refresh
 * mapped a restarted writer's file, or with another reader, it answers
 * TG_STALE; look the symbol up again. Call tg_close before tg_open on a
 * reader that is open (tg_open does not unmap what it held).
 *
 * A seqlock read that keeps failing for TG_MAX_RETRIES attempts (a writer
 * killed in the middle of an update leaves an odd stamp forever) answers
 * TG_STALE, as the Rust reader does (its health then says `busy`; the C
 * reader has no health for it: tg_health still says the writer is alive).
 * The attempts are counted over a whole check (its reads of the slot, the
 * feed's offset and status, and their repeats), as in the Rust reader.
 */
#ifndef TICKGUARD_H
#define TICKGUARD_H

/* Strict ISO mode (-std=c99) hides POSIX: ask for it, if no feature macro
 * was chosen. In the default (gnu) modes POSIX is visible already and the
 * feature macros are left alone. */
#if defined(__STRICT_ANSI__) && !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && \
    !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#if !defined(__GNUC__) && !defined(__clang__)
#error "tickguard.h needs GCC or Clang (__atomic builtins)"
#endif
#if !defined(__SIZEOF_INT128__)
#error "tickguard.h needs __int128 (a 64-bit GCC or Clang target)"
#endif
#if !defined(CLOCK_REALTIME)
#error "tickguard.h: clock_gettime is not declared; include this header first or define _POSIX_C_SOURCE=200809L"
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tickguard.h: the publication is little-endian and only mapped on little-endian hosts"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Reason bits (stable; bit i is the i-th reason in report order). */
#define TG_NO_QUOTE 1u
#define TG_STALE 2u
#define TG_STALE_AT_SOURCE 4u
#define TG_SUSPECT 8u
#define TG_INVALID_PRICE 16u
#define TG_HALTED 32u
#define TG_CLOSED 64u
#define TG_ALL_REASONS 127u

/* Default bound on the writer heartbeat's age, ns (as the Rust reader). */
#define TG_DEFAULT_DEAD_AFTER_NS 100000000ull

/* Seqlock read attempts, over one check, before it gives up and answers TG_STALE. */
#ifndef TG_MAX_RETRIES
#define TG_MAX_RETRIES (1u << 16)
#endif

/* Writer health (tg_health), as the Rust `Health`. */
#define TG_HEALTH_OK 0u
#define TG_HEALTH_MISSING 1u          /* no file, or it could not be opened or mapped */
#define TG_HEALTH_BAD_LAYOUT 2u       /* not a publication of this layout, or not ready; or its state word cut or overwritten */
#define TG_HEALTH_WRITER_DEAD 3u      /* heartbeat older than dead_after_ns */
#define TG_HEALTH_WRITER_CLOSED 4u    /* the writer closed the publication */
#define TG_HEALTH_WRITER_RESTARTED 5u /* another writer process: tg_refresh() */
#define TG_HEALTH_UNTRUSTED 6u        /* symlink, not a regular file, wrong owner, or group/other writable */
#define TG_HEALTH_WRITER_AHEAD 7u     /* heartbeat or start time ahead of this clock by > TG_MAX_AHEAD_NS */

/* How far the writer's heartbeat or start time may be ahead of the reader's
 * clock (a reader preempted between reading its clock and checking), ns. */
#ifndef TG_MAX_AHEAD_NS
#define TG_MAX_AHEAD_NS 100000000ull
#endif

/* Layout constants (version 4). */
#define TG_MAGIC 0x3144524155474b54ull /* "TKGUARD1" little-endian */
#define TG_LAYOUT_VERSION 4u
#define TG_STATE_RUNNING 1u
#define TG_STATE_CLOSED 2u
#define TG_HEADER_LEN 128u
#define TG_FEED_LEN 1024u
#define TG_DIR_LEN 48u
#define TG_NAME_LEN 32u /* directory entry name, bytes */
#define TG_SLOT_LEN 128u
#define TG_PAGE 4096u
#define TG_DESC_LEN 256u         /* bytes of a counter descriptor */
#define TG_MAX_DESCRIPTORS 128u  /* descriptors per feed table */
#define TG_DESC_TABLE_LEN (TG_DESC_LEN * TG_MAX_DESCRIPTORS)
#define TG_COUNTER_IDS 124u      /* counter ids 0..124: tg_read_counters' array */

/* Counter kinds (descriptor byte 2). */
#define TG_KIND_COUNTER 1u
#define TG_KIND_GAUGE 2u
#define TG_KIND_TIMESTAMP_NS 3u
#define TG_KIND_TEXT 4u
#define TG_KIND_BUCKET 5u
#define TG_KIND_REASON 6u
#define TG_KIND_FLAG 7u

/* Feed traits (TG_F_TRAITS). */
#define TG_TRAIT_SYMBOL_COUNTS 1ull
#define TG_TRAIT_PRICE_DECIMALS_SHIFT 8u

/* Header word indexes (byte offset / 8). */
#define TG_H_MAGIC 0
#define TG_H_VERSION 1
#define TG_H_STATE 2
#define TG_H_WRITER_PID 3
#define TG_H_START_TIME 4
#define TG_H_HEARTBEAT 5
#define TG_H_HEARTBEAT_PERIOD 6
#define TG_H_CAPACITY 7
#define TG_H_FEED_COUNT 8
#define TG_H_DIRECTORY_LEN 9
#define TG_H_FEEDS_OFFSET 10
#define TG_H_DIRECTORY_OFFSET 11
#define TG_H_SLOTS_OFFSET 12
#define TG_H_FILE_LEN 13

/* Feed block word indexes. */
#define TG_F_NAME 0 /* 8 words */
#define TG_F_KIND 8
#define TG_F_PROTOCOL 9
#define TG_F_TRAITS 10
#define TG_F_COUNTERS_STAMP 13
#define TG_F_DESC_OFFSET 14
#define TG_F_DESC_COUNT 15
#define TG_F_MORE_COUNTERS 19 /* counter ids 32..45 */
#define TG_F_COUNTERS 32      /* counter ids 0..32 */
#define TG_F_OFFSET_STAMP 16
#define TG_F_OFFSET_LO 17
#define TG_F_OFFSET_HI 18
#define TG_F_STATE_STAMP 64
#define TG_F_FLAGS 65
#define TG_F_LAST_ALIVE 66
#define TG_F_SOURCE_WATERMARK 67
#define TG_F_EXT_COUNTERS 68 /* counter ids 64.. */

/* Feed flags (TG_F_FLAGS). */
#define TG_FEED_SUSPECT 1ull
#define TG_FEED_CLOSED 2ull
#define TG_FEED_JOINED 4ull
#define TG_FEED_ORDERS_REFUSED 8ull /* max_orders reached this session */

/* Directory entry word indexes. */
#define TG_D_KEY 0
#define TG_D_FEED_SLOT 1
#define TG_D_NAME 2 /* 4 words */
/* Bit 63 of feed_slot: the name may be entered later for another slot, or
 * withdrawn (an MDP3 Symbol; never a "#SecurityID", SQF or ITCH symbol). */
#define TG_D_MOVABLE (1ull << 63)

/* Slot word indexes (word 0 is the stamp). */
#define TG_S_STAMP 0
#define TG_S_SYMBOL 1
#define TG_S_META 2
#define TG_S_LAST_SEQ 3
#define TG_S_BID 4
#define TG_S_ASK 5
#define TG_S_SOURCE_TIME 6
#define TG_S_LAST_ALIVE 7
#define TG_S_TICKS_LOST 8
#define TG_S_DUPLICATES 9
#define TG_S_STALE_NS 10
#define TG_S_SOURCE_NS 11
#define TG_S_BID_SIZE 12
#define TG_S_ASK_SIZE 13
#define TG_S_NAMES_LEFT 14
#define TG_S_USED 15 /* stamp + 14 payload words in use */

/* Slot meta bits. */
#define TG_META_FEED_MASK 0xffffull
#define TG_META_BASELINE (1ull << 16)
#define TG_META_SUSPECT (1ull << 17)
#define TG_META_INVALID (1ull << 18)
#define TG_META_HAS_PRICE (1ull << 19)
#define TG_META_HALTED (1ull << 20)
#define TG_META_HAS_BID (1ull << 21)
#define TG_META_HAS_ASK (1ull << 22)
#define TG_META_CLOSED (1ull << 23)
#define TG_META_FORMAT_SHIFT 24 /* 8 bits: TG_PRICE_F64 or TG_PRICE_DECIMAL */
#define TG_META_EXPONENT_SHIFT 32 /* 8 bits: the decimal exponent, an int8_t */

/* Price formats. */
#define TG_PRICE_F64 0u
#define TG_PRICE_DECIMAL 1u

__extension__ typedef __int128 tg_i128;
__extension__ typedef unsigned __int128 tg_u128;

/* An open publication. Plain struct: put it anywhere; treat fields as private. */
typedef struct tg_reader {
    const unsigned char *base; /* the mapping; NULL when not mapped */
    size_t map_len;            /* bytes mapped */
    uint64_t dead_after_ns;    /* heartbeat age bound */
    uint64_t owner;            /* uid that must own the file (root always accepted) */
    uint64_t pid;              /* writer pid at open */
    uint64_t start_time_ns;    /* writer start time at open */
    uint64_t feed_count;
    uint64_t capacity;
    uint64_t feeds_offset;
    uint64_t directory_offset;
    uint64_t slots_offset;
    uint64_t dev, ino; /* the file mapped, for tg_refresh */
    uint32_t open_health; /* TG_HEALTH_OK when mapped, else why not */
    int open_error;       /* tg_open's return value */
    uint64_t found_version; /* the layout version the file had (ENOTSUP: not TG_LAYOUT_VERSION) */
} tg_reader;

/* A price exactly as published: format TG_PRICE_F64 (`value`), or
 * TG_PRICE_DECIMAL (`mantissa` x 10^`exponent`, exactly; `value` then the
 * nearest double). */
typedef struct tg_price {
    uint32_t format;
    int32_t exponent;
    int64_t mantissa;
    double value;
} tg_price;

/* A slot's book top (tg_read_quote). Sizes 0 when unknown (SQF has none);
 * on an exchange feed a side present (has_bid, has_ask) with size 0 is
 * literal: ITCH keeps an order of 0 shares live at its price. */
typedef struct tg_quote {
    int has_bid, has_ask;
    tg_price bid, ask;
    uint64_t bid_size, ask_size;
    int halted;
    uint64_t last_seq; /* the symbol's last message's sequence (see the slot layout) */
    uint64_t version; /* the slot's change counter at the read */
    int closed; /* the symbol's own closed flag (MDP3: its status in force, or its last definition deleted it) */
} tg_quote;

/* A looked-up (feed, symbol). */
typedef struct tg_handle {
    uint32_t feed;   /* feed id (configuration order) */
    uint32_t slot;   /* slot index */
    uint64_t symbol; /* symbol key */
    /* The writer whose publication it was looked up in: checked with
     * another's (after tg_refresh to a restarted writer, or with another
     * reader) it answers TG_STALE, as its slot may hold another feed's
     * instrument there. Look the symbol up again. */
    uint64_t writer_pid, writer_start_time_ns;
    /* Found by a name that may move (an MDP3 Symbol): the slot's
     * names_left when the name was in force there; once the name has left
     * (entered for another SecurityID, or withdrawn) tg_check answers
     * TG_NO_QUOTE: look the name up again to follow it. */
    uint64_t names_left;
    uint32_t movable; /* 1: found by a movable name; 0: names_left unused */
} tg_handle;

/* ------------------------------------------------------------------------ */
/* Internals. */

static inline uint64_t tg__word(const tg_reader *r, uint64_t byte_offset, uint64_t word) {
    const uint64_t *p = (const uint64_t *)(const void *)(r->base + byte_offset) + word;
    /* Relaxed: a plain value, or one ordered by an Acquire elsewhere (see each caller). */
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline const uint64_t *tg__ptr(const tg_reader *r, uint64_t byte_offset) {
    return (const uint64_t *)(const void *)(r->base + byte_offset);
}

static inline void tg__spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline uint64_t tg__align(uint64_t n, uint64_t to) {
    return (n + (to - 1)) / to * to;
}

/* Symbol::parse: 1 to 8 printable ASCII bytes (0x21..0x7e), no space;
 * the key is the 8 space-padded bytes as a little-endian u64. 0 = invalid. */
static inline uint64_t tg__symbol_key(const char *symbol) {
    uint64_t key = 0;
    size_t i, n;
    if (symbol == NULL) return 0;
    n = strlen(symbol);
    if (n == 0 || n > 8) return 0;
    for (i = 0; i < 8; i++) {
        unsigned char c = i < n ? (unsigned char)symbol[i] : (unsigned char)' ';
        if (i < n && (c < 0x21 || c > 0x7e)) return 0;
        key |= (uint64_t)c << (8 * i);
    }
    return key;
}

/* Symbol::from_key: the key of a valid symbol (1 to 8 printable bytes,
 * space padded, no space inside); 0, a withdrawn directory entry's, is
 * none. */
static inline int tg__symbol_key_valid(uint64_t key) {
    char name[9];
    int i, n = 0;
    for (i = 0; i < 8; i++) {
        unsigned char c = (unsigned char)(key >> (8 * i));
        if (c == ' ') break;
        name[n++] = (char)c;
    }
    name[n] = '\0';
    return key != 0 && n > 0 && tg__symbol_key(name) == key;
}

/* The feed id of `name`, or -1. Names are compared as bytes up to the first
 * NUL of the 64-byte field (as the Rust reader compares the decoded name);
 * a name holding a byte outside ' ' to '~' (which no configuration gives,
 * and the Rust reader shows escaped) is no feed's. */
static inline long tg__feed_id(const tg_reader *r, const char *name) {
    size_t n;
    uint64_t f;
    if (name == NULL) return -1;
    n = strlen(name);
    if (n > 64) return -1;
    for (f = 0; f < r->feed_count && f <= 0xffff; f++) {
        unsigned char bytes[64];
        size_t w, len = 0;
        uint64_t block = r->feeds_offset + f * TG_FEED_LEN;
        for (w = 0; w < 8; w++) {
            /* Relaxed: written before the version store, published by its
             * Release, which tg_open's Acquire load of the version saw. */
            uint64_t v = tg__word(r, block, TG_F_NAME + w);
            size_t b;
            for (b = 0; b < 8; b++) bytes[w * 8 + b] = (unsigned char)(v >> (8 * b));
        }
        while (len < 64 && bytes[len] != 0) {
            if (bytes[len] < 0x20 || bytes[len] > 0x7e) break;
            len++;
        }
        if (len < 64 && bytes[len] != 0) continue;
        if (len == n && memcmp(bytes, name, n) == 0) return (long)f;
    }
    return -1;
}

static inline uint32_t tg__writer_health(const tg_reader *r, uint64_t now_ns) {
    const uint64_t *h;
    uint64_t state, beat, age, latest;
    if (r == NULL) return TG_HEALTH_MISSING;
    /* Not mapped is never healthy, even in a zeroed struct tg_open never saw. */
    if (r->base == NULL) return r->open_health != TG_HEALTH_OK ? r->open_health : TG_HEALTH_MISSING;
    h = tg__ptr(r, 0);
    /* Acquire: pairs with the writer's Release store of `state` in
     * Publication::close(). It orders nothing the check reads after it:
     * the slots' seqlocks and the feeds' times keep the answer safe
     * whatever lands meanwhile. */
    state = __atomic_load_n(h + TG_H_STATE, __ATOMIC_ACQUIRE);
    if (state == TG_STATE_CLOSED) return TG_HEALTH_WRITER_CLOSED;
    /* Any other word: cut under the mapping (zeros) or overwritten. */
    if (state != TG_STATE_RUNNING) return TG_HEALTH_BAD_LAYOUT;
    /* Relaxed: identity of the writer, compared with what tg_open saw. */
    if (__atomic_load_n(h + TG_H_WRITER_PID, __ATOMIC_RELAXED) != r->pid ||
        __atomic_load_n(h + TG_H_START_TIME, __ATOMIC_RELAXED) != r->start_time_ns)
        return TG_HEALTH_WRITER_RESTARTED;
    /* Relaxed: a timestamp on its own (the writer stores it Relaxed). */
    beat = __atomic_load_n(h + TG_H_HEARTBEAT, __ATOMIC_RELAXED);
    latest = beat > r->start_time_ns ? beat : r->start_time_ns;
    if (latest > now_ns && latest - now_ns > TG_MAX_AHEAD_NS) return TG_HEALTH_WRITER_AHEAD;
    age = now_ns > beat ? now_ns - beat : 0;
    if (age > r->dead_after_ns) return TG_HEALTH_WRITER_DEAD;
    return TG_HEALTH_OK;
}

/* One seqlock read: `stamp`, then the `n` words from `words` into `out`, then
 * the stamp again, retried while a write is in progress, each failed attempt
 * taken from `*budget`. Returns the even stamp of a consistent copy, or 1
 * (odd: no copy) once the budget is spent. The writer side is
 * `SeqLock::write` in crates/reader/src/seqlock.rs (slots, the feed offset,
 * the feed extension). */
static inline uint64_t tg__seqlock_read(const uint64_t *stamp, const uint64_t *words, int n, uint64_t *out,
                                        uint32_t *budget) {
    for (; *budget > 0; (*budget)--) {
        uint64_t s1, s2;
        int i;
        /* Acquire: pairs with the writer's Release store of the even stamp
         * in SeqLock::write(), so the words it wrote before are visible. */
        s1 = __atomic_load_n(stamp, __ATOMIC_ACQUIRE);
        if ((s1 & 1) == 0) {
            for (i = 0; i < n; i++) {
                /* Relaxed: ordered by the Acquire load above and fence below. */
                out[i] = __atomic_load_n(words + i, __ATOMIC_RELAXED);
            }
            /* Acquire fence: keeps the word loads above before the stamp
             * re-load; pairs with the writer's Release fence after the odd
             * stamp, so if a word came from a newer write, s2 sees its stamp. */
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            /* Relaxed: ordered by the fence above. */
            s2 = __atomic_load_n(stamp, __ATOMIC_RELAXED);
            if (s1 == s2) return s1;
        }
        tg__spin_hint();
    }
    return 1;
}

/* Reads a feed's clock offset (seqlock) and the stamp of the copy read;
 * 0 on success, -1 once `*budget` (attempts) is spent. */
static inline int tg__read_offset(const tg_reader *r, uint32_t feed, tg_i128 *out, uint64_t *stamp,
                                  uint32_t *budget) {
    const uint64_t *b = tg__ptr(r, r->feeds_offset + (uint64_t)feed * TG_FEED_LEN);
    uint64_t w[2];
    *stamp = tg__seqlock_read(b + TG_F_OFFSET_STAMP, b + TG_F_OFFSET_LO, 2, w, budget);
    if (*stamp & 1) return -1;
    *out = (tg_i128)(((tg_u128)w[1] << 64) | (tg_u128)w[0]);
    /* Within +-2^64 ns, which any pair of u64 clocks gives: a forged offset
     * beyond is taken as the nearest end, so no arithmetic on it overflows
     * (layout::clamp_offset in the Rust reader). */
    if (*out > ((tg_i128)1 << 64)) *out = (tg_i128)1 << 64;
    if (*out < -((tg_i128)1 << 64)) *out = -((tg_i128)1 << 64);
    return 0;
}

/* Reads a feed's status (the feed extension, seqlock): flags, last_alive,
 * source_watermark; 0 on success, -1 once `*budget` (attempts) is spent. */
static inline int tg__read_feed_status(const tg_reader *r, uint32_t feed, uint64_t out[3], uint32_t *budget) {
    const uint64_t *b = tg__ptr(r, r->feeds_offset + (uint64_t)feed * TG_FEED_LEN);
    return tg__seqlock_read(b + TG_F_STATE_STAMP, b + TG_F_FLAGS, 3, out, budget) & 1 ? -1 : 0;
}

/* A consistent copy of slot words 0..TG_S_USED (seqlock; word 0 the even
 * stamp); 0 on success, -1 once `*budget` (attempts) is spent. */
static inline int tg__read_slot(const tg_reader *r, uint32_t slot, uint64_t w[TG_S_USED], uint32_t *budget) {
    const uint64_t *s = tg__ptr(r, r->slots_offset + (uint64_t)slot * TG_SLOT_LEN);
    w[TG_S_STAMP] = tg__seqlock_read(s + TG_S_STAMP, s + 1, TG_S_USED - 1, w + 1, budget);
    return w[TG_S_STAMP] & 1 ? -1 : 0;
}

/* A slot read as `w` still answers for the name `h` was found by: the
 * (feed, instrument) it found, and a movable name not gone since. */
static inline int tg__handle_holds(const tg_handle *h, const uint64_t w[TG_S_USED]) {
    return w[TG_S_SYMBOL] == h->symbol && (w[TG_S_META] & TG_META_FEED_MASK) == (h->feed & 0xffffu) &&
           (!h->movable || w[TG_S_NAMES_LEFT] == h->names_left);
}

/* The newest entry of (feed, name) among directory entries [from, to):
 * its index, or -1. */
static inline long tg__newest_entry(const tg_reader *r, uint16_t feed, const uint64_t name[TG_NAME_LEN / 8],
                                    uint64_t from, uint64_t to) {
    uint64_t i;
    for (i = to; i-- > from;) {
        uint64_t e = r->directory_offset + i * TG_DIR_LEN;
        /* Relaxed (all): ordered by the Acquire load of directory_len. */
        uint64_t fs = tg__word(r, e, TG_D_FEED_SLOT);
        if ((uint16_t)(fs >> 32) == feed && tg__word(r, e, TG_D_NAME) == name[0] &&
            tg__word(r, e, TG_D_NAME + 1) == name[1] && tg__word(r, e, TG_D_NAME + 2) == name[2] &&
            tg__word(r, e, TG_D_NAME + 3) == name[3])
            return (long)i;
    }
    return -1;
}

/* directory_len, bounded by the directory's room. Acquire: pairs with the
 * writer's Release store in Publication::publish_entry(), so the entries
 * below it are complete. */
static inline uint64_t tg__directory_len(const tg_reader *r) {
    uint64_t n = __atomic_load_n(tg__ptr(r, 0) + TG_H_DIRECTORY_LEN, __ATOMIC_ACQUIRE);
    return n > 2 * r->capacity ? 2 * r->capacity : n;
}

/* The handle was looked up in the publication of the writer `r` maps. */
static inline int tg__handle_ours(const tg_reader *r, const tg_handle *h) {
    return h != NULL && h->slot < r->capacity && h->feed < r->feed_count && h->writer_pid == r->pid &&
           h->writer_start_time_ns == r->start_time_ns;
}

/* ------------------------------------------------------------------------ */
/* API. */

/* CLOCK_REALTIME in ns since the Unix epoch (the clock the writer stamps
 * with); 0 if the clock cannot be read. */
static inline uint64_t tg_now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Opens and maps the publication at `path` read-only, trusting only a file
 * owned by uid `owner` or root (see above). Returns 0, or an errno value:
 * from open/fstat/mmap (ENOENT, EACCES, ...), ELOOP for a symbolic link,
 * EPERM for a file that is not a regular file, has another owner or is
 * writable by group or others, EAGAIN when the writer has not made the file
 * ready yet (version 0), ENOTSUP for another layout version, EINVAL for a
 * file that is not a consistent publication or is shorter than its header
 * says. Whatever it returns, `r` is usable afterwards: a reader that failed
 * to open answers TG_STALE (tg_refresh tries again), and tg_close is safe. */
static inline int tg_open_owned(tg_reader *r, const char *path, uint64_t dead_after_ns, uid_t owner) {
    struct stat st;
    int fd, err;
    void *map;
    const uint64_t *h;
    uint64_t hw[16];
    unsigned char bytes[TG_HEADER_LEN];
    uint64_t len, feeds, capacity, dir_off, slots_off, file_len, version;
    size_t i;
    ssize_t got;

    memset(r, 0, sizeof *r);
    r->dead_after_ns = dead_after_ns;
    r->owner = (uint64_t)owner;
    r->open_health = TG_HEALTH_MISSING;
    r->open_error = EINVAL;
    if (path == NULL) return r->open_error;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        if (err == ELOOP) r->open_health = TG_HEALTH_UNTRUSTED;
        return r->open_error = err;
    }
    if (fstat(fd, &st) != 0) {
        err = errno;
        close(fd);
        return r->open_error = err;
    }
    r->dev = (uint64_t)st.st_dev;
    r->ino = (uint64_t)st.st_ino;
    if (!S_ISREG(st.st_mode) || (st.st_uid != owner && st.st_uid != 0) || (st.st_mode & 022) != 0) {
        close(fd);
        r->open_health = TG_HEALTH_UNTRUSTED;
        return r->open_error = EPERM;
    }
    r->open_health = TG_HEALTH_BAD_LAYOUT;
    /* The header, read before mapping: the file must be as long as it says. */
    got = pread(fd, bytes, sizeof bytes, 0);
    if (got != (ssize_t)sizeof bytes) {
        close(fd);
        return r->open_error = EINVAL;
    }
    for (i = 0; i < 16; i++) {
        size_t b;
        hw[i] = 0;
        for (b = 0; b < 8; b++) hw[i] |= (uint64_t)bytes[i * 8 + b] << (8 * b);
    }
    len = (uint64_t)st.st_size;
    feeds = hw[TG_H_FEED_COUNT];
    capacity = hw[TG_H_CAPACITY];
    r->found_version = hw[TG_H_VERSION];
    /* The version before the shape: another layout's shape differs. */
    if (hw[TG_H_MAGIC] == TG_MAGIC && hw[TG_H_VERSION] != TG_LAYOUT_VERSION) {
        close(fd);
#ifdef ENOTSUP
        return r->open_error = hw[TG_H_VERSION] == 0 ? EAGAIN : ENOTSUP;
#else
        return r->open_error = hw[TG_H_VERSION] == 0 ? EAGAIN : EINVAL;
#endif
    }
    /* Bounds first so the layout formula below cannot overflow; no writer
     * makes more than 65535 feeds (16-bit ids) or 2^24 slots, whatever
     * length a sparse file claims. */
    if (hw[TG_H_MAGIC] != TG_MAGIC || feeds > len / (TG_FEED_LEN + TG_DESC_TABLE_LEN) ||
        capacity > len / TG_SLOT_LEN || feeds > 0xffff || capacity > ((uint64_t)1 << 24) ||
        len > (uint64_t)SIZE_MAX) {
        close(fd);
        return r->open_error = EINVAL;
    }
    dir_off = tg__align(TG_HEADER_LEN + feeds * TG_FEED_LEN + feeds * TG_DESC_TABLE_LEN, 128);
    /* Each section within the file, or the sums below could wrap (the
     * bounds above hold each count alone, not their sum). */
    if (dir_off > len || capacity > (len - dir_off) / (2 * TG_DIR_LEN)) {
        close(fd);
        return r->open_error = EINVAL;
    }
    slots_off = tg__align(dir_off + 2 * capacity * TG_DIR_LEN, TG_PAGE);
    if (slots_off > len || capacity > (len - slots_off) / TG_SLOT_LEN) {
        close(fd);
        return r->open_error = EINVAL;
    }
    file_len = tg__align(slots_off + capacity * TG_SLOT_LEN, TG_PAGE);
    if (file_len > len || hw[TG_H_FILE_LEN] != file_len) {
        close(fd);
        return r->open_error = EINVAL;
    }
    map = mmap(NULL, (size_t)file_len, PROT_READ, MAP_SHARED, fd, 0);
    err = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) {
        r->open_health = TG_HEALTH_MISSING;
        return r->open_error = err;
    }
    r->base = (const unsigned char *)map;
    r->map_len = (size_t)file_len;
    h = tg__ptr(r, 0);

    /* The mapping holds the same file: only the header is read until its
     * words are checked against the shape read above. */
    /* Acquire: pairs with the writer's Release store of the version in
     * Publication::ready(), so the header fields and feed blocks read below
     * (Relaxed) are the ones it wrote. */
    version = __atomic_load_n(h + TG_H_VERSION, __ATOMIC_ACQUIRE);
    r->found_version = version;
    if (version != TG_LAYOUT_VERSION) {
#ifdef ENOTSUP
        err = version == 0 ? EAGAIN : ENOTSUP;
#else
        err = version == 0 ? EAGAIN : EINVAL;
#endif
        goto fail;
    }
    /* Relaxed (all header loads below): published by the version's Release. */
    if (__atomic_load_n(h + TG_H_MAGIC, __ATOMIC_RELAXED) != TG_MAGIC ||
        __atomic_load_n(h + TG_H_FEED_COUNT, __ATOMIC_RELAXED) != feeds ||
        __atomic_load_n(h + TG_H_CAPACITY, __ATOMIC_RELAXED) != capacity ||
        __atomic_load_n(h + TG_H_FILE_LEN, __ATOMIC_RELAXED) != file_len ||
        __atomic_load_n(h + TG_H_FEEDS_OFFSET, __ATOMIC_RELAXED) != TG_HEADER_LEN ||
        __atomic_load_n(h + TG_H_DIRECTORY_OFFSET, __ATOMIC_RELAXED) != dir_off ||
        __atomic_load_n(h + TG_H_SLOTS_OFFSET, __ATOMIC_RELAXED) != slots_off) {
        err = EINVAL;
        goto fail;
    }
    r->feed_count = feeds;
    r->capacity = capacity;
    r->feeds_offset = TG_HEADER_LEN;
    r->directory_offset = dir_off;
    r->slots_offset = slots_off;
    /* Relaxed: the writer's identity, published by the version's Release. */
    r->pid = __atomic_load_n(h + TG_H_WRITER_PID, __ATOMIC_RELAXED);
    r->start_time_ns = __atomic_load_n(h + TG_H_START_TIME, __ATOMIC_RELAXED);
    r->open_health = TG_HEALTH_OK;
    r->open_error = 0;
    return 0;

fail:
    munmap((void *)(uintptr_t)r->base, r->map_len);
    r->base = NULL;
    r->map_len = 0;
    r->open_health = TG_HEALTH_BAD_LAYOUT;
    return r->open_error = err;
}

/* tg_open_owned with the reader's effective uid as the expected owner. */
static inline int tg_open(tg_reader *r, const char *path, uint64_t dead_after_ns) {
    return tg_open_owned(r, path, dead_after_ns, geteuid());
}

/* Unmaps. The reader then answers TG_STALE; calling it twice is harmless. */
static inline void tg_close(tg_reader *r) {
    if (r == NULL) return;
    if (r->base != NULL) munmap((void *)(uintptr_t)r->base, r->map_len);
    r->base = NULL;
    r->map_len = 0;
    r->open_health = TG_HEALTH_MISSING;
    r->open_error = EBADF;
}

/* Re-opens `path` if the file there is not the one mapped (a restarted
 * writer creates a new file) or the reader is not mapped. Makes system calls:
 * call it when tg_health is not TG_HEALTH_OK, not before every check. Handles
 * from before a re-map must be looked up again (tg_check answers them
 * TG_STALE when the writer changed). Returns 1 if it re-opened
 * (see tg_health for the outcome), 0 if the mapped file is still current. */
static inline int tg_refresh(tg_reader *r, const char *path) {
    struct stat st;
    uint64_t dead_after_ns = r->dead_after_ns;
    uid_t owner = (uid_t)r->owner;
    if (r->base != NULL && path != NULL && lstat(path, &st) == 0 && (uint64_t)st.st_dev == r->dev &&
        (uint64_t)st.st_ino == r->ino)
        return 0;
    tg_close(r);
    tg_open_owned(r, path, dead_after_ns, owner);
    return 1;
}

/* The writer's health at local time `now_ns` (CLOCK_REALTIME ns). */
static inline uint32_t tg_health(const tg_reader *r, uint64_t now_ns) {
    return tg__writer_health(r, now_ns);
}

static inline const char *tg_health_name(uint32_t health) {
    switch (health) {
    case TG_HEALTH_OK: return "writer alive";
    case TG_HEALTH_MISSING: return "no publication";
    case TG_HEALTH_BAD_LAYOUT: return "unusable publication (not ready, not this layout, or its state word truncated or overwritten)";
    case TG_HEALTH_WRITER_DEAD: return "writer dead: heartbeat too old";
    case TG_HEALTH_WRITER_CLOSED: return "writer closed the publication";
    case TG_HEALTH_WRITER_RESTARTED: return "writer restarted: reopen";
    case TG_HEALTH_UNTRUSTED: return "untrusted publication (symlink, not a regular file, wrong owner, or writable by group or others)";
    case TG_HEALTH_WRITER_AHEAD: return "writer time ahead of this clock: forged, or the clock stepped back";
    default: return "unknown";
    }
}

/* Finds (feed, symbol): 0 and *out filled (untouched on -1), or -1 if the feed is unknown, the
 * symbol is not valid, or the writer has not seen it yet (look it up again
 * later); also for a movable entry naming a slot past the file's, or when
 * the directory grew in each of TG_MAX_RETRIES rounds (look it up again).
 * Scans the directory: do it once, not per check. Does not check the
 * writer's health (tg_check does). Found by a name that may move (an MDP3
 * Symbol), the handle answers TG_NO_QUOTE once the name is entered for
 * another instrument or withdrawn (a definition moved or deleted it): look
 * it up again to follow the name. Found by one that never moves (SQF, ITCH,
 * an MDP3 "#SecurityID"), it always answers for its slot. */
static inline int tg_lookup(const tg_reader *r, const char *feed, const char *symbol, tg_handle *out) {
    long f, found = -1, at;
    uint64_t n, scanned = 0, name[TG_NAME_LEN / 8];
    uint32_t tries;
    size_t len, b;
    tg_handle h;
    if (r == NULL || r->base == NULL || out == NULL || symbol == NULL) return -1;
    f = tg__feed_id(r, feed);
    if (f < 0) return -1;
    /* The name as the directory holds it: NUL padded words. */
    len = strlen(symbol);
    if (len == 0 || len > TG_NAME_LEN) return -1;
    memset(name, 0, sizeof name);
    for (b = 0; b < len; b++) name[b / 8] |= (uint64_t)(unsigned char)symbol[b] << (8 * (b % 8));
    /* Bounded as every seqlock read is: a live writer only appends, so
     * each round sees new entries, and a file changed under the reader by
     * other hands cannot keep it here. */
    for (tries = TG_MAX_RETRIES; tries > 0; tries--) {
        uint64_t e, fs;
        n = tg__directory_len(r);
        /* The last entry of a name is in force. Each entry is looked at
         * once: a length that went back (a file changed by other hands)
         * rescans nothing. */
        at = tg__newest_entry(r, (uint16_t)f, name, scanned < n ? scanned : n, n);
        if (at >= 0) found = at;
        if (n > scanned) scanned = n;
        if (found < 0) return -1;
        e = r->directory_offset + (uint64_t)found * TG_DIR_LEN;
        fs = tg__word(r, e, TG_D_FEED_SLOT);
        memset(&h, 0, sizeof h); /* padding too: a handle may be compared whole */
        h.feed = (uint32_t)f;
        h.slot = (uint32_t)fs;
        h.symbol = tg__word(r, e, TG_D_KEY);
        h.writer_pid = r->pid;
        h.writer_start_time_ns = r->start_time_ns;
        h.movable = (fs & TG_D_MOVABLE) != 0;
        /* As the Rust reader: a key that is not a symbol (a name withdrawn)
         * has no handle. */
        if (!tg__symbol_key_valid(h.symbol)) return -1;
        if (!h.movable) {
            *out = h;
            return 0;
        }
        if (h.slot >= r->capacity) return -1; /* forged: no count to read */
        /* The count the slot has now, then the directory again: the writer
         * publishes an entry moving the name before it counts the move in
         * the slot it left, so a count that includes a move away is read
         * with that entry visible (and scanned next round); one from before
         * it is what tg_check will find grown. Acquire: pairs with the
         * Release fence of the writer's seqlock write of the count. */
        h.names_left = __atomic_load_n(
            tg__ptr(r, r->slots_offset + (uint64_t)h.slot * TG_SLOT_LEN) + TG_S_NAMES_LEFT, __ATOMIC_ACQUIRE);
        if (tg__directory_len(r) == n) {
            *out = h;
            return 0;
        }
        /* Entries came meanwhile: the newer ones decide. */
    }
    return -1;
}

/* The verdict for a looked-up symbol at local time `now_ns` (CLOCK_REALTIME
 * ns, see tg_now_ns): reason bits, 0 = ok; TG_STALE when the writer is not
 * healthy. `version_out` (may be NULL) gets the slot's change counter at the
 * read (even, grows on every write to the symbol's slot: book, flags,
 * liveness, sequence, thresholds; 0 when no slot was read). Just before sending, check again: send if that answer
 * is 0 and its version is this one (the feed's own flags, which every packet
 * of an exchange feed rewrites with its times, are in the answer, not in the
 * version). */
static inline uint32_t tg_check(const tg_reader *r, const tg_handle *h, uint64_t now_ns, uint64_t *version_out) {
    uint64_t w[TG_S_USED], feed[3], alive, source, offset_stamp;
    const uint64_t *stamp, *offset_words;
    tg_i128 offset, now;
    uint32_t reasons = 0, budget;
    uint64_t meta;
    if (version_out != NULL) *version_out = 0;
    if (tg__writer_health(r, now_ns) != TG_HEALTH_OK) return TG_STALE;
    /* Not from this reader's writer: its feeds' order and slots are another's. */
    if (!tg__handle_ours(r, h)) return TG_STALE;
    /* The slot, then the feed's offset and status, then the slot's and the
     * offset's stamps again: unchanged, all three were in force together
     * when the status was read, a state the writer passed through (a writer
     * clearing `suspect` after the books it waited for cannot pair the old
     * book with the new flag; one moving the offset publishes it on the
     * side that leaves every state it passes through at least as old at the
     * source as the last). One budget of attempts for the whole check. As
     * Reader::check. */
    stamp = tg__ptr(r, r->slots_offset + (uint64_t)h->slot * TG_SLOT_LEN);
    offset_words = tg__ptr(r, r->feeds_offset + (uint64_t)h->feed * TG_FEED_LEN);
    for (budget = TG_MAX_RETRIES;; budget--) {
        if (budget == 0) return TG_STALE;
        if (tg__read_slot(r, h->slot, w, &budget) != 0) return TG_STALE;
        if (tg__read_offset(r, h->feed, &offset, &offset_stamp, &budget) != 0) return TG_STALE;
        if (tg__read_feed_status(r, h->feed, feed, &budget) != 0) return TG_STALE;
        /* Acquire fence: keeps the loads above before the stamps' re-loads. */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        /* Relaxed: ordered by the fence above. */
        if (__atomic_load_n(stamp + TG_S_STAMP, __ATOMIC_RELAXED) == w[TG_S_STAMP] &&
            __atomic_load_n(offset_words + TG_F_OFFSET_STAMP, __ATOMIC_RELAXED) == offset_stamp)
            break;
        tg__spin_hint();
    }
    if (version_out != NULL) *version_out = w[TG_S_STAMP];
    meta = w[TG_S_META];
    if (!tg__handle_holds(h, w)) return TG_NO_QUOTE;
    /* status::verdict() in crates/reader/src/status.rs, i.e. verdict::reasons() of the
     * slot's and the feed's inputs: differences in 128 bits, strict `>`. */
    if ((meta & (TG_META_HAS_BID | TG_META_HAS_ASK)) == 0) return TG_NO_QUOTE;
    now = (tg_i128)now_ns;
    alive = w[TG_S_LAST_ALIVE] > feed[1] ? w[TG_S_LAST_ALIVE] : feed[1];
    /* The slot's source time counts with its price only (as status::verdict). */
    source = (meta & TG_META_HAS_PRICE) ? w[TG_S_SOURCE_TIME] : 0;
    if (feed[2] > source) source = feed[2];
    if (now - (tg_i128)alive > (tg_i128)w[TG_S_STALE_NS] ||
        (tg_i128)alive - now > (tg_i128)TG_MAX_AHEAD_NS)
        reasons |= TG_STALE;
    if (now - (tg_i128)source - offset > (tg_i128)w[TG_S_SOURCE_NS]) reasons |= TG_STALE_AT_SOURCE;
    if ((meta & TG_META_SUSPECT) || (feed[0] & TG_FEED_SUSPECT)) reasons |= TG_SUSPECT;
    if (meta & TG_META_INVALID) reasons |= TG_INVALID_PRICE;
    if (meta & TG_META_HALTED) reasons |= TG_HALTED;
    if ((meta & TG_META_CLOSED) || (feed[0] & TG_FEED_CLOSED)) reasons |= TG_CLOSED;
    return reasons;
}

/* A price word as `meta`'s format says. */
static inline tg_price tg__price(uint64_t meta, uint64_t word) {
    tg_price p;
    memset(&p, 0, sizeof p);
    p.format = (uint32_t)((meta >> TG_META_FORMAT_SHIFT) & 0xff);
    if (p.format == TG_PRICE_DECIMAL) {
        int32_t e;
        double scale = 1.0;
        p.mantissa = (int64_t)word;
        p.exponent = (int8_t)(uint8_t)(meta >> TG_META_EXPONENT_SHIFT);
        for (e = p.exponent < 0 ? -p.exponent : p.exponent; e > 0; e--) scale *= 10.0;
        p.value = p.exponent < 0 ? (double)p.mantissa / scale : (double)p.mantissa * scale;
    } else {
        memcpy(&p.value, &word, sizeof p.value);
    }
    return p;
}

/* The book top of a looked-up symbol, exactly as published (one consistent
 * read of its slot): 0, or -1 when the reader is not mapped, the handle is not
 * from it, the slot holds another (feed, symbol), the movable name it was
 * found by has left the slot, or it stayed mid-update.
 * Does not check the writer's health (tg_check does). A read of its own: a
 * write since the tg_check it follows may hold a book no check judged (a
 * crossed one where the check answered ok), so price from it only when
 * out->version is the version tg_check gave, else check again. */
static inline int tg_read_quote(const tg_reader *r, const tg_handle *h, tg_quote *out) {
    uint64_t w[TG_S_USED], meta;
    uint32_t budget = TG_MAX_RETRIES;
    if (r == NULL || r->base == NULL || out == NULL || !tg__handle_ours(r, h)) return -1;
    if (tg__read_slot(r, h->slot, w, &budget) != 0) return -1;
    meta = w[TG_S_META];
    if (!tg__handle_holds(h, w)) return -1;
    memset(out, 0, sizeof *out);
    out->has_bid = (meta & TG_META_HAS_BID) != 0;
    out->has_ask = (meta & TG_META_HAS_ASK) != 0;
    if (out->has_bid) {
        out->bid = tg__price(meta, w[TG_S_BID]);
        out->bid_size = w[TG_S_BID_SIZE];
    }
    if (out->has_ask) {
        out->ask = tg__price(meta, w[TG_S_ASK]);
        out->ask_size = w[TG_S_ASK_SIZE];
    }
    out->halted = (meta & TG_META_HALTED) != 0;
    out->closed = (meta & TG_META_CLOSED) != 0;
    out->last_seq = w[TG_S_LAST_SEQ];
    out->version = w[TG_S_STAMP];
    return 0;
}

/* Writes a price as the Rust `Price` displays it into buf (NUL terminated
 * when len > 0): a decimal exactly, without trailing zeros after the point
 * (mantissa 1234500, exponent -4: "123.45"); a double with "%.17g" (reads
 * back to the same double; Rust prints the shortest such text). A decimal
 * exponent outside -128..=127 (the file's int8: only a price built by the
 * caller has one) writes "nan". Returns the length the full text needs;
 * TG_PRICE_TEXT_LEN bytes always suffice. */
#define TG_PRICE_TEXT_LEN 160
static inline size_t tg_price_format(const tg_price *p, char *buf, size_t len) {
    char digits[136], text[TG_PRICE_TEXT_LEN];
    size_t n = 0, nd = 0, i;
    uint64_t m;
    int point;
    if (p->format == TG_PRICE_DECIMAL && (p->exponent < -128 || p->exponent > 127)) {
        n = (size_t)snprintf(text, sizeof text, "nan");
    } else if (p->format != TG_PRICE_DECIMAL) {
        int k = snprintf(text, sizeof text, "%.17g", p->value);
        n = k < 0 ? 0 : (size_t)k;
    } else {
        m = p->mantissa < 0 ? (uint64_t)0 - (uint64_t)p->mantissa : (uint64_t)p->mantissa;
        do {
            digits[nd++] = (char)('0' + m % 10);
            m /= 10;
        } while (m != 0); /* least significant first */
        if (p->mantissa < 0) text[n++] = '-';
        if (p->exponent >= 0) {
            for (i = nd; i > 0; i--) text[n++] = digits[i - 1];
            if (p->mantissa != 0)
                for (i = 0; i < (size_t)p->exponent; i++) text[n++] = '0';
        } else {
            point = -p->exponent;
            while (nd <= (size_t)point) digits[nd++] = '0'; /* at least one integer digit */
            for (i = nd; i > (size_t)point; i--) text[n++] = digits[i - 1];
            for (i = 0; i < (size_t)point && digits[i] == '0'; i++) {
            } /* trailing zeros of the fraction */
            if (i < (size_t)point) {
                size_t last = i;
                text[n++] = '.';
                for (i = (size_t)point; i > last; i--) text[n++] = digits[i - 1];
            }
        }
    }
    for (i = 0; i < n && i + 1 < len; i++) buf[i] = text[i];
    if (len > 0) buf[n < len ? n : len - 1] = '\0';
    return n;
}

/* ------------------------------------------------------------------------ */
/* Counters, as the publication describes them. */

/* One counter descriptor, decoded (strings NUL terminated, not sanitized:
 * they came from the file). */
typedef struct tg_counter {
    uint32_t id;    /* counter id holding the value */
    uint32_t kind;  /* TG_KIND_* */
    uint32_t width; /* counters the value spans (text) */
    uint64_t param; /* bucket bound (ns), flag bit, reason index */
    char name[33];
    char metric[65];
    char key[17];
    char value[65];
    char note[65];
} tg_counter;

/* The word of the feed block that holds counter `id`, or -1 if none. */
static inline int tg__counter_word(uint32_t id) {
    if (id < 32) return TG_F_COUNTERS + (int)id;
    if (id < 45) return TG_F_MORE_COUNTERS + (int)(id - 32);
    if (id >= 64 && id < TG_COUNTER_IDS) return TG_F_EXT_COUNTERS + (int)(id - 64);
    return -1;
}

/* How many counter descriptors feed `feed` has (0 for an unknown feed or a
 * table not where the layout puts it). */
static inline uint32_t tg_counter_count(const tg_reader *r, uint32_t feed) {
    uint64_t block, n;
    if (r == NULL || r->base == NULL || feed >= r->feed_count) return 0;
    block = r->feeds_offset + (uint64_t)feed * TG_FEED_LEN;
    /* Relaxed: written before the version store, published by its Release. */
    if (tg__word(r, block, TG_F_DESC_OFFSET) !=
        r->feeds_offset + r->feed_count * TG_FEED_LEN + (uint64_t)feed * TG_DESC_TABLE_LEN)
        return 0;
    n = tg__word(r, block, TG_F_DESC_COUNT);
    return (uint32_t)(n < TG_MAX_DESCRIPTORS ? n : TG_MAX_DESCRIPTORS);
}

static inline void tg__desc_text(const unsigned char *b, size_t from, size_t to, char *out) {
    size_t i, n = 0;
    for (i = from; i < to && b[i] != 0; i++) out[n++] = (char)b[i];
    out[n] = '\0';
}

/* Descriptor `index` of feed `feed`: 0 and *out filled, or -1 (no such
 * descriptor, a kind this header does not know, an id outside the block). */
static inline int tg_counter_describe(const tg_reader *r, uint32_t feed, uint32_t index, tg_counter *out) {
    unsigned char b[TG_DESC_LEN];
    uint64_t at;
    size_t i;
    if (out == NULL || index >= tg_counter_count(r, feed)) return -1;
    at = r->feeds_offset + r->feed_count * TG_FEED_LEN + (uint64_t)feed * TG_DESC_TABLE_LEN +
         (uint64_t)index * TG_DESC_LEN;
    for (i = 0; i < TG_DESC_LEN / 8; i++) {
        /* Relaxed: written before the version store, published by its Release. */
        uint64_t w = tg__word(r, at, i);
        size_t k;
        for (k = 0; k < 8; k++) b[i * 8 + k] = (unsigned char)(w >> (8 * k));
    }
    memset(out, 0, sizeof *out);
    out->id = (uint32_t)b[0] | (uint32_t)b[1] << 8;
    out->kind = b[2];
    out->width = b[3];
    for (i = 0; i < 8; i++) out->param |= (uint64_t)b[8 + i] << (8 * i);
    if (out->kind < TG_KIND_COUNTER || out->kind > TG_KIND_FLAG || out->width == 0 ||
        out->id + out->width > TG_COUNTER_IDS)
        return -1;
    tg__desc_text(b, 16, 48, out->name);
    tg__desc_text(b, 48, 112, out->metric);
    tg__desc_text(b, 112, 128, out->key);
    tg__desc_text(b, 128, 192, out->value);
    tg__desc_text(b, 192, 256, out->note);
    return 0;
}

/* One consistent copy of every counter of feed `feed` (values[id], ids
 * without a word 0), as the writer published them at one heartbeat, and
 * the feed's status flags into *flags (may be NULL); 0, or -1 after
 * TG_MAX_RETRIES inconsistent attempts or for an unknown feed. */
static inline int tg_read_counters(const tg_reader *r, uint32_t feed, uint64_t values[TG_COUNTER_IDS], uint64_t *flags) {
    const uint64_t *b;
    uint64_t words[TG_FEED_LEN / 8] = {0}, st[3];
    uint32_t id, budget = TG_MAX_RETRIES;
    if (r == NULL || r->base == NULL || feed >= r->feed_count || values == NULL) return -1;
    b = tg__ptr(r, r->feeds_offset + (uint64_t)feed * TG_FEED_LEN);
    /* The counters stamp covers every counter word of the block (19..128;
     * the status words among them have their own stamp and are read below). */
    if (tg__seqlock_read(b + TG_F_COUNTERS_STAMP, b + TG_F_MORE_COUNTERS, TG_FEED_LEN / 8 - TG_F_MORE_COUNTERS,
                         words + TG_F_MORE_COUNTERS, &budget) & 1)
        return -1;
    for (id = 0; id < TG_COUNTER_IDS; id++) {
        int w = tg__counter_word(id);
        values[id] = w < 0 ? 0 : words[w];
    }
    if (flags != NULL) {
        if (tg__read_feed_status(r, feed, st, &budget) != 0) return -1;
        *flags = st[0];
    }
    return 0;
}

/* A counter's value in a tg_read_counters copy: the counter, or a flag's bit
 * (0 or 1) of `flags`; 0 for text. */
static inline uint64_t tg_counter_value(const tg_counter *c, const uint64_t values[TG_COUNTER_IDS], uint64_t flags) {
    if (c->kind == TG_KIND_FLAG) return (flags >> (c->param < 63 ? c->param : 63)) & 1;
    if (c->kind == TG_KIND_TEXT || c->id >= TG_COUNTER_IDS) return 0;
    return values[c->id];
}

/* A text counter's bytes (up to the first NUL, trailing ASCII whitespace dropped) into
 * buf, NUL terminated when len > 0; returns the length the text needs. Bytes
 * off the network: sanitize before printing to a terminal. */
static inline size_t tg_counter_text(const tg_counter *c, const uint64_t values[TG_COUNTER_IDS], char *buf, size_t len) {
    size_t n = 0, i;
    uint32_t w;
    char text[8 * 255];
    if (c->kind == TG_KIND_TEXT) {
        for (w = 0; w < c->width && c->id + w < TG_COUNTER_IDS; w++) {
            for (i = 0; i < 8; i++) {
                char ch = (char)(values[c->id + w] >> (8 * i));
                if (ch == 0) goto done;
                text[n++] = ch;
            }
        }
    }
done:
    /* Trailing ASCII whitespace dropped (space, tab, LF, FF, CR), as the
     * Rust reader's Descriptor::text drops it. */
    while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n' ||
                     text[n - 1] == '\f' || text[n - 1] == '\r'))
        n--;
    for (i = 0; i < n && i + 1 < len; i++) buf[i] = text[i];
    if (len > 0) buf[n < len ? n : len - 1] = '\0';
    return n;
}

/* Looks up and checks in one call: TG_STALE when the writer is not healthy,
 * TG_NO_QUOTE for a feed or symbol the writer has not seen. Scans the
 * directory on every call: prefer tg_lookup once and tg_check. */
static inline uint32_t tg_check_symbol(const tg_reader *r, const char *feed, const char *symbol, uint64_t now_ns) {
    tg_handle h;
    if (tg__writer_health(r, now_ns) != TG_HEALTH_OK) return TG_STALE;
    if (tg_lookup(r, feed, symbol, &h) != 0) return TG_NO_QUOTE;
    return tg_check(r, &h, now_ns, NULL);
}

/* The name of one reason bit ("no_quote", ...); "ok" for 0; "unknown" for
 * anything else. */
static inline const char *tg_reason_name(uint32_t bit) {
    switch (bit) {
    case 0: return "ok";
    case TG_NO_QUOTE: return "no_quote";
    case TG_STALE: return "stale";
    case TG_STALE_AT_SOURCE: return "stale_at_source";
    case TG_SUSPECT: return "suspect";
    case TG_INVALID_PRICE: return "invalid_price";
    case TG_HALTED: return "halted";
    case TG_CLOSED: return "closed";
    default: return "unknown";
    }
}

/* Writes the reasons as the Rust reader displays them ("ok", or names in
 * report order joined by '|', e.g. "stale|suspect") into buf (always NUL
 * terminated when len > 0). Returns the length the full text needs;
 * TG_REASONS_TEXT_LEN bytes always suffice (every reason and "unknown" for
 * bits past them: 74 and the NUL). */
#define TG_REASONS_TEXT_LEN 80
static inline size_t tg_reasons_format(uint32_t reasons, char *buf, size_t len) {
    size_t need = 0;
    uint32_t bit;
    const char *parts[9];
    size_t nparts = 0, i;
    if (reasons == 0) parts[nparts++] = "ok";
    for (bit = 1; bit <= TG_CLOSED; bit <<= 1)
        if (reasons & bit) parts[nparts++] = tg_reason_name(bit);
    if ((reasons & ~TG_ALL_REASONS) != 0) parts[nparts++] = "unknown";
    for (i = 0; i < nparts; i++) {
        const char *p = parts[i];
        if (i > 0) {
            if (need + 1 < len) buf[need] = '|';
            need++;
        }
        while (*p) {
            if (need + 1 < len) buf[need] = *p;
            need++;
            p++;
        }
    }
    if (len > 0) buf[need < len ? need : len - 1] = '\0';
    return need;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TICKGUARD_H */
