//! A short scheduler slice for the commit thread: the kernel runs it sooner when it wakes.
//!
//! Every write waits for the commit thread twice: for it to take the write's group, and
//! for the group's COMMIT. In the 50/50 mix both cores are busy with request tasks, and
//! after each `fdatasync` the commit thread waited behind them for a core (a group took
//! ~2.2 ms of wall time for ~0.5 ms of CPU and ~0.8 ms of sync; BENCHMARKS.md). A higher
//! priority (`nice -10`) would cut that wait but needs `CAP_SYS_NICE`, and it gave the
//! thread a larger share of the CPU, which shrank the groups and cost throughput.
//!
//! Linux's EEVDF scheduler (6.12 and later) takes a *slice* per thread instead: the
//! `sched_runtime` of `sched_setattr(2)` under `SCHED_OTHER`, from 0.1 ms to 100 ms. A
//! shorter slice gives an earlier virtual deadline, so a waking thread is picked (and may
//! preempt the running one) sooner, while its share of the CPU (its weight, set by nice)
//! is unchanged. Any thread may set its own, without privileges. On older kernels the
//! request has no effect, and a kernel or sandbox that refuses the call leaves the thread
//! as it was: either way the commit thread is only slower to get a core, as before.
//!
//! `floe serve --worker-nice` can also run the request threads a few nice steps below
//! this one (`crate::runtime`; off by default), which needs no privileges either; the
//! gather window in `group.rs` keeps the groups from shrinking when the thread gets its
//! core that early.

/// The slice asked for: EEVDF's shortest (it clamps shorter requests to 0.1 ms).
#[cfg(target_os = "linux")]
const SLICE_NS: u64 = 100_000;

/// A `sched_attr` for the calling thread's policy, nice value and slice; the rest zero.
#[cfg(target_os = "linux")]
fn attr(nice: i32, runtime_ns: u64) -> libc::sched_attr {
    libc::sched_attr {
        // The first version of the struct (`SCHED_ATTR_SIZE_VER0`), which every kernel
        // with the call takes.
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: runtime_ns,
        sched_deadline: 0,
        sched_period: 0,
    }
}

/// Asks for a [`SLICE_NS`] slice for the calling thread, keeping `SCHED_OTHER` and its
/// nice value; the error is the kernel's refusal.
#[cfg(target_os = "linux")]
pub(super) fn ask_for_short_slice() -> std::io::Result<()> {
    let attr = attr(crate::runtime::own_nice(), SLICE_NS);
    // SAFETY: the kernel reads `attr.size` bytes from a live, initialised struct of that
    // size; pid 0 is the calling thread; no flags.
    let done = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &attr as *const libc::sched_attr,
            0u32,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn ask_for_short_slice() -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's attributes, as the kernel reports them.
    fn current() -> libc::sched_attr {
        let mut attr = attr(0, 0);
        // SAFETY: the kernel writes at most `size` bytes into the struct; pid 0 is the
        // calling thread.
        let done = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                0,
                &mut attr as *mut libc::sched_attr,
                std::mem::size_of::<libc::sched_attr>() as u32,
                0u32,
            )
        };
        assert_eq!(
            done,
            0,
            "sched_getattr: {}",
            std::io::Error::last_os_error()
        );
        attr
    }

    /// The request takes, on a thread of its own, and changes only the slice: the policy
    /// and the nice value stay what they were (here a nice of 3, which any thread may
    /// set on itself, to tell a kept value from a reset one).
    #[test]
    fn the_slice_is_set_and_nothing_else_changes() {
        std::thread::spawn(|| {
            crate::runtime::set_own_nice(3).expect("setpriority");
            let before = current();
            ask_for_short_slice().expect("sched_setattr");
            let after = current();
            assert_eq!(after.sched_policy, libc::SCHED_OTHER as u32);
            assert_eq!(after.sched_nice, 3);
            assert_eq!(before.sched_nice, 3);
            // Kernels before EEVDF's slices (6.12) report no runtime for SCHED_OTHER.
            if before.sched_runtime != 0 {
                assert_eq!(after.sched_runtime, SLICE_NS);
            }
        })
        .join()
        .unwrap();
    }
}
