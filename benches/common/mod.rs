//! Helpers shared by the bench binaries: CPU pinning, CPU time, memory, percentiles.

// Each bench binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::time::Duration;

/// Pin the calling thread (and every thread it spawns later) to one CPU.
/// Returns false when the CPU does not exist or the call is refused.
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it,
    // and sched_setaffinity reads exactly size_of::<cpu_set_t>() bytes from it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// User + system CPU time of this whole process (all threads).
pub fn cpu_self() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// User + system CPU time of every reaped child (and the children they reaped).
pub fn cpu_children() -> Duration {
    rusage(libc::RUSAGE_CHILDREN)
}

/// User + system CPU time of a live process, from /proc (clock-tick resolution).
pub fn cpu_of_pid(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
}

/// A `/proc/self/status` field in kB, e.g. `VmHWM` (peak resident set).
pub fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Type-7 percentile (linear interpolation between closest ranks) of a sorted slice.
pub fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let r = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo as f64)
}

pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// `--name value` from the command line.
pub fn arg(name: &str) -> Option<String> {
    let mut it = std::env::args();
    while let Some(a) = it.next() {
        if a == name {
            return it.next();
        }
    }
    None
}

pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// This process's scheduling class, for labelling results ("SCHED_FIFO 10" under `chrt -f 10`).
pub fn sched_policy() -> Option<String> {
    // SAFETY: both calls only read this process's scheduling settings.
    let (policy, prio) = unsafe {
        let mut p: libc::sched_param = std::mem::zeroed();
        let policy = libc::sched_getscheduler(0);
        libc::sched_getparam(0, &mut p);
        (policy, p.sched_priority)
    };
    match policy {
        libc::SCHED_FIFO => Some(format!("SCHED_FIFO {prio}")),
        libc::SCHED_RR => Some(format!("SCHED_RR {prio}")),
        _ => None,
    }
}
