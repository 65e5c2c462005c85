//! Work that runs beside a follower's rounds on threads of its own (the
//! maintenance pass, the key index's background merges) at a lower
//! scheduling priority: when the cores are busy the rounds come first, and
//! the background takes the time the rounds leave (bench/README.md, "A pass
//! at a lower priority", and "Upsert at 100,000 msg/s, fifteenth part").

/// How far a background thread lowers its priority (a nice value, Linux).
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`] (Linux: a
/// thread has its own nice value); a thread already lower keeps its own
/// (a process started with `nice -n 19` is never raised). Where that fails
/// the thread runs at the process's priority, as before; said in the log
/// with `what` it is.
pub fn lower_priority(what: &str) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid`, `getpriority` and `setpriority` take plain
        // integers and touch no memory of ours.
        let lowered = unsafe {
            let tid = libc::gettid() as libc::id_t;
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            if now >= BACKGROUND_NICE {
                return;
            }
            libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE)
        };
        if lowered != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!(error = %e, thread = what, "could not lower a background thread's priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = what;
}

/// The calling thread's nice value (tests).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn own_priority() -> i32 {
    // SAFETY: plain integers in, one out.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_background_thread_runs_at_a_lower_priority_than_the_rounds() {
        let (before, after) = std::thread::spawn(|| {
            let before = own_priority();
            lower_priority("test");
            (before, own_priority())
        })
        .join()
        .expect("thread");
        // A test run already at a nice above ours keeps its own.
        assert_eq!(after, before.max(BACKGROUND_NICE));
        assert_eq!(own_priority(), before, "only the background thread changed");
    }
}
