//! Load generation: decides *when* each request is sent, nothing else.
//!
//! Closed loop keeps `concurrency` requests in flight, replacing each as it
//! finishes. Open loop sends on a fixed schedule (constant or Poisson gaps);
//! each job receives its scheduled instant so the time it waited in the client
//! (queue time) is recorded and a saturated client cannot hide latency.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use crate::config::suite::Arrival;

/// How the jobs of one `drive` are paced.
#[derive(Debug, Clone, PartialEq)]
pub enum Pace {
    /// Closed loop, or open loop at a rate (seeded gaps).
    Arrival(Arrival, u64),
    /// Open loop at these offsets from the start (a trace), one per job.
    At(Vec<Duration>),
    /// Closed loop over sessions: each holds job positions run in order,
    /// one after another with `think` between them; `concurrency` sessions
    /// at once.
    Sessions {
        sessions: Vec<Vec<usize>>,
        think: Duration,
    },
}

/// Run `count` jobs, calling `on_done` on the caller's task as each finishes
/// (completion order; at most a millisecond late under a high completion
/// rate). `job(index, scheduled)` must do the request itself.
pub async fn drive<T, F, Fut>(
    arrival: Arrival,
    concurrency: usize,
    count: usize,
    seed: u64,
    job: F,
    on_done: impl FnMut(T),
) where
    F: Fn(usize, Instant) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    drive_paced(
        Pace::Arrival(arrival, seed),
        concurrency,
        count,
        job,
        on_done,
    )
    .await
}

/// [`drive`], paced as `pace` says.
pub async fn drive_paced<T, F, Fut>(
    pace: Pace,
    concurrency: usize,
    count: usize,
    job: F,
    mut on_done: impl FnMut(T),
) where
    F: Fn(usize, Instant) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<T>();
    let job = Arc::new(job);
    let concurrency = concurrency.max(1);
    match pace {
        Pace::Arrival(Arrival::Closed, _) => {
            let next = Arc::new(AtomicUsize::new(0));
            for _ in 0..concurrency.min(count) {
                let (tx, next, job) = (tx.clone(), next.clone(), job.clone());
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        let out = job(i, Instant::now()).await;
                        if tx.send(out).is_err() {
                            break;
                        }
                    }
                });
            }
        }
        Pace::Arrival(arrival, seed) => {
            // Offsets made as they are reached: nothing per planned request up front.
            open_loop(offsets(arrival, seed).take(count), concurrency, &tx, &job);
        }
        Pace::At(at) => {
            open_loop(at.into_iter().take(count), concurrency, &tx, &job);
        }
        Pace::Sessions { sessions, think } => {
            let sessions = Arc::new(sessions);
            let next = Arc::new(AtomicUsize::new(0));
            for _ in 0..concurrency.min(sessions.len()) {
                let (tx, next, job, sessions) =
                    (tx.clone(), next.clone(), job.clone(), sessions.clone());
                tokio::spawn(async move {
                    loop {
                        let s = next.fetch_add(1, Ordering::Relaxed);
                        let Some(turns) = sessions.get(s) else { break };
                        for (k, &i) in turns.iter().enumerate() {
                            if i >= count {
                                continue;
                            }
                            if k > 0 && !think.is_zero() {
                                tokio::time::sleep(think).await;
                            }
                            if tx.send(job(i, Instant::now()).await).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        }
    }
    drop(tx);
    while let Some(out) = rx.recv().await {
        on_done(out);
        // Each wake-up of the caller's task is a context switch when it runs on
        // a thread of its own (`block_on`), dearer than a short request's own
        // work; so when one wake-up finds several results waiting (a high
        // completion rate), gather for a moment before the next. Requests are
        // timed inside `job`: this only delays `on_done`, by at most COALESCE.
        let mut more = false;
        while let Ok(out) = rx.try_recv() {
            on_done(out);
            more = true;
        }
        if more {
            tokio::time::sleep(COALESCE).await;
        }
    }
}

/// Open loop: job `i` is due at `offsets[i]` from now; at most `concurrency`
/// in flight, and waiting for one of them counts as the job's queue time.
fn open_loop<T, F, Fut>(
    offsets: impl Iterator<Item = Duration> + Send + 'static,
    concurrency: usize,
    tx: &mpsc::UnboundedSender<T>,
    job: &Arc<F>,
) where
    F: Fn(usize, Instant) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let permits = Arc::new(Semaphore::new(concurrency));
    let (tx, job) = (tx.clone(), job.clone());
    tokio::spawn(async move {
        let t0 = Instant::now();
        for (i, off) in offsets.into_iter().enumerate() {
            let scheduled = t0 + off;
            tokio::time::sleep_until(scheduled).await;
            // Waiting for a permit happens *after* the scheduled time: that wait is queue time.
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let (tx, job) = (tx.clone(), job.clone());
            tokio::spawn(async move {
                let out = job(i, scheduled).await;
                drop(permit);
                let _ = tx.send(out);
            });
        }
    });
}

/// How long `drive` gathers finished results under a high completion rate.
const COALESCE: Duration = Duration::from_millis(1);

/// Latest send offset a schedule holds (ten years), seconds.
const MAX_OFFSET_S: f64 = 10.0 * 365.0 * 86_400.0;

/// Send offsets from the start of an open-loop run. Pure, seeded.
pub fn schedule(arrival: Arrival, count: usize, seed: u64) -> Vec<Duration> {
    offsets(arrival, seed).take(count).collect()
}

/// [`schedule`] as an endless iterator, each offset made when it is reached.
pub fn offsets(arrival: Arrival, seed: u64) -> impl Iterator<Item = Duration> + Send + 'static {
    let mut rng = SplitMix64(seed);
    let mut t = 0.0f64;
    std::iter::repeat(()).map(move |_| {
        let at = t;
        t += match arrival {
            Arrival::Closed => 0.0,
            Arrival::Constant { rate } => 1.0 / rate,
            // Inverse-CDF of the exponential; 1-u keeps ln away from 0.
            Arrival::Poisson { rate } => -(1.0 - rng.next_f64()).ln() / rate,
        };
        send_offset(at)
    })
}

/// `seconds` from the start as a send offset. Suites bound their schedules
/// when read (`limits::MAX_SCHEDULE_S`); past that, an offset saturates at a
/// decade rather than overflow `Duration` or the instant it is added to.
pub fn send_offset(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.min(MAX_OFFSET_S)).unwrap_or(Duration::ZERO)
}

