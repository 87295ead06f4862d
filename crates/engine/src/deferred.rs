//! A value made on a thread of its own while its owner goes on: the digest
//! (`analysis::Digest`), made after the pass while the caller already
//! reads the TCP tables (the diagnosis' loss analysis reads only those, and
//! on one long connection it takes about as long as the digest). The first
//! reader of the value waits for it.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

pub(crate) struct Deferred<T> {
    value: OnceLock<T>,
    /// Where the value comes from, until someone has waited for it.
    incoming: Mutex<Option<Receiver<T>>>,
    /// The thread making the value, joined when this is dropped (after
    /// handing the value over it may still be at its `then`).
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl<T: Send + 'static> Deferred<T> {
    /// `make` on a thread named `name`, then `then` there once the value is
    /// handed over (work its readers need not wait for); here and now if no
    /// thread can be started (a process limit), so the value is always made.
    pub(crate) fn spawn(
        name: &str,
        make: impl FnOnce() -> T + Send + 'static,
        then: impl FnOnce() + Send + 'static,
    ) -> Self {
        // The closures are handed over through a slot: a thread that fails
        // to start drops what it was given, and they are then still here to
        // run.
        let slot = std::sync::Arc::new(Mutex::new(Some((make, then))));
        let theirs = std::sync::Arc::clone(&slot);
        let (tx, rx) = sync_channel(1);
        let started = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let work = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
                match work {
                    Some((make, then)) => {
                        // (A reader gone already is no reason to stop.)
                        let _ = tx.send(make());
                        then();
                    }
                    // (Only the spawning side takes them otherwise, and only
                    // when this thread did not start.)
                    None => unreachable!("a deferred value's closure taken twice"),
                }
            });
        match started {
            Ok(handle) => Deferred {
                value: OnceLock::new(),
                incoming: Mutex::new(Some(rx)),
                worker: Mutex::new(Some(handle)),
            },
            Err(_) => {
                let work = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                let value = OnceLock::new();
                if let Some((make, then)) = work {
                    let _ = value.set(make());
                    then();
                }
                Deferred {
                    value,
                    incoming: Mutex::new(None),
                    worker: Mutex::new(None),
                }
            }
        }
    }
}

impl<T> Deferred<T> {
    /// The value, waiting for its thread if it is still at work. A panic
    /// on that thread is raised here, as it would have been had the value
    /// been made here (and again at every later call).
    pub(crate) fn get(&self) -> &T {
        self.value.get_or_init(|| {
            let incoming = self
                .incoming
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(value) = incoming.and_then(|rx| rx.recv().ok()) {
                return value;
            }
            // No value: its thread panicked (raised here), or did so for an
            // earlier reader.
            let handle = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(h) = handle {
                crate::driver::joined(h.join());
            }
            panic!("the analysis' digest failed (see the first error)")
        })
    }

    /// Made already (without waiting).
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        self.value.get().is_some()
            || self
                .worker
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(JoinHandle::is_finished)
    }
}

impl<T> Drop for Deferred<T> {
    /// Dropped before anyone waited: the thread is still joined, so that
    /// its work (and memory) does not outlive what it was made for.
    fn drop(&mut self) {
        let worker = self.worker.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = worker.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_value_is_made_on_its_thread_while_the_caller_goes_on() {
        let (go, wait) = mpsc::channel::<()>();
        let d = Deferred::spawn(
            "test-deferred",
            move || {
                // Held until the caller says so: the caller is not blocked.
                wait.recv().ok();
                std::thread::current().name().map(str::to_string)
            },
            || {},
        );
        assert!(!d.is_made());
        go.send(()).ok();
        assert_eq!(d.get().as_deref(), Some("test-deferred"));
        assert!(d.is_made());
        // Later readers get the same value.
        assert_eq!(d.get().as_deref(), Some("test-deferred"));
    }

    #[test]
    fn readers_on_several_threads_wait_for_one_value() {
        let d = Deferred::spawn(
            "test-deferred",
            || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                vec![1u32, 2, 3]
            },
            || {},
        );
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..4).map(|_| s.spawn(|| d.get().clone())).collect();
            for r in readers {
                assert_eq!(r.join().ok(), Some(vec![1, 2, 3]));
            }
        });
    }

    #[test]
    fn a_panic_while_making_the_value_is_raised_to_every_reader() {
        let d: Deferred<u32> = Deferred::spawn("test-deferred", || panic!("broken digest"), || {});
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *d.get()));
        let msg = first
            .err()
            .and_then(|p| p.downcast_ref::<&str>().map(|s| s.to_string()));
        assert_eq!(msg.as_deref(), Some("broken digest"));
        // Not a hang, and not a value, the second time either.
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *d.get()));
        assert!(again.is_err());
    }

    #[test]
    fn dropping_it_unread_waits_for_its_thread() {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&done);
        let d = Deferred::spawn(
            "test-deferred",
            || (),
            move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            },
        );
        drop(d);
        assert!(done.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn the_value_is_read_before_its_thread_is_done_with_what_comes_after() {
        let (go, wait) = mpsc::channel::<()>();
        let (said, heard) = mpsc::channel::<()>();
        let d = Deferred::spawn(
            "test-deferred",
            || 7u32,
            move || {
                // Held until the reader has the value.
                wait.recv().ok();
                said.send(()).ok();
            },
        );
        assert_eq!(*d.get(), 7);
        assert!(heard.try_recv().is_err());
        go.send(()).ok();
        drop(d); // (joins the thread, which has done its part by then)
        assert!(heard.try_recv().is_ok());
    }
}
