//! Batched static condensation: one call of [`condense_element`] per element, in parallel.
//!
//! Per element (see `docs/formulation.md`, section 'Static condensation'; M_k = det/kappa I is
//! diagonal, so q is eliminated for free):
//!
//! ```text
//! S    = c det I + sum_f tau_f |f| E^_f + kappa det sum_{s,t} B_st D^_s D^_t^T     (B = J^-1 J^-T)
//! P_f  = kappa |f| sum_s (J^-1 n_f)_s D^_s G^_{f,o} + tau_f |f| G^_{f,o}
//! A_fg = kappa/det (n_f . n_g) |f||g| G^_{f,o}^T G^_{g,p} + delta_fg tau_f |f| I
//! S = L L^T,  W = L^-1 P,  K_e = A - W^T W,  b_e = W^T L^-1 F,
//! Z = L^-T W = S^-1 P,  u0 = S^-1 F                      (recovery: U = u0 + Z Lambda)
//! ```
//!
//! where |f| is the face Jacobian |F| / |F^param|. Every matrix on the right is a constant table
//! of [`ElementTables`]: per element the kernel forms linear combinations, one Cholesky
//! factorisation and two triangular solves with nl = faces x n_f right-hand sides.
//!
//! [`LocalSolver::condense`](hdg_core::LocalSolver::condense) runs [`condense_batch`]: SIMD
//! lanes of elements (four in f64, eight in f32), each lane the operations of
//! [`condense_element`] on one element, so the results are the same bits. One element alone is
//! a chain of small dependent loops; the lanes make every operation a full-width vector one,
//! and the tables are read once per batch.
use hdg_core::geometry::{metric, GeometryLayout};
use hdg_core::lanes::{Batch, Dense};
use hdg_core::load::element_load;
use hdg_core::{Discretization, ElementTables, HostCondensed, Real, Source};
use rayon::prelude::*;

use super::not_spd;
use super::prepare::{CpuPrepared, ElementInput};
use crate::dense;

/// Per-thread work space of the condensation.
pub struct CondenseScratch<T> {
    schur: Vec<T>,
    load: Vec<T>,
    /// The load quadrature's points and source values.
    load_points: Vec<f64>,
    /// For elements with coefficients at points (made on first use).
    pub(crate) weighted: Option<super::weighted::WeightedScratch<T>>,
}

impl<T: Real> CondenseScratch<T> {
    /// Work space for the given tables.
    pub fn new(t: &ElementTables<T>) -> Self {
        CondenseScratch {
            schur: vec![T::zero(); t.n * t.n],
            load: vec![T::zero(); t.n],
            load_points: Vec::new(),
            weighted: None,
        }
    }
}

/// Outputs of one element's condensation (slices into the batched arrays).
pub struct CondensedElement<'a, T> {
    /// K_e, nl x nl.
    pub trace_matrix: &'a mut [T],
    /// b_e, nl.
    pub trace_load: &'a mut [T],
    /// Z = S^-1 P, n x nl.
    pub recovery_operator: &'a mut [T],
    /// u0 = S^-1 F, n.
    pub recovery_load: &'a mut [T],
}

/// Forms one element's local matrices from its geometry and the reference tables (the first
/// three lines of the module documentation): S (n x n) into `s_mat`, P (n x nl) into `p`,
/// A (nl x nl) into `a`, all row-major and overwritten.
pub fn form_element_matrices<T: Real>(
    t: &ElementTables<T>,
    input: &ElementInput<'_, T>,
    s_mat: &mut [T],
    p: &mut [T],
    a: &mut [T],
) {
    let factors = [MatrixFactors::new(t, input)];
    form_matrices::<T, T>(t, &factors, s_mat, p, a);
}

/// The most elements a batch holds (f32 lanes: 8).
const MAX_WIDTH: usize = 8;

/// Entry `i` of each lane's table (`tables[lane]`): one read for the batch where the lanes'
/// tables are the same (`same`), one per lane where they differ.
#[inline(always)]
fn oriented<T: Real, L: Batch<T>>(same: bool, tables: &[&[T]; MAX_WIDTH], i: usize) -> L {
    match same {
        true => L::splat(tables[0][i]),
        false => L::gather(|e| tables[e][i]),
    }
}

