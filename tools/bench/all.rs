//! `all`: every row, each in its own process (so one row's sockets, threads
//! and memory never disturb the next), then the table: BENCHMARKS.json and a
//! Markdown table on stdout.

use crate::harness::BadFlag;
use anyhow::Context;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the JSON.
    #[arg(long, default_value = "BENCHMARKS.json")]
    json: PathBuf,
    /// Seconds of soak (1 to 86,400), checked before any row runs.
    #[arg(long, default_value_t = 60)]
    soak_seconds: u64,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn machine() -> Value {
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "kernel": read("/proc/sys/kernel/osrelease"),
        "memory_kib": read("/proc/meminfo").lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()),
    })
}

fn row(args: &[&str]) -> anyhow::Result<Value> {
    let exe = std::env::current_exe()?;
    eprintln!("== tickguard-bench {}", args.join(" "));
    let out = std::process::Command::new(&exe)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    anyhow::ensure!(out.status.success(), "row {args:?} failed: {}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("");
    serde_json::from_str(last).with_context(|| format!("row {args:?} printed no JSON: {text}"))
}

fn ns(v: &Value) -> String {
    v.as_f64().map_or("–".into(), |x| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.1}")
        }
    })
}

fn rate(v: &Value) -> String {
    v.as_f64()
        .map_or("–".into(), |x| format!("{:.2} M", x / 1e6))
}

/// Flags of `table`.
#[derive(clap::Args)]
pub struct TableArgs {
    /// The JSON `all` wrote.
    #[arg(default_value = "BENCHMARKS.json")]
    json: PathBuf,
}

/// Prints the table of an existing BENCHMARKS.json (and no JSON line:
/// `Value::Null`).
pub fn print_table(a: &TableArgs) -> anyhow::Result<Value> {
    let shown = a.json.display();
    let r: Value = match std::fs::read(&a.json).map(|b| serde_json::from_slice(&b)) {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            return Err(BadFlag::new(format!("{shown} is not a BENCHMARKS.json: {e}")).into())
        }
        Err(e) => return Err(BadFlag::new(format!("{shown}: {e}")).into()),
    };
    println!("{}", table(&r));
    Ok(Value::Null)
}

/// Runs every row, writes their JSON to `--json` and prints the table
/// (and no JSON line: `Value::Null`).
pub fn run(a: &Args) -> anyhow::Result<Value> {
    // The soak row checks it too, but only once the rows before it ran.
    crate::harness::within("--soak-seconds", a.soak_seconds, 1..=86_400)?;
    // Where the rows go, before the minutes they take: a path that cannot
    // be written would lose them all at the end.
    let existed = a.json.symlink_metadata().is_ok();
    if let Err(e) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&a.json)
    {
        return Err(BadFlag::new(format!("--json {}: {e}", a.json.display())).into());
    }
    if !existed {
        // (Made to try: not left empty should a row fail.)
        let _ = std::fs::remove_file(&a.json);
    }
    let soak = a.soak_seconds.to_string();
    let rows = json!({
        "machine": machine(),
        "replay_throughput": row(&["replay-throughput"])?,
        "decode_apply": row(&["decode-apply"])?,
        "live": row(&["live"])?,
        "tick_to_publish": row(&["tick-to-publish"])?,
        "check_latency": row(&["check-latency"])?,
        "memory": row(&["memory"])?,
        "soak": row(&["soak", "--seconds", &soak])?,
        "itch_apply": row(&["itch-apply"])?,
        "itch_binfile": row(&["itch-binfile"])?,
        "itch_capture": row(&["itch-capture"])?,
        "itch_memory": row(&["itch-memory"])?,
        "itch_live_drain": row(&["itch-live-drain"])?,
        "itch_recovery_latency": row(&["itch-recovery-latency"])?,
        "itch_check_latency": row(&["itch-check-latency"])?,
        "itch_glimpse_restart": row(&["itch-glimpse-restart"])?,
        "mdp3_capture": row(&["mdp3-capture"])?,
        "mdp3_apply": row(&["mdp3-apply"])?,
        "mdp3_memory": row(&["mdp3-memory"])?,
        "mdp3_live_drain": row(&["mdp3-live-drain"])?,
        "mdp3_check": row(&["mdp3-check"])?,
        "mdp3_heal_time": row(&["mdp3-heal-time"])?,
    });
    std::fs::write(&a.json, serde_json::to_string_pretty(&rows)? + "\n")
        .with_context(|| format!("writing {}", a.json.display()))?;
    println!("{}", table(&rows));
    Ok(Value::Null)
}

