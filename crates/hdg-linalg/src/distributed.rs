//! The suite's solvers in a distributed run (feature `distributed`): every Krylov solver runs
//! unchanged over `hdg_core::distributed`'s operations and operator; `pcg-mg` builds its
//! hierarchy on the rank's rows, the first vertex level split among the ranks and coarsened
//! where it lies, the coarser ones replicated (`hdg_core::distributed`'s multigrid), its
//! V-cycle in f32 in an f64 solve as on one process; mixed-precision refinement runs over the
//! ranks as on one process (its f32 copy is each rank's rows rounded); the direct solver
//! factors the whole matrix on rank 0, its rows gathered there in the one-process run's
//! numbering (`GatheredRows`), and sends each rank its rows of the solution. The trace
//! smoother's bfloat16 copy (`MultigridSettings::compressed_smoothing`) is not used.
use hdg_core::distributed::{
    agree, DistributedOperator, DistributedOps, DistributedSetup, DistributedSolver, GatheredRows,
};
use hdg_core::{
    Backend, CoreError, DemoteOperator, HaloOps, HostCsr, KrylovSolver, MixedPrecisionOps,
    MultigridOperator, MultigridOps, Real, Result, SolveReport, VectorOps,
};

use crate::direct::{HostSystem, SINGULAR_REFUSAL};
use crate::mixed::MIXED_NEEDS_F64;
use crate::multigrid::{Multigrid, MultigridSettings};
use crate::suite::pcg_with;
use crate::{DirectCholesky, MixedPrecisionRefinement, SinglePrecision, SolverChoice, Suite};

/// What a distributed solve does in its precision `Self`: `pcg-mg` (its V-cycle in f32 inside
/// an f64 solve) and mixed-precision refinement (f64 only).
pub trait DistributedPrecision<B: Backend<Self> + HaloOps<Self>>: Real {
    /// CG with the multigrid preconditioner over the ranks.
    fn pcg_mg(
        suite: &Suite,
        ops: &DistributedOps<'_, B, B::Indices>,
        operator: &DistributedOperator<'_, Self, B, B::Operator>,
        setup: &DistributedSetup<'_>,
        rhs: &<B as VectorOps<Self>>::Vector,
        x: &mut <B as VectorOps<Self>>::Vector,
    ) -> Result<SolveReport>;

    /// Iterative refinement in f64 with f32 inner solves, over the ranks.
    fn mixed(
        suite: &Suite,
        ops: &DistributedOps<'_, B, B::Indices>,
        operator: &DistributedOperator<'_, Self, B, B::Operator>,
        rhs: &<B as VectorOps<Self>>::Vector,
        x: &mut <B as VectorOps<Self>>::Vector,
    ) -> Result<SolveReport>;
}

/// The rows of every rank gathered on rank 0: a direct solve's host system in a distributed
/// run.
struct Gathered<'a> {
    rows: GatheredRows<'a>,
    matrix: Option<HostCsr>,
}

impl<T, B> HostSystem<T, DistributedOps<'_, B, B::Indices>> for Gathered<'_>
where
    T: Real,
    B: HaloOps<T>,
{
    fn matrix(&self) -> Option<&HostCsr> {
        self.matrix.as_ref()
    }

    fn vector_to_host(
        &self,
        ops: &DistributedOps<'_, B, B::Indices>,
        v: &<B as VectorOps<T>>::Vector,
    ) -> Result<Option<Vec<f64>>> {
        let local = agree(ops.comm, ops.local.to_host(v))?;
        Ok(self.rows.vector(&local.iter().map(|v| v.as_f64()).collect::<Vec<_>>()))
    }

    fn vector_from_host(
        &self,
        ops: &DistributedOps<'_, B, B::Indices>,
        x: Option<&[f64]>,
    ) -> Result<<B as VectorOps<T>>::Vector> {
        let local: Vec<T> = self.rows.scatter(x).into_iter().map(T::from_f64_lossy).collect();
        ops.local.copy_from_host(&local)
    }

    fn agree(&self, notes: Result<Vec<String>>) -> Result<Vec<String>> {
        let comm = self.rows.comm();
        let notes = agree(comm, notes)?.join("\n");
        let notes = hdg_core::distributed::agree::broadcast_text(comm, 0, &notes);
        let mut notes: Vec<String> = notes.lines().map(String::from).collect();
        notes.push(format!(
            "the trace matrix gathered on rank 0 from {} ranks",
            hdg_core::distributed::size(comm)
        ));
        Ok(notes)
    }
}

