//! Next fire time: how long `ScheduleSpec::parse` and `ScheduleSpec::next_after` take for
//! typical expressions. The engine calls `next_after` for thousands of tasks, so it must stay
//! in the low microseconds.
//!
//! Run: `cargo run --release -p scheduler-bench --bin cron_next`
//!
//! Each figure is the median over `ROUNDS` rounds of the mean time per call within a round.
//! "random" asks from instants spread over 2026 (cold, as after a restart or config reload);
//! "chained" asks from the previous fire instant (what the engine does between ticks).

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use scheduler::ScheduleSpec;

const CASES: &[(&str, &str)] = &[
    ("*/5 * * * *", "UTC"),
    ("0 */5 * * * *", "UTC"),
    ("30 2 * * *", "America/New_York"),
    ("0 9 * * MON-FRI", "Europe/London"),
    ("0 0 L * *", "UTC"),
    ("0 0 29 2 *", "UTC"),
    ("@yearly", "Asia/Shanghai"),
    ("*/30 * * * *", "Australia/Lord_Howe"),
];

const ROUNDS: usize = 15;
/// Each round runs for about this long.
const ROUND_TARGET: Duration = Duration::from_millis(40);
const STARTS: usize = 1024;

fn main() {
    let year_start = "2026-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap();
    // Fixed pseudo-random instants over 2026 (xorshift), the same on every run.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let starts: Vec<DateTime<Utc>> = (0..STARTS)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            year_start + chrono::Duration::seconds((state % (365 * 86_400)) as i64)
        })
        .collect();

    println!("| expression | zone | parse | next_after, random | next_after, chained |");
    println!("|---|---|---:|---:|---:|");
    for &(expression, zone) in CASES {
        let parse = measure(|n| {
            for _ in 0..n {
                black_box(ScheduleSpec::parse(black_box(expression), black_box(zone)).unwrap());
            }
        });
        let spec = ScheduleSpec::parse(expression, zone).unwrap();
        let random = measure(|n| {
            for i in 0..n {
                black_box(spec.next_after(black_box(starts[i % STARTS])));
            }
        });
        let mut cursor = year_start;
        let chained = measure(|n| {
            for _ in 0..n {
                cursor = spec.next_after(black_box(cursor)).unwrap_or(year_start);
            }
        });
        println!(
            "| `{expression}` | {zone} | {} | {} | {} |",
            show(parse),
            show(random),
            show(chained)
        );
    }
}

/// Median nanoseconds per call of `run(n)` (which makes `n` calls) over `ROUNDS` rounds.
fn measure(mut run: impl FnMut(usize)) -> f64 {
    // Calibrate: grow `n` until a round takes long enough to time.
    let mut n = 1;
    loop {
        let started = Instant::now();
        run(n);
        let elapsed = started.elapsed();
        if elapsed >= ROUND_TARGET / 4 {
            let per_call = elapsed.as_secs_f64() / n as f64;
            n = ((ROUND_TARGET.as_secs_f64() / per_call) as usize).max(1);
            break;
        }
        n *= 4;
    }
    let mut per_call: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            run(n);
            started.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    per_call[ROUNDS / 2]
}

fn show(nanos: f64) -> String {
    if nanos >= 10_000.0 {
        format!("{:.1} µs", nanos / 1000.0)
    } else {
        format!("{nanos:.0} ns")
    }
}