/// One element's factors of the reference tables in S, P and A (the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct MatrixFactors<T> {
    /// kappa det B_st, `[s * d + t]`.
    stiffness: [T; 9],
    /// tau_f |f| (S's face terms, P's trace term, A's diagonal).
    face: [T; 4],
    /// c det.
    mass: T,
    /// kappa |f| (J^-1 n_f)_s, `[f][s]`.
    flux: [[T; 3]; 4],
    /// kappa / det (n_f . n_g) |f| |g|, `[f][g]`.
    trace: [[T; 4]; 4],
    /// The orientation code of each face.
    orientations: [u8; 4],
}

impl<T: Real> MatrixFactors<T> {
    /// The factors of the element `input` (kappa and c constant in it).
    pub fn new(t: &ElementTables<T>, input: &ElementInput<'_, T>) -> Self {
        let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
        let (d, nfaces) = (t.dim, t.n_faces);
        let g = input.geometry;
        let det = g[layout.det()];
        let jinv = &g[layout.inverse_jacobian()..layout.inverse_jacobian() + d * d];
        let face_jac = &g[layout.face_jacobian()..layout.face_jacobian() + nfaces];
        let normal = &g[layout.normal()..layout.normal() + nfaces * d];
        let kappa = input.kappa;
        let b = metric(d, jinv);
        let mut f = MatrixFactors { mass: input.reaction * det, ..Default::default() };
        for sd in 0..d {
            for td in 0..d {
                f.stiffness[sd * d + td] = kappa * det * b[sd * d + td];
            }
        }
        for face in 0..nfaces {
            f.face[face] = input.tau[face] * face_jac[face];
            f.orientations[face] = input.orientations[face];
            for sd in 0..d {
                let jn: T = (0..d).map(|r| jinv[sd * d + r] * normal[face * d + r]).sum();
                f.flux[face][sd] = kappa * face_jac[face] * jn;
            }
            for other in 0..nfaces {
                let nn: T = (0..d).map(|r| normal[face * d + r] * normal[other * d + r]).sum();
                f.trace[face][other] = kappa / det * nn * face_jac[face] * face_jac[other];
            }
        }
        f
    }
}

/// S, P and A of [`form_element_matrices`] for one element (`L` = `T`, one factor set) or a
/// batch (`L` = lanes, one factor set per lane): the same operations on every lane. A table
/// that depends on the face orientations is read once for the batch where its lanes agree,
/// lane by lane where they differ.
pub fn form_matrices<'t, T: Real, L: Batch<T>>(
    t: &'t ElementTables<T>,
    factors: &[MatrixFactors<T>],
    s_mat: &mut [L],
    p: &mut [L],
    a: &mut [L],
) {
    let (d, n, nf, nfaces) = (t.dim, t.n, t.n_f, t.n_faces);
    let nl = nfaces * nf;
    let lanes = |value: &dyn Fn(&MatrixFactors<T>) -> T| L::gather(|e| value(&factors[e]));
    let uniform =
        |f: usize| factors.iter().all(|x| x.orientations[f] == factors[0].orientations[f]);
    // Each lane's table for its face orientations (`table(lane)`).
    let per_lane = |table: &dyn Fn(usize) -> &'t [T]| -> [&'t [T]; MAX_WIDTH] {
        core::array::from_fn(|e| table(e.min(factors.len() - 1)))
    };

    // S
    s_mat.iter_mut().for_each(|v| *v = L::zero());
    for sd in 0..d {
        for td in 0..d {
            let coef = lanes(&|x| x.stiffness[sd * d + td]);
            for (sv, &dv) in s_mat.iter_mut().zip(t.derivative_product(sd, td)) {
                *sv += coef * L::splat(dv);
            }
        }
    }
    for f in 0..nfaces {
        let coef = lanes(&|x| x.face[f]);
        for (sv, &ev) in s_mat.iter_mut().zip(t.face_mass(f)) {
            *sv += coef * L::splat(ev);
        }
    }
    let mass = lanes(&|x| x.mass);
    for i in 0..n {
        s_mat[i * n + i] += mass;
    }

    // P
    for f in 0..nfaces {
        let same = uniform(f);
        let coef: [L; 3] = core::array::from_fn(|sd| lanes(&|x| x.flux[f][sd.min(d - 1)]));
        let tau_f = lanes(&|x| x.face[f]);
        let orientation = |e: usize| factors[e].orientations[f] as usize;
        let gt = per_lane(&|e| t.face_trace(f, orientation(e)));
        let dt: [[&[T]; MAX_WIDTH]; 3] = core::array::from_fn(|sd| {
            per_lane(&|e| t.derivative_trace(sd.min(d - 1), f, orientation(e)))
        });
        for i in 0..n {
            let p_row = &mut p[i * nl + f * nf..i * nl + (f + 1) * nf];
            for (m, pv) in p_row.iter_mut().enumerate() {
                let mut v = tau_f * oriented(same, &gt, i * nf + m);
                for (dt_s, &c_s) in dt.iter().zip(&coef).take(d) {
                    v += c_s * oriented(same, dt_s, i * nf + m);
                }
                *pv = v;
            }
        }
    }

    // A
    for f in 0..nfaces {
        for gf in 0..nfaces {
            let same = uniform(f) && uniform(gf);
            let coef = lanes(&|x| x.trace[f][gf]);
            let gtg = per_lane(&|e| {
                let x = &factors[e];
                t.trace_product(f, x.orientations[f] as usize, gf, x.orientations[gf] as usize)
            });
            for m in 0..nf {
                for l in 0..nf {
                    a[(f * nf + m) * nl + gf * nf + l] = coef * oriented(same, &gtg, m * nf + l);
                }
            }
        }
        let tau_f = lanes(&|x| x.face[f]);
        for m in 0..nf {
            a[(f * nf + m) * nl + f * nf + m] += tau_f;
        }
    }
}

