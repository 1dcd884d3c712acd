//! User code run by the library: the closures of a [`crate::Problem`] (coefficients, source,
//! boundary data, exact solution). A panic in one becomes an error naming it, instead of
//! tearing through the solver; the data it gives are checked where they enter (the callers
//! name the closure and the cell or face of a value that is not finite).
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{CoreError, Result};

/// Runs `work`, which calls the user's `what` (and possibly library code around it), turning a
/// panic into [`CoreError::InvalidParameter`] named "problem data" with the panic's message.
/// (The panic hook still prints the panic where it happened: hooks are process-wide.)
pub fn run_user<R>(what: &str, work: impl FnOnce() -> R) -> Result<R> {
    catch_unwind(AssertUnwindSafe(work)).map_err(|payload| {
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

    #[test]
    fn a_panic_becomes_an_error_naming_the_closure() {
        let err = run_user("the source f", || -> f64 { panic!("bad x") }).unwrap_err();
        assert!(err.to_string().contains("the source f panicked: bad x"), "{err}");
        let n = 3;
        let err = run_user("g_D", || -> f64 { panic!("at {n}") }).unwrap_err();
        assert!(err.to_string().contains("g_D panicked: at 3"), "{err}");
        assert_eq!(run_user("f", || 2.0).unwrap(), 2.0);
    }
}
