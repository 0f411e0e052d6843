//! What waking costs on this machine, apart from the work done awake: the floor under the
//! monitor's CPU on a small node, where it does little each second. Each shape runs for SECS
//! in turn, ROUNDS times; each thread's time on CPU is read from
//! `/proc/self/task/TID/schedstat` (nanoseconds) and printed in µs a second:
//!
//! - `one`: a thread that sleeps 1 s and does nothing (the floor of any tool that wakes once
//!   a second, nvtop's shape);
//! - `two`: the monitor's shape: a sampling thread that sleeps 1 s and wakes a waiting one
//!   through an eventfd in an epoll set, which writes 14 bytes (to `/dev/null`);
//! - `two+host`: `two`, the sampling thread also reading `/proc/stat` and `/proc/meminfo`
//!   through descriptors kept open (the header's host CPU and memory, which nvtop does not
//!   read);
//! - `chase N`: a thread that sleeps 1 s, then reads N cache lines of 64 bytes, one after the
//!   other in a random order (each address read from the last): what memory left untouched
//!   for a second costs a line when it is read again (less the bare wake of `one`).
//!
//! Run: `cargo bench --bench wake_floor` (`-- --secs 10 --rounds 3 --nap 1000`, the last the
//! milliseconds slept between wakes); `cargo test --benches`
//! runs one short round.

// A benchmark may panic: `expect` says which of its assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

#[derive(Clone, Copy)]
enum Shape {
    One,
    Two,
    TwoHost,
    Chase(usize),
}

impl Shape {
    fn name(self) -> String {
        match self {
            Shape::One => "one".into(),
            Shape::Two => "two".into(),
            Shape::TwoHost => "two+host".into(),
            Shape::Chase(n) => format!("chase {n}"),
        }
    }
}

/// The calling thread's id.
fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// A thread's time on CPU so far, in nanoseconds.
fn on_cpu(tid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .expect("schedstat (a kernel with CONFIG_SCHED_INFO)");
    text.split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .expect("schedstat's first field")
}

/// A random cycle through `n` lines of 64 bytes: the next line's index at the start of each.
fn cycle(n: usize) -> Vec<u64> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut lines = vec![0u64; n * 8];
    for (k, &line) in order.iter().enumerate() {
        lines[line * 8] = (order[(k + 1) % n] * 8) as u64;
    }
    lines
}