/// The sparse factorisation over the ranks: the whole matrix on rank 0 (refused for a
/// singular operator, as on one process).
fn direct<T, B>(
    ops: &DistributedOps<'_, B, B::Indices>,
    operator: &DistributedOperator<'_, T, B, B::Operator>,
    setup: &DistributedSetup<'_>,
    rhs: &<B as VectorOps<T>>::Vector,
    x: &mut <B as VectorOps<T>>::Vector,
) -> Result<SolveReport>
where
    T: Real,
    B: Backend<T> + HaloOps<T>,
{
    if setup.constant_trace.is_some() {
        return Err(CoreError::Solver(SINGULAR_REFUSAL.into()));
    }
    let system = || {
        let (rows, matrix) = operator.gather_on_root(setup.row_faces)?;
        Ok(Gathered { rows, matrix })
    };
    DirectCholesky::solve_on(ops, operator, system, rhs, x)
}

fn settings(setup: &DistributedSetup<'_>, single_precision: bool) -> MultigridSettings {
    MultigridSettings {
        single_precision,
        compressed_smoothing: false,
        singular: setup.constant_trace.is_some(),
        ..MultigridSettings::auto(setup.dim, setup.order)
    }
}

/// CG with a multigrid in the solve's own precision over the ranks; on a singular operator
/// (pure Neumann) with the constants projected out of each correction, as on one process.
fn same_precision_pcg_mg<T, B>(
    suite: &Suite,
    ops: &DistributedOps<'_, B, B::Indices>,
    operator: &DistributedOperator<'_, T, B, B::Operator>,
    setup: &DistributedSetup<'_>,
    rhs: &<B as VectorOps<T>>::Vector,
    x: &mut <B as VectorOps<T>>::Vector,
) -> Result<SolveReport>
where
    T: Real,
    B: Backend<T> + HaloOps<T> + MultigridOps<T>,
    B::Operator: MultigridOperator<T, B>,
{
    let mg = Multigrid::new(ops, operator, space(setup)?, setup.topology, &settings(setup, false))?;
    let sizes = mg.level_sizes();
    check_levels(ops, &sizes)?;
    let notes = notes::<T, B>(ops, &sizes, mg.notes());
    match setup.constant_trace {
        Some(z) => {
            let z: Vec<T> = z.iter().map(|&v| T::from_f64_lossy(v)).collect();
            let projected = crate::ProjectOut::new(ops, &mg, ops.copy_from_host(&z)?)?;
            pcg_with(suite, ops, operator, &projected, &notes, rhs, x)
        }
        None => pcg_with(suite, ops, operator, &mg, &notes, rhs, x),
    }
}

fn space<'s>(setup: &DistributedSetup<'s>) -> Result<&'s hdg_core::VertexSpace> {
    setup
        .vertex_space
        .ok_or_else(|| CoreError::Solver("pcg-mg: the distributed run made no vertex space".into()))
}

/// The notes of a distributed multigrid: its own, and how its first vertex level is laid out.
fn notes<T, B>(
    ops: &DistributedOps<'_, B, B::Indices>,
    sizes: &[usize],
    own: &[String],
) -> Vec<String>
where
    T: Real,
    B: HaloOps<T> + MultigridOps<T>,
{
    let mut notes = own.to_vec();
    let ranks = hdg_core::distributed::size(ops.comm);
    let split = sizes.get(1).is_some_and(|&n| MultigridOps::<T>::split_level(ops, n).is_some());
    notes.push(match (ranks > 1, split) {
        (true, true) => {
            "vertex levels: the first distributed by vertex ownership (halo exchanges), the \
                         coarser ones whole on every rank"
                .into()
        }
        (true, false) => "vertex level: whole on every rank (solved exactly)".into(),
        (false, _) => "vertex levels: one rank".into(),
    });
    notes
}

/// A replicated vertex level whose size is every rank's trace length could not be told from
/// the trace vectors by its reductions (`DistributedOps`): refused rather than wrong (on every
/// rank alike).
fn check_levels<B, I>(ops: &DistributedOps<'_, B, I>, sizes: &[usize]) -> Result<()> {
    let clash = sizes[1..].contains(&ops.halo.len());
    let clashes = hdg_core::distributed::agree::sum_count(ops.comm, clash as usize);
    match clashes == hdg_core::distributed::size(ops.comm) {
        true => Err(CoreError::Solver(
            "pcg-mg: a vertex level has as many unknowns as every rank's trace vectors; use \
             another number of ranks"
                .into(),
        )),
        false => Ok(()),
    }
}