/// Condenses one element. Returns the failing pivot if S is not positive definite (a pivot
/// n + j: the j-th of the weighted flux mass matrix, where coefficients vary in the element).
pub fn condense_element<T: Real>(
    t: &ElementTables<T>,
    input: &ElementInput<'_, T>,
    source: &Source,
    scratch: &mut CondenseScratch<T>,
    out: CondensedElement<'_, T>,
) -> Result<(), (usize, T)> {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (n, nl) = (t.n, t.n_local_trace());
    let det = input.geometry[layout.det()];
    // S into the scratch, P into the recovery operator's storage (it becomes W, then Z, in
    // place), A into K_e's storage.
    let s_mat = &mut scratch.schur;
    let p = &mut *out.recovery_operator;
    let k = &mut *out.trace_matrix;
    match &input.points {
        None => form_element_matrices(t, input, s_mat, p, k),
        Some(points) => {
            let weighted =
                scratch.weighted.get_or_insert_with(|| super::weighted::WeightedScratch::new(t));
            super::weighted::form_weighted_element_matrices(
                t, input, points, weighted, s_mat, p, k,
            )
            .map_err(|(pivot, value)| (n + pivot, value))?;
        }
    }

    let load = &mut scratch.load;
    element_load(t, input.vertices, det, source, &mut scratch.load_points, load);

    dense::cholesky(n, s_mat)?;
    dense::forward_substitution(n, nl, s_mat, p); // W = L^-1 P
    dense::subtract_gram(n, nl, p, k); // K_e = A - W^T W
    dense::forward_substitution(n, 1, s_mat, load); // w0 = L^-1 F
    dense::transpose_times(n, nl, p, load, out.trace_load); // b_e = W^T w0
    dense::backward_substitution(n, nl, s_mat, p); // Z = L^-T W
    dense::backward_substitution(n, 1, s_mat, load); // u0 = L^-T w0
    out.recovery_load.copy_from_slice(load);
    Ok(())
}

/// Per-thread work space of [`condense_batch`].
pub struct BatchScratch<T: Real> {
    /// The load of each lane's element (and its load points).
    elements: Vec<CondenseScratch<T>>,
    factors: Vec<MatrixFactors<T>>,
    schur: Vec<T::Lanes>,
    p: Vec<T::Lanes>,
    k: Vec<T::Lanes>,
    load: Vec<T::Lanes>,
    trace_load: Vec<T::Lanes>,
}

