//! The async runtime `floe` runs on, and the priority of its threads.
//!
//! With the embedded store every write waits for one thread, the commit thread
//! (`store/sqlite/group.rs`). On a busy machine it waits for a core behind the request
//! threads after each wake-up. `floe serve --worker-nice N` on the embedded store runs
//! the runtime's threads N nice steps *below* the rest of the process (a thread may
//! always lower its own priority; raising the commit thread's instead needs
//! `CAP_SYS_NICE`). The commit thread is started from the main thread, which keeps the
//! process's priority, so it then gets a core as soon as it wakes.
//!
//! Off by default (0). Measured in BENCHMARKS.md ("The request threads' priority"): it
//! lowered the write p50 only while the load generator shared Floe's scheduling group
//! (the same session or cgroup), where nice weighs Floe's request threads against the
//! generator's too. With the client in a group of its own, as any real client is, nice 10
//! cost 4-5% of the requests and a millisecond of read p50 for 0.4 ms of write p50; and a
//! client that does share the group got nearly all the CPU it wanted (loadTable fell from
//! 71% to 54% of a static server's rate beside `wrk`).

/// Builds the multi-threaded runtime; with `worker_nice` above zero, each of its threads
/// (workers and blocking threads) runs that many nice steps below the calling thread.
pub fn build(worker_nice: i32) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if worker_nice > 0 {
        // An absolute value, not a step from the starting thread's own: a runtime thread
        // may be started by another one, whose value it inherits.
        let nice = (own_nice() + worker_nice).min(19);
        // Said once: where one thread cannot lower its priority (not Linux, or a sandbox
        // that refuses `setpriority`), none can.
        static REFUSED: std::sync::Once = std::sync::Once::new();
        builder.on_thread_start(move || {
            if let Err(e) = set_own_nice(nice) {
                // Before logging is set up: the threads keep their priority, and the
                // server is only slower under load, so say it and go on.
                REFUSED.call_once(|| {
                    eprintln!(
                        "floe: the runtime's threads keep their priority (--worker-nice {worker_nice}): {e}"
                    )
                });
            }
        });
    }
    builder.build()
}

/// The calling thread's nice value (also read by the commit thread's slice request).
#[cfg(target_os = "linux")]
pub(crate) fn own_nice() -> i32 {
    // SAFETY: reads the calling thread's own nice value: on Linux, PRIO_PROCESS with 0
    // names the calling thread, not the whole process. It cannot fail for the calling
    // thread (and -1 is also a nice value, so it could not say so).
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// Sets the calling thread's nice value (only upwards without `CAP_SYS_NICE`).
#[cfg(target_os = "linux")]
pub(crate) fn set_own_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: sets the calling thread's own nice value (0 names the calling thread).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn own_nice() -> i32 {
    0
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn set_own_nice(_nice: i32) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Runs `test` on a thread of its own, so that what it builds and starts begins from
    /// a thread no other test shares.
    fn on_a_thread_of_its_own(test: impl FnOnce() + Send + 'static) {
        std::thread::spawn(test).join().unwrap();
    }

    /// The nice value a task sees on one of `runtime`'s workers.
    fn on_a_worker(runtime: &tokio::runtime::Runtime) -> i32 {
        (runtime.block_on(async { tokio::spawn(async { own_nice() }).await })).unwrap()
    }

    /// The runtime's threads run lower, the thread that built it does not, and neither
    /// does a thread it starts afterwards (as `floe serve` starts the commit thread).
    #[test]
    fn runtime_threads_run_below_the_thread_that_built_them() {
        on_a_thread_of_its_own(|| {
            let base = own_nice();
            let runtime = build(5).expect("runtime");
            let blocking = runtime.block_on(runtime.spawn_blocking(own_nice));
            assert_eq!(on_a_worker(&runtime), (base + 5).min(19));
            assert_eq!(blocking.unwrap(), (base + 5).min(19));
            // A blocking thread started by a worker (which inherits the worker's value).
            let nested = runtime.block_on(async {
                tokio::spawn(async { tokio::task::spawn_blocking(own_nice).await }).await
            });
            assert_eq!(nested.unwrap().unwrap(), (base + 5).min(19));
            assert_eq!(own_nice(), base);
            let started = runtime.block_on(async { std::thread::spawn(own_nice).join() });
            assert_eq!(started.unwrap(), base);
        });
    }

    /// Zero leaves every thread as it was.
    #[test]
    fn zero_changes_nothing() {
        on_a_thread_of_its_own(|| {
            let base = own_nice();
            let runtime = build(0).expect("runtime");
            assert_eq!(on_a_worker(&runtime), base);
        });
    }
}