/// Small, stable PRNG so schedules are reproducible across crate versions.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn constant_schedule_is_evenly_spaced() {
        let s = schedule(Arrival::Constant { rate: 4.0 }, 3, 1);
        assert_eq!(
            s,
            vec![
                Duration::ZERO,
                Duration::from_millis(250),
                Duration::from_millis(500)
            ]
        );
    }

    #[test]
    fn absurdly_slow_rates_saturate_instead_of_panicking() {
        for arrival in [
            Arrival::Constant { rate: 1e-300 },
            Arrival::Poisson { rate: 1e-300 },
        ] {
            let s = schedule(arrival, 3, 1);
            assert_eq!(s[0], Duration::ZERO);
            assert_eq!(s[2], Duration::from_secs_f64(MAX_OFFSET_S));
            let _ = std::time::Instant::now() + s[2];
        }
    }

    #[test]
    fn poisson_schedule_is_seeded_and_has_the_right_mean_gap() {
        let a = schedule(Arrival::Poisson { rate: 10.0 }, 20_000, 7);
        assert_eq!(a, schedule(Arrival::Poisson { rate: 10.0 }, 20_000, 7));
        assert_ne!(a, schedule(Arrival::Poisson { rate: 10.0 }, 20_000, 8));
        let mean_gap = a.last().unwrap().as_secs_f64() / 19_999.0;
        assert!((mean_gap - 0.1).abs() < 0.005, "{mean_gap}");
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_run_their_turns_in_order_with_think_time_between() {
        let sessions = vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]];
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let t0 = Instant::now();
        let mut done = Vec::new();
        drive_paced(
            Pace::Sessions {
                sessions,
                think: Duration::from_millis(100),
            },
            2,
            9,
            move |i, _| {
                let l = l.clone();
                async move {
                    l.lock().unwrap().push((i, Instant::now() - t0));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    i
                }
            },
            |i| done.push(i),
        )
        .await;
        done.sort();
        assert_eq!(done, (0..9).collect::<Vec<_>>());
        let log = log.lock().unwrap().clone();
        let start = |i: usize| log.iter().find(|e| e.0 == i).unwrap().1;
        for s in [0, 3, 6] {
            // Turn k+1 starts after turn k's 10 ms and the 100 ms think.
            assert!(start(s + 1) >= start(s) + Duration::from_millis(110));
            assert!(start(s + 2) >= start(s + 1) + Duration::from_millis(110));
        }
        // Two sessions at once: the third waits for one to finish.
        assert!(start(6) >= start(2).min(start(5)) + Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn offsets_are_kept_as_a_schedule() {
        let t0 = Instant::now();
        let mut sched = Vec::new();
        drive_paced(
            Pace::At(vec![
                Duration::ZERO,
                Duration::from_millis(300),
                Duration::from_millis(310),
            ]),
            8,
            3,
            move |i, s| async move { (i, s - t0) },
            |x| sched.push(x),
        )
        .await;
        sched.sort();
        assert_eq!(
            sched.iter().map(|x| x.1.as_millis()).collect::<Vec<_>>(),
            vec![0, 300, 310]
        );
    }

    #[tokio::test]
    async fn closed_loop_never_exceeds_concurrency_and_runs_every_index() {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (f, p) = (in_flight.clone(), peak.clone());
        let mut done = Vec::new();
        drive(
            Arrival::Closed,
            3,
            10,
            0,
            move |i, _| {
                let (f, p) = (f.clone(), p.clone());
                async move {
                    let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    f.fetch_sub(1, Ordering::SeqCst);
                    i
                }
            },
            |i| done.push(i),
        )
        .await;
        done.sort();
        assert_eq!(done, (0..10).collect::<Vec<_>>());
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_records_queue_time_when_saturated() {
        // 1 slot, arrivals every 10 ms, each job takes 30 ms: later jobs must queue.
        let queued = Arc::new(Mutex::new(Vec::new()));
        let q = queued.clone();
        drive(
            Arrival::Constant { rate: 100.0 },
            1,
            4,
            0,
            move |i, scheduled| {
                let q = q.clone();
                async move {
                    let wait = Instant::now() - scheduled;
                    q.lock().unwrap().push((i, wait.as_millis()));
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
            },
            |_| {},
        )
        .await;
        let mut got = queued.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, vec![(0, 0), (1, 20), (2, 40), (3, 60)]);
    }
}
