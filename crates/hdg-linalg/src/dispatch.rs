//! The one place where solver settings become the trace solver of a run: the choice, its
//! tolerance (a default per precision), the iteration cap, and the rule that mixed precision
//! refines an f64 solve. The facade, the program and problem files all come through here.
use std::fmt;
use std::str::FromStr;

use hdg_core::{
    Backend, CoreError, DemoteOperator, MixedPrecisionOps, MultigridOperator, MultigridOps,
    Precision, Real, Result, TraceSolver,
};

use crate::{MixedPrecisionRefinement, SolverChoice, Suite};

/// The iteration cap of an iterative trace solve unless one is given.
pub const DEFAULT_MAX_ITERATIONS: usize = 100_000;

/// The true relative residual at which an iterative trace solve stops unless told otherwise,
/// or the precision's attainable accuracy where that lies above it ([`crate::StoppingRule`]):
/// the default asks for as much as the precision gives, so that the algebraic error stays
/// below the discretisation error at every order the library runs (BENCHMARKS.md, "The
/// default stopping rule"). In f32, near where the true residual of an f32 solve stalls.
pub fn default_tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F64 => 1e-12,
        Precision::F32 => 1e-6,
    }
}

/// How the trace system is solved: which solver, to which relative residual, with how many
/// iterations at most.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolverSettings {
    /// The solver.
    pub choice: SolverChoice,
    /// The relative residual at which it stops; None: [`default_tolerance`] of the precision.
    pub tolerance: Option<f64>,
    /// The iteration cap.
    pub max_iterations: usize,
}

impl Default for SolverSettings {
    /// `pcg-mg`, the default tolerance of the precision, [`DEFAULT_MAX_ITERATIONS`].
    fn default() -> Self {
        SolverSettings {
            choice: SolverChoice::PcgMg,
            tolerance: None,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

impl SolverSettings {
    /// The tolerance in `precision`: the one given, else the default.
    pub fn tolerance_in(&self, precision: Precision) -> f64 {
        self.tolerance.unwrap_or_else(|| default_tolerance(precision))
    }

    /// The suite's solver with this stopping rule in `precision`.
    pub fn suite(&self, precision: Precision) -> Suite {
        Suite {
            choice: self.choice,
            tolerance: self.tolerance_in(precision),
            max_iterations: self.max_iterations,
            accept_attainable: self.tolerance.is_none(),
        }
    }

    /// The trace solver of these settings in precision T on backend B.
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] for mixed precision asked of an f32 solve.
    pub fn trace_solver<T, B>(&self) -> Result<Box<dyn TraceSolver<T, B>>>
    where
        T: SolverPrecision<B>,
        B: SolverBackend + Backend<T>,
    {
        T::trace_solver(self)
    }
}

/// A backend on which every solver of the suite runs, in both precisions: mixed-precision
/// refinement and the multigrid (in f64 with its V-cycle in f32) included. Every backend of
/// the workspace is one.
pub trait SolverBackend:
    Sized
    + Backend<f64, Operator: DemoteOperator<Self, Low: MultigridOperator<f32, Self>>>
    + Backend<f64, Operator: MultigridOperator<f64, Self>>
    + Backend<f32, Operator: MultigridOperator<f32, Self>>
    + MixedPrecisionOps
    + MultigridOps<f64>
    + MultigridOps<f32>
{
}

impl<B> SolverBackend for B where
    B: Backend<f64, Operator: DemoteOperator<B, Low: MultigridOperator<f32, B>>>
        + Backend<f64, Operator: MultigridOperator<f64, B>>
        + Backend<f32, Operator: MultigridOperator<f32, B>>
        + MixedPrecisionOps
        + MultigridOps<f64>
        + MultigridOps<f32>
{
}

/// A working precision and the trace solvers it has ([`SolverSettings::trace_solver`]).
pub trait SolverPrecision<B: SolverBackend>: Real {
    /// The trace solver of `settings` in this precision.
    ///
    /// # Errors
    /// As [`SolverSettings::trace_solver`].
    fn trace_solver(settings: &SolverSettings) -> Result<Box<dyn TraceSolver<Self, B>>>;
}

impl<B: SolverBackend> SolverPrecision<B> for f64 {
    fn trace_solver(settings: &SolverSettings) -> Result<Box<dyn TraceSolver<f64, B>>> {
        let tolerance = settings.tolerance_in(Precision::F64);
        Ok(match settings.choice {
            SolverChoice::Mixed => Box::new(MixedPrecisionRefinement::with_tolerance(tolerance)),
            _ => Box::new(settings.suite(Precision::F64)),
        })
    }
}

impl<B: SolverBackend> SolverPrecision<B> for f32 {
    fn trace_solver(settings: &SolverSettings) -> Result<Box<dyn TraceSolver<f32, B>>> {
        match settings.choice {
            SolverChoice::Mixed => Err(CoreError::InvalidParameter {
                name: "solver",
                reason: crate::mixed::MIXED_NEEDS_F64.into(),
            }),
            _ => Ok(Box::new(settings.suite(Precision::F32))),
        }
    }
}

impl fmt::Display for SolverChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SolverChoice {
    type Err = String;
    /// A solver by its name ([`SolverChoice::name`]).
    fn from_str(name: &str) -> std::result::Result<Self, String> {
        SolverChoice::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
            let names: Vec<_> = SolverChoice::ALL.iter().map(|c| c.name()).collect();
            format!("unknown solver '{name}' (known: {})", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solver_names_round_trip_and_unknown_ones_list_the_known() {
        for choice in SolverChoice::ALL {
            assert_eq!(choice.name().parse::<SolverChoice>(), Ok(choice));
            assert_eq!(choice.to_string(), choice.name());
        }
        let err = "bicgstab".parse::<SolverChoice>().unwrap_err();
        assert!(err.contains("unknown solver 'bicgstab'") && err.contains("pcg-mg"), "{err}");
    }

    #[test]
    fn the_tolerance_defaults_per_precision() {
        let settings = SolverSettings::default();
        assert_eq!(settings.tolerance_in(Precision::F64), 1e-12);
        assert_eq!(settings.tolerance_in(Precision::F32), 1e-6);
        assert!(settings.suite(Precision::F64).accept_attainable);
        let given = SolverSettings { tolerance: Some(1e-8), ..settings };
        assert_eq!(given.tolerance_in(Precision::F32), 1e-8);
        assert_eq!(given.suite(Precision::F64).tolerance, 1e-8);
        // A tolerance asked for must be met.
        assert!(!given.suite(Precision::F64).accept_attainable);
    }
}