/// Runs `shape`, its sampler sleeping `nap` between wakes, for `secs` after a second's
/// warm-up: each thread's name and µs a second.
fn run(shape: Shape, secs: u64, nap: Duration) -> Vec<(&'static str, f64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let tids = Arc::new(Mutex::new(Vec::new()));
    // SAFETY: eventfd and epoll_create1 have no preconditions; each result is checked.
    let (event, poll) = unsafe {
        let event = libc::eventfd(0, libc::EFD_CLOEXEC);
        let poll = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(event >= 0 && poll >= 0, "eventfd and epoll");
        (OwnedFd::from_raw_fd(event), OwnedFd::from_raw_fd(poll))
    };
    let (event, poll) = (Arc::new(event), Arc::new(poll));
    let two = matches!(shape, Shape::Two | Shape::TwoHost);
    let mut threads = Vec::new();
    {
        let (stop, tids, event) = (stop.clone(), tids.clone(), event.clone());
        threads.push(
            thread::Builder::new()
                .name("sampler".into())
                .spawn(move || {
                    tids.lock().unwrap().push(("sampler", tid()));
                    let host = matches!(shape, Shape::TwoHost).then(|| {
                        let open = |p: &str| File::open(p).expect(p);
                        (open("/proc/stat"), open("/proc/meminfo"))
                    });
                    let lines = match shape {
                        Shape::Chase(n) => cycle(n),
                        _ => Vec::new(),
                    };
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut sink = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        thread::sleep(nap);
                        if let Some((stat, meminfo)) = &host {
                            sink += stat.read_at(&mut buf, 0).expect("stat") as u64;
                            sink += meminfo.read_at(&mut buf, 0).expect("meminfo") as u64;
                        }
                        let mut at = 0u64;
                        for _ in 0..lines.len() / 8 {
                            at = lines[at as usize];
                        }
                        sink = sink.wrapping_add(at);
                        if two {
                            let one = 1u64.to_ne_bytes();
                            // SAFETY: an 8-byte write from a live buffer to our eventfd.
                            unsafe { libc::write(event.as_raw_fd(), one.as_ptr().cast(), 8) };
                        }
                    }
                    std::hint::black_box(sink);
                })
                .expect("spawn"),
        );
    }
    if two {
        let (stop, tids, event, poll) = (stop.clone(), tids.clone(), event.clone(), poll.clone());
        threads.push(
            thread::Builder::new()
                .name("waiter".into())
                .spawn(move || {
                    tids.lock().unwrap().push(("waiter", tid()));
                    let null = File::options().write(true).open("/dev/null").expect("null");
                    let mut wanted = libc::epoll_event {
                        events: libc::EPOLLIN as u32,
                        u64: 0,
                    };
                    // SAFETY: both descriptors are open; `wanted` outlives the call.
                    let added = unsafe {
                        libc::epoll_ctl(
                            poll.as_raw_fd(),
                            libc::EPOLL_CTL_ADD,
                            event.as_raw_fd(),
                            &mut wanted,
                        )
                    };
                    assert_eq!(added, 0, "epoll_ctl");
                    let mut ready = [libc::epoll_event { events: 0, u64: 0 }];
                    while !stop.load(Ordering::Relaxed) {
                        // SAFETY: one event's room, in a live array.
                        unsafe { libc::epoll_wait(poll.as_raw_fd(), ready.as_mut_ptr(), 1, -1) };
                        let mut count = [0u8; 8];
                        // SAFETY: an 8-byte read into a live buffer from our eventfd.
                        unsafe { libc::read(event.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
                        null.write_at(b"\x1b[1;73H4\x1b[12C1", 0).expect("write");
                    }
                })
                .expect("spawn"),
        );
    }
    thread::sleep(Duration::from_secs(1));
    let tids = tids.lock().unwrap().clone();
    let before: Vec<u64> = tids.iter().map(|&(_, t)| on_cpu(t)).collect();
    thread::sleep(Duration::from_secs(secs));
    let after: Vec<u64> = tids.iter().map(|&(_, t)| on_cpu(t)).collect();
    stop.store(true, Ordering::Relaxed);
    let one = 1u64.to_ne_bytes();
    // SAFETY: an 8-byte write from a live buffer to our eventfd (wakes the waiter to stop).
    unsafe { libc::write(event.as_raw_fd(), one.as_ptr().cast(), 8) };
    for handle in threads {
        handle.join().expect("join");
    }
    tids.iter()
        .zip(before.iter().zip(&after))
        .map(|(&(name, _), (b, a))| (name, (a - b) as f64 / 1000.0 / secs as f64))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a whole number"))
    };
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then a short run.
    let full = args.iter().any(|a| a == "--bench");
    let secs = value("--secs", if full { 10 } else { 1 });
    let rounds = value("--rounds", if full { 3 } else { 1 });
    // The sleep between wakes: 1 s, the monitor's default interval (`--nap 50`: 50 ms).
    let nap_ms = value("--nap", 1000).max(1);
    let nap = Duration::from_millis(nap_ms);
    let wakes = 1000.0 / nap_ms as f64;
    let shapes = [
        Shape::One,
        Shape::Two,
        Shape::TwoHost,
        Shape::Chase(256),
        Shape::Chase(1024),
    ];
    println!(
        "wake_floor: {secs} s a shape, {rounds} round(s), a wake every {nap_ms} ms; µs a second on CPU, by thread"
    );
    for round in 1..=rounds {
        println!("round {round}");
        let mut bare = 0.0;
        for shape in shapes {
            let threads = run(shape, secs, nap);
            let total: f64 = threads.iter().map(|(_, us)| us).sum();
            let each: Vec<String> = threads
                .iter()
                .map(|(name, us)| format!("{name} {us:.0}"))
                .collect();
            // A line's cost: what the chase adds to a bare wake, over the lines read.
            let per_line = match shape {
                Shape::One => {
                    bare = total;
                    String::new()
                }
                Shape::Chase(n) => {
                    format!(" · {:.2} µs a line", (total - bare) / wakes / n as f64)
                }
                _ => String::new(),
            };
            println!(
                "  {:<10} {} · total {total:.0}{per_line}",
                shape.name(),
                each.join(" ")
            );
        }
    }
}