impl<T: Real> BatchScratch<T> {
    /// Work space for the given tables.
    pub fn new(t: &ElementTables<T>) -> Self {
        let (w, n, nl) = (<T::Lanes as Batch<T>>::WIDTH, t.n, t.n_local_trace());
        let zero = <T::Lanes as Dense>::zero();
        BatchScratch {
            elements: (0..w).map(|_| CondenseScratch::new(t)).collect(),
            factors: vec![MatrixFactors::default(); w],
            schur: vec![zero; n * n],
            p: vec![zero; n * nl],
            k: vec![zero; nl * nl],
            load: vec![zero; n],
            trace_load: vec![zero; nl],
        }
    }
}

/// [`condense_element`] for [`Batch::WIDTH`] elements at once, `input(lane)` the element of
/// each lane, one element per lane ([`hdg_core::lanes`]: the same operations, the same bits):
/// the matrices formed by [`form_matrices`] on lanes, each element's load as
/// [`condense_element`] computes it, then the factorisation and the solves on lanes. The
/// outputs hold the batch's elements one after the other. Err(pivot) if an element's S is not
/// positive definite (then [`condense_element`] says which element); only elements with
/// coefficients constant in the element (`input(lane).points` is `None`).
pub fn condense_batch<'a, T: Real>(
    t: &ElementTables<T>,
    input: impl Fn(usize) -> ElementInput<'a, T>,
    source: &Source,
    scratch: &mut BatchScratch<T>,
    out: CondensedElement<'_, T>,
) -> Result<(), usize> {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (w, n, nl) = (<T::Lanes as Batch<T>>::WIDTH, t.n, t.n_local_trace());
    for (e, (element, factors)) in scratch.elements.iter_mut().zip(&mut scratch.factors).enumerate()
    {
        let input = input(e);
        debug_assert!(input.points.is_none());
        *factors = MatrixFactors::new(t, &input);
        let det = input.geometry[layout.det()];
        element_load(t, input.vertices, det, source, &mut element.load_points, &mut element.load);
    }
    let (s_mat, p, k, load) =
        (&mut scratch.schur, &mut scratch.p, &mut scratch.k, &mut scratch.load);
    form_matrices(t, &scratch.factors, s_mat, p, k);
    for (i, v) in load.iter_mut().enumerate() {
        *v = T::Lanes::gather(|e| scratch.elements[e].load[i]);
    }

    dense::cholesky(n, s_mat).map_err(|(pivot, _)| pivot)?;
    dense::forward_substitution(n, nl, s_mat, p);
    dense::subtract_gram(n, nl, p, k);
    dense::forward_substitution(n, 1, s_mat, load);
    dense::transpose_times(n, nl, p, load, &mut scratch.trace_load);
    dense::backward_substitution(n, nl, s_mat, p);
    dense::backward_substitution(n, 1, s_mat, load);

    let scatter = |values: &[T::Lanes], out: &mut [T]| {
        let len = values.len();
        for (i, v) in values.iter().enumerate() {
            for e in 0..w {
                out[e * len + i] = v.lane(e);
            }
        }
    };
    scatter(k, out.trace_matrix);
    scatter(&scratch.trace_load, out.trace_load);
    scatter(p, out.recovery_operator);
    scatter(load, out.recovery_load);
    Ok(())
}

/// Floating-point operations of [`condense_element`] (the load quadrature included), for
/// GFLOP/s reports.
pub fn condensation_flops<T: Real>(t: &ElementTables<T>) -> f64 {
    let (d, n, nl, nf, faces) =
        (t.dim as f64, t.n as f64, t.n_local_trace() as f64, t.n_f as f64, t.n_faces as f64);
    let nq = t.load_rule.n_points() as f64;
    let schur = 2.0 * (d * d + faces) * n * n;
    let p = 2.0 * (d + 1.0) * n * nl;
    let a = faces * faces * nf * nf;
    let load = 2.0 * nq * n;
    let solves = 2.0 * n * n * nl + 2.0 * n * n; // two triangular solves, nl + 1 columns
    let gram = n * nl * (nl + 1.0);
    schur + p + a + load + dense::cholesky_flops(t.n) + solves + gram + 2.0 * n * nl
}

