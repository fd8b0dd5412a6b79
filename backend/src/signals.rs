//! SIGTERM/SIGINT without dependencies: block them in every thread (the mask
//! is inherited by threads spawned later) and receive them synchronously with
//! sigwait on one thread. POSIX only.

use std::io;

// sigset_t is 128 bytes on Linux/glibc and musl, 4 on macOS: over-allocate.
#[repr(C)]
pub struct SigSet([u64; 16]);

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;
#[cfg(target_os = "linux")]
const SIG_BLOCK: i32 = 0;
#[cfg(not(target_os = "linux"))]
const SIG_BLOCK: i32 = 1;

extern "C" {
    fn sigemptyset(set: *mut SigSet) -> i32;
    fn sigaddset(set: *mut SigSet, signum: i32) -> i32;
    fn pthread_sigmask(how: i32, set: *const SigSet, old: *mut SigSet) -> i32;
    fn sigwait(set: *const SigSet, sig: *mut i32) -> i32;
}

pub struct Signals {
    set: SigSet,
}

impl Signals {
    /// Blocks SIGINT and SIGTERM in the calling thread (call before spawning).
    pub fn block() -> io::Result<Signals> {
        let mut set = SigSet([0; 16]);
        // SAFETY: set is a valid, large enough sigset_t buffer; the calls only
        // write into it or read it.
        unsafe {
            if sigemptyset(&mut set) != 0
                || sigaddset(&mut set, SIGINT) != 0
                || sigaddset(&mut set, SIGTERM) != 0
            {
                return Err(io::Error::last_os_error());
            }
            let rc = pthread_sigmask(SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
        }
        Ok(Signals { set })
    }

    /// Waits for SIGINT or SIGTERM and returns its number.
    pub fn wait(&self) -> i32 {
        let mut sig = 0;
        loop {
            // SAFETY: set was initialised by block(); sig is a valid out pointer.
            let rc = unsafe { sigwait(&self.set, &mut sig) };
            if rc == 0 {
                return sig;
            }
        }
    }
}
