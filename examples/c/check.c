/*
 * check — one pre-trade check against a running tickguard sidecar, through
 * the header-only C reader (include/tickguard.h).
 *
 *     cc -std=c99 -Wall -Wextra -O2 -Iinclude -o check examples/c/check.c
 *     ./check /dev/shm/tickguard lp1 EURUSD [DEAD_AFTER_MS [OWNER_UID]]
 *
 * Prints "ok" or "rejected: REASON|REASON..." (the Rust reader's names and
 * order), then "version: N" when a slot was read, then the book top as
 * published: "bid: PRICE SIZE" and "ask: PRICE SIZE" for each side there is
 * (prices exact; sizes as published: an SQF feed has none, 0) and
 * "halted" when trading is halted, "closed" when the symbol's own flag says
 * closed (an MDP3 instrument's status, or its deletion by the venue; a
 * whole feed's close is a reason only),
 * of the same version of the slot as the verdict (none when no read of the
 * top matched one of the verdict in PAIR_TRIES tries).
 * Why the writer is not
 * trusted, if it is not, goes to stderr. DEAD_AFTER_MS bounds the writer
 * heartbeat's age (default 100). OWNER_UID is the user that must own the
 * file (default: this user; root is always accepted).
 *
 * Exit status: 0 ok, 1 rejected, 2 usage error.
 */
#include "tickguard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* Tries at pairing a verdict with the book top it judged before giving up
 * on the top (a symbol changing all the time). */
#define PAIR_TRIES 100

/* The verdict of h at now and, in *quote (*have_quote 1), the book top of
 * the same version of the slot: the top is a read of its own, after the
 * check's, and a write between the two may hold a book no check judged
 * (crossed, say, where the check answered ok), so a top of another version
 * is checked again. None alike in PAIR_TRIES tries: the last verdict, no
 * top. */
static uint32_t check_with_top(const tg_reader *r, const tg_handle *h, uint64_t now, uint64_t *version,
                               tg_quote *quote, int *have_quote) {
    uint32_t reasons = 0;
    int i;
    *have_quote = 0;
    for (i = 0; i < PAIR_TRIES; i++) {
        reasons = tg_check(r, h, now, version);
        if (*version == 0) return reasons; /* no slot read: no top */
        if (tg_read_quote(r, h, quote) == 0 && quote->version == *version) {
            *have_quote = 1;
            return reasons;
        }
    }
    return reasons;
}

static int usage(void) {
    fprintf(stderr, "usage: check SHM_PATH FEED SYMBOL [DEAD_AFTER_MS [OWNER_UID]]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *path, *feed, *symbol;
    uint64_t dead_after_ns = TG_DEFAULT_DEAD_AFTER_NS, now, version = 0;
    uint32_t reasons, health;
    tg_reader reader;
    tg_handle handle;
    tg_quote quote;
    int have_quote = 0;
    char text[TG_REASONS_TEXT_LEN], price[TG_PRICE_TEXT_LEN];
    int err;
    uid_t owner = geteuid();

    if (argc < 4 || argc > 6) return usage();
    path = argv[1];
    feed = argv[2];
    symbol = argv[3];
    if (argc >= 5) {
        char *end = NULL;
        unsigned long long ms;
        errno = 0;
        ms = strtoull(argv[4], &end, 10);
        if (errno != 0 || end == argv[4] || *end != '\0' || argv[4][0] == '-' ||
            ms > UINT64_MAX / 1000000u) {
            fprintf(stderr, "check: DEAD_AFTER_MS must be a number of milliseconds, got '%s'\n", argv[4]);
            return usage();
        }
        dead_after_ns = (uint64_t)ms * 1000000u;
    }
    if (argc == 6) {
        char *end = NULL;
        unsigned long uid;
        errno = 0;
        uid = strtoul(argv[5], &end, 10);
        if (errno != 0 || end == argv[5] || *end != '\0' || argv[5][0] == '-' || uid != (unsigned long)(uid_t)uid) {
            fprintf(stderr, "check: OWNER_UID must be a uid, got '%s'\n", argv[5]);
            return usage();
        }
        owner = (uid_t)uid;
    }

    /* A reader that failed to open still answers: stale. */
    err = tg_open_owned(&reader, path, dead_after_ns, owner);
    if (err == ENOTSUP)
        fprintf(stderr, "check: %s: layout version %" PRIu64 ", expected %u\n", path, reader.found_version,
                TG_LAYOUT_VERSION);
    else if (err != 0)
        fprintf(stderr, "check: %s: %s\n", path, strerror(err));

    now = tg_now_ns();
    if (tg_lookup(&reader, feed, symbol, &handle) == 0) {
        reasons = check_with_top(&reader, &handle, now, &version, &quote, &have_quote);
    } else
        reasons = tg_check_symbol(&reader, feed, symbol, now); /* no_quote, or stale */

    health = tg_health(&reader, now);
    if (health != TG_HEALTH_OK) fprintf(stderr, "check: %s\n", tg_health_name(health));

    tg_reasons_format(reasons, text, sizeof text);
    if (reasons == 0)
        printf("ok\n");
    else
        printf("rejected: %s\n", text);
    if (version != 0) printf("version: %" PRIu64 "\n", version);
    if (have_quote && quote.has_bid) {
        tg_price_format(&quote.bid, price, sizeof price);
        printf("bid: %s %" PRIu64 "\n", price, quote.bid_size);
    }
    if (have_quote && quote.has_ask) {
        tg_price_format(&quote.ask, price, sizeof price);
        printf("ask: %s %" PRIu64 "\n", price, quote.ask_size);
    }
    if (have_quote && quote.halted) printf("halted\n");
    if (have_quote && quote.closed) printf("closed\n");

    tg_close(&reader);
    return reasons == 0 ? 0 : 1;
}
