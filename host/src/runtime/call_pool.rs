//! Where module calls run: off the async runtime's workers, at most a
//! bounded number at once per module. A call is synchronous CPU work (up to
//! its deadline); on a worker it would hold a thread the watches, the
//! writes and every other module's reconciles need. On a multi-threaded
//! tokio runtime the calling thread leaves the worker pool for the call
//! (`block_in_place`: the runtime hands its queue to another thread), so a
//! slow module delays only its own reconciles; the bound keeps one module
//! from taking more than its share of threads and cores. Elsewhere (a
//! command, a current-thread runtime) the call runs where it is.

use std::sync::{Condvar, Mutex, PoisonError};

use tokio::runtime::{Handle, RuntimeFlavor};

/// The calls of one module, at most `size` at once.
#[derive(Debug)]
pub struct CallPool {
    size: usize,
    running: Mutex<usize>,
    freed: Condvar,
}

impl CallPool {
    /// `size` calls at once (at least one).
    pub fn new(size: usize) -> Self {
        Self { size: size.max(1), running: Mutex::new(0), freed: Condvar::new() }
    }

    /// Runs `work` (one or a few module calls) off the async workers, once
    /// fewer than `size` of this pool's run.
    pub fn run<T>(&self, work: impl FnOnce() -> T) -> T {
        let bounded = || {
            let _permit = self.permit();
            work()
        };
        match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(bounded),
            _ => bounded(),
        }
    }

    /// Waits (off the workers) for a free place.
    fn permit(&self) -> Permit<'_> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running >= self.size {
            running = self.freed.wait(running).unwrap_or_else(PoisonError::into_inner);
        }
        *running += 1;
        Permit(self)
    }

    /// Calls running now.
    pub fn running(&self) -> usize {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A place in the pool, given back when dropped (a panicking call too).
struct Permit<'a>(&'a CallPool);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut running = self.0.running.lock().unwrap_or_else(PoisonError::into_inner);
        *running -= 1;
        self.0.freed.notify_one();
    }
}

/// The default bound: the CPUs this process may use.
pub fn default_size() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn no_more_than_its_size_run_at_once() {
        let pool = Arc::new(CallPool::new(2));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (pool, most) = (pool.clone(), most.clone());
                std::thread::spawn(move || {
                    pool.run(|| {
                        most.fetch_max(pool.running(), Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                    });
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("joins");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(pool.running(), 0, "every place given back");
    }

    #[test]
    fn a_call_that_panics_gives_its_place_back() {
        let pool = CallPool::new(1);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.run(|| panic!("a host bug"))));
        assert!(panicked.is_err());
        assert_eq!(pool.run(|| 7), 7, "the one place is free again");
    }

    /// On a runtime with two workers, two long calls do not stop a timer
    /// task from running: the calls left the workers.
    #[test]
    fn long_calls_leave_the_async_workers_free() {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        let pool = Arc::new(CallPool::new(2));
        runtime.block_on(async {
            let calls: Vec<_> = (0..2)
                .map(|_| {
                    let pool = pool.clone();
                    tokio::spawn(async move { pool.run(|| std::thread::sleep(Duration::from_millis(600))) })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let started = Instant::now();
            // Both workers would be busy for 550 ms more if the calls held them.
            tokio::spawn(async { tokio::time::sleep(Duration::from_millis(10)).await }).await.expect("a tick");
            let waited = started.elapsed();
            for call in calls {
                call.await.expect("a call");
            }
            assert!(waited < Duration::from_millis(300), "a task waited {waited:?} behind module calls");
        });
    }
}
