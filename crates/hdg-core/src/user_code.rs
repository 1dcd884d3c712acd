//! User code run by the library: the closures of a [`crate::Problem`] (coefficients, source,
//! boundary data, exact solution). A panic in one becomes an error naming it, instead of
//! tearing through the solver; the data it gives are checked where they enter (the callers
//! name the closure and the cell or face of a value that is not finite).
//!
//! A caught panic prints nothing: its message is in the error. The panic hook is
//! process-wide, so swapping it for the duration of a call would silence (or fail to
//! silence) panics of other threads. Instead one hook is installed once, on the first
//! [`run_user`]: it stays silent on a thread while that thread runs user code under a
//! [`run_user`] (a thread-local flag, carried into parallel work by [`Capture`]), and
//! otherwise hands the panic to the hook that was installed before it (by default the one that
//! prints the message and, with `RUST_BACKTRACE`, a backtrace). A hook set by the program
//! after the first [`run_user`] replaces this one: caught panics then print again, nothing
//! else changes.
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use crate::error::{CoreError, Result};

thread_local! {
    /// How many [`run_user`] or [`Capture::within`] scopes this thread is inside: a panic on
    /// it is caught and reported as an error when this is above 0.
    static CAPTURING: Cell<usize> = const { Cell::new(0) };
}

/// Installs the silent-while-capturing hook, once per process.
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // `try_with`: a panic while the thread's locals are being destroyed is not ours.
            if CAPTURING.try_with(Cell::get).unwrap_or(0) == 0 {
                previous(info);
            }
        }));
    });
}

/// Marks this thread as capturing until dropped (nesting counts).
struct Capturing;

impl Capturing {
    fn enter() -> Capturing {
        CAPTURING.with(|c| c.set(c.get() + 1));
        Capturing
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURING.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Whether the current thread is inside a [`run_user`], as a value that parallel work
/// started there carries to the threads that run it (Rayon's workers do not inherit thread
/// locals): `let capture = Capture::current();` before the parallel loop, then
/// `capture.within(|| ...)` around each task's call of user code. A panic inside is still
/// caught by the [`run_user`] that the loop runs in (Rayon passes a task's panic on to the
/// thread that started the loop), so keeping it off stderr there loses nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capture(bool);

impl Capture {
    /// The current thread's state.
    pub fn current() -> Capture {
        Capture(CAPTURING.with(Cell::get) > 0)
    }

    /// Runs `work` on this thread with the state of the thread this value was taken on.
    pub fn within<R>(self, work: impl FnOnce() -> R) -> R {
        let _guard = self.0.then(Capturing::enter);
        work()
    }
}

/// Runs `work`, which calls the user's `what` (and possibly library code around it), turning a
/// panic into [`CoreError::InvalidParameter`] named "problem data" with the panic's message.
/// Nothing is printed for such a panic (module docs), also where `work` runs parallel loops
/// that carry a [`Capture`].
pub fn run_user<R>(what: &str, work: impl FnOnce() -> R) -> Result<R> {
    install_hook();
    let guard = Capturing::enter();
    let result = catch_unwind(AssertUnwindSafe(work));
    drop(guard);
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        CoreError::InvalidParameter {
            name: "problem data",
            reason: format!("{what} panicked: {message}"),
        }
    })
}

/// The error for a value of `what` that is not finite, `where_` saying where.
pub fn not_finite(what: &str, value: f64, where_: String) -> CoreError {
    CoreError::InvalidParameter {
        name: "problem data",
        reason: format!("{what} is {value} (not finite) {where_}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn a_panic_becomes_an_error_naming_the_closure() {
        let err = run_user("the source f", || -> f64 { panic!("bad x") }).unwrap_err();
        assert!(err.to_string().contains("the source f panicked: bad x"), "{err}");
        let n = 3;
        let err = run_user("g_D", || -> f64 { panic!("at {n}") }).unwrap_err();
        assert!(err.to_string().contains("g_D panicked: at 3"), "{err}");
        assert_eq!(run_user("f", || 2.0).unwrap(), 2.0);
    }

    /// The flag is set inside `run_user` only, nests, is carried into Rayon tasks by a
    /// `Capture`, and is cleared again after a caught panic (a flag left set would silence
    /// every later panic of the thread).
    #[test]
    fn the_capturing_flag_is_scoped_and_carried_into_parallel_work() {
        let capturing = || CAPTURING.with(Cell::get) > 0;
        assert!(!capturing());
        assert_eq!(Capture::current(), Capture(false));
        run_user("outer", || {
            assert!(capturing());
            run_user("inner", || assert!(capturing())).unwrap();
            assert!(capturing());
            let capture = Capture::current();
            let seen: Vec<bool> = (0..64)
                .into_par_iter()
                .map(|_| capture.within(|| CAPTURING.with(Cell::get) > 0))
                .collect();
            assert!(seen.iter().all(|&s| s));
        })
        .unwrap();
        assert!(!capturing());
        let err = run_user("kappa", || {
            let capture = Capture::current();
            (0..64).into_par_iter().for_each(|i| {
                capture.within(|| {
                    if i == 40 {
                        panic!("kappa at {i}")
                    }
                })
            })
        })
        .unwrap_err();
        assert!(err.to_string().contains("kappa panicked: kappa at 40"), "{err}");
        assert!(!capturing());
        assert!(!Capture(false).within(capturing));
    }
}