/// The condensation's parallel loop over the elements (see [`LocalSolver::condense`]), in
/// batches of [`Batch::WIDTH`] elements ([`condense_batch`]); a partial batch, a
/// batch with a coefficient varying inside a cell or one that fails goes element by element
/// (which says which element failed).
fn condense_all<T: Real>(
    disc: &Discretization<'_, T>,
    prep: &CpuPrepared<T>,
    out: &mut HostCondensed<T>,
    source: &hdg_core::Source,
) -> hdg_core::Result<()> {
    let t = &disc.tables;
    let (n, nl) = (t.n, t.n_local_trace());
    let w = <T::Lanes as Batch<T>>::WIDTH;
    let input = |e: usize| prep.element_input(disc, e);
    // The source runs on Rayon's workers: a panic there is the caller's run_user's to report.
    let capture = hdg_core::user_code::Capture::current();
    (
        out.trace_matrices.par_chunks_mut(w * nl * nl),
        out.trace_loads.par_chunks_mut(w * nl),
        out.recovery_operator.par_chunks_mut(w * n * nl),
        out.recovery_load.par_chunks_mut(w * n),
    )
        .into_par_iter()
        .enumerate()
        .with_min_len(8)
        .try_for_each_init(
            || (CondenseScratch::new(t), BatchScratch::new(t)),
            |(scratch, batch_scratch), (batch, (k, b, z, u0))| {
                capture.within(|| {
                    let first = batch * w;
                    let count = u0.len() / n;
                    let constant = disc.point_coefficients.is_none();
                    if count == w && constant {
                        let outputs = CondensedElement {
                            trace_matrix: &mut *k,
                            trace_load: &mut *b,
                            recovery_operator: &mut *z,
                            recovery_load: &mut *u0,
                        };
                        let batched = condense_batch(
                            t,
                            |lane| input(first + lane),
                            source,
                            batch_scratch,
                            outputs,
                        );
                        if batched.is_ok() {
                            return Ok(());
                        }
                    }
                    for (i, (((k, b), z), u0)) in k
                        .chunks_exact_mut(nl * nl)
                        .zip(b.chunks_exact_mut(nl))
                        .zip(z.chunks_exact_mut(n * nl))
                        .zip(u0.chunks_exact_mut(n))
                        .enumerate()
                    {
                        let e = first + i;
                        let outputs = CondensedElement {
                            trace_matrix: k,
                            trace_load: b,
                            recovery_operator: z,
                            recovery_load: u0,
                        };
                        condense_element(t, &input(e), source, scratch, outputs)
                            .map_err(|p| not_spd(e, p))?;
                    }
                    Ok(())
                })
            },
        )
}

/// The stage: every element condensed, in parallel; a source that is not finite is refused
/// with its cell.
pub(crate) fn condense<T: Real>(
    disc: &Discretization<'_, T>,
    prep: &CpuPrepared<T>,
) -> hdg_core::Result<HostCondensed<T>> {
    let t = &disc.tables;
    let (n, nl) = (t.n, t.n_local_trace());
    let n_cells = disc.mesh.n_cells();
    let mut out = HostCondensed {
        trace_matrices: vec![T::zero(); n_cells * nl * nl],
        trace_loads: vec![T::zero(); n_cells * nl],
        recovery_operator: vec![T::zero(); n_cells * n * nl],
        recovery_load: vec![T::zero(); n_cells * n],
    };
    let source = &disc.problem.source;
    let condensed = hdg_core::user_code::run_user("the source f (in the element loads)", || {
        condense_all(disc, prep, &mut out, source)
    })?;
    condensed?;
    // F_K enters b_e and u0: a source that is not finite shows there, cell by cell.
    if let Some(i) = out.trace_loads.iter().position(|v| !v.is_finite()) {
        let e = i / nl;
        return Err(hdg_core::user_code::not_finite(
            "the element load (f, phi_i) of the source f",
            out.trace_loads[i].as_f64(),
            format!("on cell {e}"),
        ));
    }
    Ok(out)
}