impl<B> DistributedPrecision<B> for f32
where
    B: Backend<f32> + HaloOps<f32> + MultigridOps<f32>,
    B::Operator: MultigridOperator<f32, B>,
{
    fn pcg_mg(
        suite: &Suite,
        ops: &DistributedOps<'_, B, B::Indices>,
        operator: &DistributedOperator<'_, f32, B, B::Operator>,
        setup: &DistributedSetup<'_>,
        rhs: &<B as VectorOps<f32>>::Vector,
        x: &mut <B as VectorOps<f32>>::Vector,
    ) -> Result<SolveReport> {
        same_precision_pcg_mg(suite, ops, operator, setup, rhs, x)
    }

    fn mixed(
        _: &Suite,
        _: &DistributedOps<'_, B, B::Indices>,
        _: &DistributedOperator<'_, f32, B, B::Operator>,
        _: &<B as VectorOps<f32>>::Vector,
        _: &mut <B as VectorOps<f32>>::Vector,
    ) -> Result<SolveReport> {
        Err(CoreError::InvalidParameter { name: "solver", reason: MIXED_NEEDS_F64.into() })
    }
}

impl<B, I> DistributedPrecision<B> for f64
where
    B: Backend<f64>
        + HaloOps<f64, Indices = I>
        + HaloOps<f32, Indices = I>
        + MultigridOps<f64>
        + MultigridOps<f32>
        + MixedPrecisionOps,
    B::Operator: DemoteOperator<B> + MultigridOperator<f64, B>,
    <B::Operator as DemoteOperator<B>>::Low: MultigridOperator<f32, B>,
    I: Send + Sync,
{
    fn pcg_mg(
        suite: &Suite,
        ops: &DistributedOps<'_, B, I>,
        operator: &DistributedOperator<'_, f64, B, B::Operator>,
        setup: &DistributedSetup<'_>,
        rhs: &<B as VectorOps<f64>>::Vector,
        x: &mut <B as VectorOps<f64>>::Vector,
    ) -> Result<SolveReport> {
        if setup.constant_trace.is_some() {
            // A rounded copy of a singular operator has a slightly different null space (the
            // cycle would feed CG inconsistent corrections): the whole cycle in f64.
            return same_precision_pcg_mg(suite, ops, operator, setup, rhs, x);
        }
        let low = operator.demote()?;
        let mg = Multigrid::<f32, DistributedOps<'_, B, I>>::new(
            ops,
            &low,
            space(setup)?,
            setup.topology,
            &settings(setup, true),
        )?;
        let sizes = mg.level_sizes();
        check_levels(ops, &sizes)?;
        let notes = notes::<f32, B>(ops, &sizes, mg.notes());
        pcg_with(suite, ops, operator, &SinglePrecision::new(&mg), &notes, rhs, x)
    }

    fn mixed(
        suite: &Suite,
        ops: &DistributedOps<'_, B, I>,
        operator: &DistributedOperator<'_, f64, B, B::Operator>,
        rhs: &<B as VectorOps<f64>>::Vector,
        x: &mut <B as VectorOps<f64>>::Vector,
    ) -> Result<SolveReport> {
        MixedPrecisionRefinement::with_tolerance(suite.tolerance)
            .solve_demoted(ops, operator, rhs, x)
    }
}

impl<T, B> DistributedSolver<T, B> for Suite
where
    T: DistributedPrecision<B>,
    B: Backend<T> + HaloOps<T> + MultigridOps<T>,
    B::Operator: MultigridOperator<T, B>,
{
    fn name(&self) -> String {
        self.choice.name().into()
    }

    fn vertex_space(&self, dim: usize, order: usize) -> Option<f64> {
        (self.choice == SolverChoice::PcgMg)
            .then(|| MultigridSettings::auto(dim, order).split_ratio)
    }

    fn solve(
        &self,
        ops: &DistributedOps<'_, B, B::Indices>,
        operator: &DistributedOperator<'_, T, B, B::Operator>,
        setup: &DistributedSetup<'_>,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        match self.choice {
            SolverChoice::Direct => direct(ops, operator, setup, rhs, x),
            SolverChoice::Mixed => T::mixed(self, ops, operator, rhs, x),
            SolverChoice::PcgMg => T::pcg_mg(self, ops, operator, setup, rhs, x),
            _ => KrylovSolver::solve(self, ops, operator, rhs, x),
        }
    }
}
