//! The source's clocks: CLOCK_MONOTONIC for send stamps, and a timer that
//! wakes a scheduled chunk within microseconds (a `timerfd` on Linux).

/// Width of a send stamp in content text.
pub const STAMP_DIGITS: usize = 20;

/// CLOCK_MONOTONIC in nanoseconds, the clock of send stamps (and of
/// `std::time::Instant` on Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the live local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(target_os = "linux")]
pub(super) use linux_timer::Timer;

#[cfg(target_os = "linux")]
mod linux_timer {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Instant;

    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// A one-shot timerfd: wakes within microseconds of its deadline, where
    /// tokio's timer wheel rounds up to the next millisecond.
    pub struct Timer {
        fd: AsyncFd<OwnedFd>,
    }

    impl Timer {
        pub fn new() -> io::Result<Timer> {
            // SAFETY: plain syscall; the returned descriptor is checked and then owned.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: the OwnedFd stays open, unchanged, for as long as the AsyncFd owns it.
            let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
            Ok(Timer { fd })
        }

        pub async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
            let now = Instant::now();
            if due <= now {
                return Ok(());
            }
            // Relative arming: the gap between `now` and the syscall is well under a µs.
            let d = due - now;
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: d.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                    tv_nsec: d.subsec_nanos().into(),
                },
            };
            // SAFETY: valid descriptor and a pointer to a live itimerspec; old value not wanted.
            let rc = unsafe {
                libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            loop {
                let mut guard = self.fd.readable().await?;
                let r = guard.try_io(|fd| {
                    let mut expirations = 0u64;
                    // SAFETY: reads 8 bytes into a live u64, as timerfd requires.
                    let n = unsafe {
                        libc::read(
                            fd.as_raw_fd(),
                            (&mut expirations as *mut u64).cast(),
                            std::mem::size_of::<u64>(),
                        )
                    };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(())
                    }
                });
                match r {
                    Ok(result) => return result,
                    Err(_would_block) => continue,
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) use tokio_timer::Timer;

#[cfg(not(target_os = "linux"))]
mod tokio_timer {
    use std::io;
    use std::time::Instant;

    /// Elsewhere, tokio's own timer.
    pub struct Timer;

    impl Timer {
        pub fn new() -> io::Result<Timer> {
            Ok(Timer)
        }
        pub async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
            tokio::time::sleep_until(due.into()).await;
            Ok(())
        }
    }
}