/// The Markdown table of a BENCHMARKS.json value.
pub fn table(r: &Value) -> String {
    let mut t = String::new();
    let m = &r["machine"];
    t.push_str(&format!(
        "Machine: {} cores, {}, Linux {}.\n\n| row | measured | reference in the same run | ratio | target |\n|---|---|---|---|---|\n",
        m["cores"], m["cpu"].as_str().unwrap_or("?"), m["kernel"].as_str().unwrap_or("?")
    ));
    let rt = &r["replay_throughput"];
    t.push_str(&format!(
        "| replay throughput ({} messages, {} symbols) | {} messages/s end to end | {} messages/s only reading the capture | {:.2} | ratio ≥ 0.7, ≥ 50 M/s |\n",
        rt["messages"], rt["symbols"], rate(&rt["replay_messages_per_s"]), rate(&rt["ceiling_messages_per_s"]), rt["ratio"].as_f64().unwrap_or(0.0)
    ));
    for d in r["decode_apply"]["per_message"]
        .as_array()
        .into_iter()
        .flatten()
    {
        t.push_str(&format!(
            "| decode + apply, {} symbols | {} ns/message (decode alone {}) | floor {} ns/message | {:.1}× floor | ≤ {} ns |\n",
            d["symbols"], ns(&d["decode_apply_ns"]), ns(&d["decode_ns"]), ns(&d["floor_ns"]), d["decode_apply_over_floor"].as_f64().unwrap_or(0.0), d["target_ns"]
        ));
    }
    let dr = &r["live"]["drain"];
    t.push_str(&format!(
        "| live receive: drain of a pre-filled queue | {} datagrams/s (10 messages each), {} lost | bare recvmmsg {} /s; naive tokio + Mutex<HashMap> {} /s | {:.2} of bare; {:.1}× naive | ≥ 0.9 of bare |\n",
        rate(&dr["tickguard_datagrams_per_s"]), dr["ticks_lost"], rate(&dr["bare_recvmmsg_datagrams_per_s"]), rate(&dr["naive_tokio_datagrams_per_s"]),
        dr["ratio"].as_f64().unwrap_or(0.0), dr["tickguard_vs_naive"].as_f64().unwrap_or(0.0)
    ));
    for p in r["live"]["paced"].as_array().into_iter().flatten() {
        let offered = match p["rate"].as_u64() {
            Some(0) | None => "as fast as one sender goes".to_string(),
            Some(r) => format!("offered {r} datagrams/s"),
        };
        t.push_str(&format!(
            "| live receive: paced stream, {offered} | received {} of {}, {} kernel drops, {} lost ticks | sender achieved {} datagrams/s | | zero loss |\n",
            p["received"], p["sent"], p["kernel_drops"], p["ticks_lost"], ns(&p["sender_achieved_per_s"])
        ));
    }
    for l in r["tick_to_publish"]["levels"]
        .as_array()
        .into_iter()
        .flatten()
    {
        t.push_str(&format!(
            "| tick to publish at {}% ({} datagrams/s) | median {} ns, p99 {} ns, p99.9 {} ns, max {} ns | | | |\n",
            l["percent_of_sustained"], l["rate_per_s"], l["median_ns"], l["p99_ns"], l["p999_ns"], l["max_ns"]
        ));
    }
    let c = &r["check_latency"];
    let u = &c["unix_socket"];
    for (name, v) in [
        ("at 1 M updates/s", &c["at_1m"]),
        ("writer at full speed", &c["full_speed"]),
    ] {
        let median = v["median_ns"].as_f64().unwrap_or(0.0);
        let timer = c["timer_median_ns"].as_f64().unwrap_or(0.0);
        let net = |k: &str| v[k].as_f64().unwrap_or(0.0) - timer;
        t.push_str(&format!(
            "| check latency from another process, {name} ({:.2} M slot updates/s) | median {:.0} ns, p99 {:.0} ns, p99.9 {:.0} ns incl. the clock read, net of the timer's own {timer:.0} ns (as timed: {} / {} / {}); {:.4}% of checks retried | Unix-socket request/response: median {} ns, p99 {} ns, p99.9 {} ns | {:.0}× faster | median ≤ 45 ns, p99 ≤ 100 ns, retries < 1% |\n",
            v["slot_updates_per_s"].as_f64().unwrap_or(0.0) / 1e6,
            net("median_ns"),
            net("p99_ns"),
            net("p99_9_ns"),
            ns(&v["median_ns"]),
            ns(&v["p99_ns"]),
            ns(&v["p99_9_ns"]),
            v["checks_retried_pct"].as_f64().unwrap_or(0.0),
            ns(&u["median_ns"]),
            ns(&u["p99_ns"]),
            ns(&u["p99_9_ns"]),
            u["median_ns"].as_f64().unwrap_or(0.0) / median.max(1.0),
        ));
    }
    let mem = &r["memory"];
    t.push_str(&format!(
        "| resident memory, {} symbols | {:.1} MB RSS ({:.0} B/symbol; shared memory {:.1} MB) | {:.1} MB before traffic | | |\n",
        mem["symbols_in_table"],
        mem["rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        mem["rss_bytes_per_symbol"].as_f64().unwrap_or(0.0),
        mem["shm_file_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        mem["before_traffic"]["vm_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
    ));
    let s = &r["soak"];
    t.push_str(&format!(
        "| soak, {} quotes at {} /s, {}% loss per line | RSS {:.2} → {:.2} MB (growth after 5 s: {} KB), kernel drops {}, packets = sent: {}, ticks lost = simulator's: {} | | | flat RSS, 0 drops, counters = simulator |\n",
        s["quotes_sent"], s["rate"], s["loss_a_pct"],
        s["rss_samples_bytes"][0].as_f64().unwrap_or(0.0) / 1e6,
        s["rss_end_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        s["rss_growth_max_minus_5s_bytes"].as_u64().unwrap_or(0) / 1024,
        s["kernel_drops"], s["packets_equal_datagrams_sent"], s["ticks_lost_equal"],
    ));
    itch_rows(r, &mut t);
    itch_live_rows(r, &mut t);
    itch_glimpse_rows(r, &mut t);
    mdp3_rows(r, &mut t);
    t
}

/// The MDP3 rows, when the JSON has them.
fn mdp3_rows(r: &Value, t: &mut String) {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let met = |v: &Value| {
        if v == &Value::Bool(true) {
            "met"
        } else {
            "missed"
        }
    };
    let c = &r["mdp3_capture"];
    if c.is_object() {
        let each = c["replay_book_entries_per_s_each"]
            .as_array()
            .map(|runs| runs.iter().map(rate).collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        let rate_met = f(&c["replay_book_entries_per_s"]) >= f(&c["target_book_entries_per_s"]);
        let ratio_met = f(&c["ratio"]) >= f(&c["target_ratio"]);
        t.push_str(&format!(
            "| MDP3 capture replay ({} book entries, {} instruments, 2 lines + snapshots, {:.1} book entries/packet, {} events spanning packets; packets lost: {} on line A only, {} on both) | {} book entries/s end to end (best of {}: {each}) | {} book entries/s only reading the capture | {:.2} | ≥ 25 M/s ({}), ratio ≥ 0.15 ({}) |\n",
            c["book_entries"], c["instruments"], f(&c["book_entries_per_packet"]), c["events_spanning_packets"],
            c["lost_on_a_only"], c["lost_on_both_lines"],
            rate(&c["replay_book_entries_per_s"]), c["runs"], rate(&c["floor_book_entries_per_s"]),
            f(&c["ratio"]), met(&Value::Bool(rate_met)), met(&Value::Bool(ratio_met))
        ));
    }
    for d in r["mdp3_apply"]["per_book_entry"]
        .as_array()
        .into_iter()
        .flatten()
    {
        // A ratio the row's run did not measure (an older JSON) is "–".
        let times = |v: &Value| v.as_f64().map_or("–".into(), |x| format!("{x:.1}×"));
        t.push_str(&format!(
            "| MDP3 decode + apply, {} instruments | {} ns/book entry | decoding alone {} ns/book entry; the least work (walk, index, RptSeq, level) {} ns | {} decode, {} the least | ≤ {} ns ({}) |\n",
            d["instruments"], ns(&d["decode_apply_ns"]), ns(&d["decode_ns"]), ns(&d["floor_ns"]),
            times(&d["decode_apply_over_decode"]), times(&d["decode_apply_over_floor"]), d["target_ns"], met(&d["met"])
        ));
    }
    let m = &r["mdp3_memory"];
    if m.is_object() {
        t.push_str(&format!(
            "| MDP3 memory per instrument ({} and {} instruments) | {:.0} B/instrument of resident growth | its structure: {} B (entry {} B, book slots {} B each, one copy, and undo records) | | |\n",
            m["small"]["instruments"], m["large"]["instruments"], f(&m["rss_bytes_per_instrument"]),
            m["structure_bytes_per_instrument"], m["entry_bytes"], m["level_slot_bytes"]
        ));
    }
    mdp3_live_rows(r, t);
}

/// The MDP3 live rows, when the JSON has them.
fn mdp3_live_rows(r: &Value, t: &mut String) {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let d = &r["mdp3_live_drain"];
    if d.is_object() {
        t.push_str(&format!(
            "| MDP3 live receive: drain of two pre-filled incremental line queues ({} instruments, {:.1} book entries/packet) | {} datagrams/s, {} book entries/s (each line's copy counted) | bare recvmmsg {} datagrams/s, {} book entries/s | {:.2} of bare | ≥ 0.7 of bare |\n",
            d["instruments"], f(&d["book_entries_per_packet"]),
            rate(&d["tickguard_datagrams_per_s"]), rate(&d["tickguard_book_entries_per_s"]),
            rate(&d["bare_recvmmsg_datagrams_per_s"]), rate(&d["bare_recvmmsg_book_entries_per_s"]),
            f(&d["ratio"])
        ));
    }
    let c = &r["mdp3_check"];
    let timer = f(&c["timer_median_ns"]);
    for (name, v) in [
        ("busiest of the channel", &c["channel"]),
        ("ESZ6 of the equity channel", &c["hot"]),
    ] {
        if !v.is_object() {
            continue;
        }
        t.push_str(&format!(
            "| MDP3 check latency from another process, {name} ({} instruments, {:.0} events/s sent, {:.0} slot updates/s) | median {} ns, p99 {} ns, p99.9 {} ns incl. the clock read (net of the timer's {timer:.0} ns: {:.0} / {:.0} / {:.0}); {:.4}% retried | | | median ≤ 45 ns, p99 ≤ 100 ns |\n",
            v["instruments"], f(&v["writer"]["events_per_s"]), f(&v["slot_updates_per_s"]),
            ns(&v["median_ns"]), ns(&v["p99_ns"]), ns(&v["p99_9_ns"]),
            f(&v["median_ns"]) - timer, f(&v["p99_ns"]) - timer, f(&v["p99_9_ns"]) - timer,
            f(&v["checks_retried_pct"])
        ));
    }
    let h = &r["mdp3_heal_time"];
    if h.is_object() {
        t.push_str(&format!(
            "| MDP3 heal time: packet lost on both lines to every instrument it touched ok ({} losses, {} instruments, snapshot loop every {} ms) | median {:.1} ms, max {:.1} ms | | | ≤ loop + 10 ms ({}) |\n",
            h["losses_measured"], h["instruments"], h["loop_ms"],
            f(&h["heal"]["median_ns"]) / 1e6, f(&h["heal"]["max_ns"]) / 1e6,
            if h["target_met"] == Value::Bool(true) { "met" } else { "missed" }
        ));
    }
}

/// Median and p99 of a latency summary, µs.
fn median_p99_us(v: &Value) -> String {
    let us = |k: &str| v[k].as_f64().unwrap_or(0.0) / 1e3;
    format!("{:.1} / {:.1} µs", us("median_ns"), us("p99_ns"))
}

/// The ITCH live rows, when the JSON has them.
fn itch_live_rows(r: &Value, t: &mut String) {
    let d = &r["itch_live_drain"];
    if d.is_object() {
        t.push_str(&format!(
            "| ITCH live receive: drain of two pre-filled line queues ({} stocks, {:.1} messages/packet) | {} datagrams/s, {} messages/s (each line's copy counted) | bare recvmmsg {} datagrams/s, {} messages/s | {:.2} of bare | |\n",
            d["stocks"], d["messages_per_packet"].as_f64().unwrap_or(0.0),
            rate(&d["tickguard_datagrams_per_s"]), rate(&d["tickguard_messages_per_s"]),
            rate(&d["bare_recvmmsg_datagrams_per_s"]), rate(&d["bare_recvmmsg_messages_per_s"]),
            d["ratio"].as_f64().unwrap_or(0.0)
        ));
    }
    let g = &r["itch_recovery_latency"];
    if g.is_object() {
        let l = &g["legs"];
        let rt = &g["receive_thread"];
        t.push_str(&format!(
            "| ITCH re-requests on loopback ({} gaps filled of {}, {} given up; median / p99) | gap seen → request sent {}; sent → filled {}; seen → filled {} | receive thread after a cycle's data is applied: {} in cycles that sent, {} in others; receive + apply {} | | |\n",
            l["seen_to_filled"]["samples"], g["gaps_made"], g["gaps_given_up"],
            median_p99_us(&l["seen_to_sent"]), median_p99_us(&l["sent_to_filled"]), median_p99_us(&l["seen_to_filled"]),
            median_p99_us(&rt["after_apply_sending"]), median_p99_us(&rt["after_apply_not_sending"]), median_p99_us(&rt["apply"])
        ));
    }
    let c = &r["itch_check_latency"];
    if c.is_object() {
        let timer = c["timer_median_ns"].as_f64().unwrap_or(0.0);
        for (name, k) in [
            ("first phase", "at_1m"),
            ("writer at full speed", "full_speed"),
        ] {
            let (i, q) = (&c["itch"][k], &c["sqf"][k]);
            let net = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0) - timer;
            t.push_str(&format!(
                "| ITCH check latency from another process, {name} ({:.2} M slot updates/s, {} messages/packet) | median {:.0} ns, p99 {:.0} ns, p99.9 {:.0} ns net of the timer's {timer:.0} ns; {:.4}% retried | SQF in the same run ({:.2} M slot updates/s): {:.0} / {:.0} / {:.0} ns; {:.4}% retried | | |\n",
                i["slot_updates_per_s"].as_f64().unwrap_or(0.0) / 1e6, i["batch"],
                net(i, "median_ns"), net(i, "p99_ns"), net(i, "p99_9_ns"), i["checks_retried_pct"].as_f64().unwrap_or(0.0),
                q["slot_updates_per_s"].as_f64().unwrap_or(0.0) / 1e6,
                net(q, "median_ns"), net(q, "p99_ns"), net(q, "p99_9_ns"), q["checks_retried_pct"].as_f64().unwrap_or(0.0),
            ));
        }
    }
}

/// The GLIMPSE restart rows, when the JSON has them.
fn itch_glimpse_rows(r: &Value, t: &mut String) {
    let g = &r["itch_glimpse_restart"];
    if !g.is_object() {
        return;
    }
    let met = |v: &Value| {
        if v == &Value::Bool(true) {
            "met"
        } else {
            "missed"
        }
    };
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let l = &g["legs_ms_median"];
    t.push_str(&format!(
        "| ITCH restart mid-session from a GLIMPSE snapshot on loopback ({} live orders, {} stocks, multicast {} messages/s; median of {}) | start to ok {:.0} ms, slowest run {:.0} (medians: trigger → login {:.1}, spin {:.0}, merge cycle {:.1}); spin {} messages/s | multicast apply in-process {} messages/s | spin at {:.2} of apply | ≤ 2 s ({}) |\n",
        g["live_orders"], g["stocks"], g["rate_messages_per_s"], g["runs"],
        f(&g["restart_ms"]), f(&g["restart_ms_max"]), f(&l["trigger_to_login_read"]), f(&l["spin_login_to_logout"]), f(&l["merge_cycle"]),
        rate(&g["spin_messages_per_s"]), rate(&g["multicast_apply_messages_per_s"]),
        f(&g["spin_over_apply"]), met(&g["restart_target_met"])
    ));
    let c = &g["receive_thread"];
    let (s, n) = (&c["while_snapshot"]["all"], &c["normal"]["all"]);
    let us = |v: &Value| f(v) / 1e3;
    t.push_str(&format!(
        "| ITCH receive cycles while the snapshot arrives and merges (all cycles; p99.9 / max) | {:.1} µs / {:.1} ms; the merge cycles (held messages applied) {} ms | same multicast, no snapshot: {:.1} µs / {:.1} ms | {:.2}× | p99.9 ≤ 2× ({}) |\n",
        us(&s["p99_9_ns"]), f(&s["max_ns"]) / 1e6,
        c["merge_cycle_ns_each"].as_array().into_iter().flatten().map(|v| format!("{:.1}", f(v) / 1e6)).collect::<Vec<_>>().join(", "),
        us(&n["p99_9_ns"]), f(&n["max_ns"]) / 1e6,
        f(&c["p99_9_ratio"]), met(&c["target_met"])
    ));
}

/// The ITCH rows, when the JSON has them.
fn itch_rows(r: &Value, t: &mut String) {
    // The same replay with its book levels on its own thread, in the same
    // run, and what the second thread gains (nothing for a row written
    // before the reference was).
    let one_thread = |v: &Value| {
        match (
        v["replay_messages_per_s"].as_f64(),
        v["one_thread_messages_per_s"].as_f64(),
    ) {
        (Some(two), Some(one)) if one > 0.0 => format!(
            "; {} messages/s with the book levels on the replay's thread too (the second thread: {:.2}×)",
            rate(&v["one_thread_messages_per_s"]),
            two / one
        ),
        _ => String::new(),
    }
    };
    // Every run's rate, for a row that kept the best of several.
    let each = |v: &Value| match v["replay_messages_per_s_each"].as_array() {
        Some(runs) if runs.len() > 1 => format!(
            " (best of {}: {})",
            runs.len(),
            runs.iter().map(rate).collect::<Vec<_>>().join(", ")
        ),
        _ => String::new(),
    };
    let met = |v: &Value| {
        if v["target_met"] == true {
            "met"
        } else {
            "missed"
        }
    };
    let b = &r["itch_binfile"];
    if b.is_object() {
        // What any book reaches on the same day in the same run (rows
        // written before the ceiling ran beside them have none).
        let ceiling = match b["ratio_to_ceiling_split"].as_f64() {
            Some(x) => format!(
                "; `itch_ceiling`'s two-thread book {} messages/s (the replay at {x:.2} of it)",
                rate(&b["ceiling_split_messages_per_s"])
            ),
            None => String::new(),
        };
        t.push_str(&format!(
            "| ITCH BinaryFILE replay with books ({} messages, {} stocks) | {} messages/s{} | {} messages/s only walking the records{}{} | {:.2} | ≥ 30 M/s ({}) |\n",
            b["messages"], b["stocks"], rate(&b["replay_messages_per_s"]), each(b), rate(&b["walk_messages_per_s"]), one_thread(b), ceiling, b["ratio"].as_f64().unwrap_or(0.0), met(b)
        ));
    }
    for d in r["itch_apply"]["per_message"]
        .as_array()
        .into_iter()
        .flatten()
    {
        t.push_str(&format!(
            "| ITCH decode + apply with books, {} stocks | {} ns/message | | | |\n",
            d["stocks"],
            ns(&d["decode_apply_ns"])
        ));
    }
    let c = &r["itch_capture"];
    if c.is_object() {
        t.push_str(&format!(
            "| ITCH MoldUDP64 capture replay ({} messages, {} stocks, 2 lines, {}–{} messages/packet) | {} messages/s end to end{} | {} messages/s only reading the capture{} | {:.2} | ≥ 20 M/s ({}) |\n",
            c["messages"], c["stocks"], c["messages_per_packet"][0], c["messages_per_packet"][1],
            rate(&c["replay_messages_per_s"]), each(c), rate(&c["floor_messages_per_s"]), one_thread(c), c["ratio"].as_f64().unwrap_or(0.0), met(c)
        ));
    }
    let m = &r["itch_memory"];
    if m.is_object() {
        t.push_str(&format!(
            "| ITCH memory after the BinaryFILE replay ({} messages, {} stocks) | {:.1} MB max RSS, {} live orders ({:.0} B/order of RSS) | books: {:.1} MB window of recent orders, then 24-byte slots ≤ 70% full = {:.0}–{:.0} B/order | | |\n",
            m["messages"], m["stocks"], m["max_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6, m["live_orders_at_end"],
            m["max_rss_bytes_per_live_order"].as_f64().unwrap_or(0.0),
            m["order_window_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            m["book_bytes_per_live_order_min"].as_f64().unwrap_or(0.0), m["book_bytes_per_live_order_max"].as_f64().unwrap_or(0.0)
        ));
    }
}
