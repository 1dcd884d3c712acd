//! Batched static condensation: one call of [`condense_element`] per element, in parallel.
//!
//! Per element (see `hdg-formulation.md`; M_k = det/kappa I is diagonal, so q is eliminated
//! for free):
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
use hdg_core::geometry::{metric, GeometryLayout};
use hdg_core::lanes::{Batch, Dense};
use hdg_core::load::element_load;
use hdg_core::{ElementTables, Real, Source};

use crate::dense;

/// Per-thread work space of the condensation.
pub struct CondenseScratch<T> {
    schur: Vec<T>,
    load: Vec<T>,
    /// The load quadrature's points and source values.
    load_points: Vec<f64>,
    /// For elements with coefficients at points (made on first use).
    pub(crate) weighted: Option<crate::weighted::WeightedScratch<T>>,
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

/// Inputs of one element's condensation.
pub struct ElementInput<'a, T> {
    /// Geometry record (see [`GeometryLayout`]).
    pub geometry: &'a [T],
    /// Vertex coordinates, vertex-major.
    pub vertices: &'a [f64],
    /// Orientation code of each local face.
    pub orientations: &'a [u8],
    /// kappa (where it is constant in the element).
    pub kappa: T,
    /// c (where it is constant in the element).
    pub reaction: T,
    /// tau of each local face.
    pub tau: &'a [T],
    /// kappa^-1 and c at quadrature points, where they vary inside the element (then `kappa`
    /// and `reaction` are not read).
    pub points: Option<crate::weighted::ElementPoints<'a, T>>,
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
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (d, n, nf, nfaces) = (t.dim, t.n, t.n_f, t.n_faces);
    let nl = nfaces * nf;
    let g = input.geometry;
    let det = g[layout.det()];
    let jinv = &g[layout.inverse_jacobian()..layout.inverse_jacobian() + d * d];
    let face_jac = &g[layout.face_jacobian()..layout.face_jacobian() + nfaces];
    let normal = &g[layout.normal()..layout.normal() + nfaces * d];
    let kappa = input.kappa;
    let b = metric(d, jinv);

    // S
    s_mat.iter_mut().for_each(|v| *v = T::zero());
    for sd in 0..d {
        for td in 0..d {
            let coef = kappa * det * b[sd * d + td];
            for (sv, &dv) in s_mat.iter_mut().zip(t.derivative_product(sd, td)) {
                *sv += coef * dv;
            }
        }
    }
    for f in 0..nfaces {
        let coef = input.tau[f] * face_jac[f];
        for (sv, &ev) in s_mat.iter_mut().zip(t.face_mass(f)) {
            *sv += coef * ev;
        }
    }
    let mass = input.reaction * det;
    for i in 0..n {
        s_mat[i * n + i] += mass;
    }

    // P
    for f in 0..nfaces {
        let o = input.orientations[f] as usize;
        let mut coef = [T::zero(); 3];
        for (sd, c_s) in coef.iter_mut().enumerate().take(d) {
            let jn: T = (0..d).map(|r| jinv[sd * d + r] * normal[f * d + r]).sum();
            *c_s = kappa * face_jac[f] * jn;
        }
        let tau_f = input.tau[f] * face_jac[f];
        let gt = t.face_trace(f, o);
        let dt: [&[T]; 3] = core::array::from_fn(|sd| match sd < d {
            true => t.derivative_trace(sd, f, o),
            false => &[],
        });
        for i in 0..n {
            let p_row = &mut p[i * nl + f * nf..i * nl + (f + 1) * nf];
            for (m, pv) in p_row.iter_mut().enumerate() {
                let mut v = tau_f * gt[i * nf + m];
                for (dt_s, &c_s) in dt.iter().zip(&coef).take(d) {
                    v += c_s * dt_s[i * nf + m];
                }
                *pv = v;
            }
        }
    }

    // A
    for f in 0..nfaces {
        let of = input.orientations[f] as usize;
        for gf in 0..nfaces {
            let og = input.orientations[gf] as usize;
            let nn: T = (0..d).map(|r| normal[f * d + r] * normal[gf * d + r]).sum();
            let coef = kappa / det * nn * face_jac[f] * face_jac[gf];
            let gtg = t.trace_product(f, of, gf, og);
            for m in 0..nf {
                for l in 0..nf {
                    a[(f * nf + m) * nl + gf * nf + l] = coef * gtg[m * nf + l];
                }
            }
        }
        let tau_f = input.tau[f] * face_jac[f];
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
                scratch.weighted.get_or_insert_with(|| crate::weighted::WeightedScratch::new(t));
            crate::weighted::form_weighted_element_matrices(
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

/// Per-thread work space of [`condense_batch`]: each lane's element as formed, then the lanes.
pub struct BatchScratch<T: Real> {
    /// S and the load of each lane's element (and its load points).
    elements: Vec<CondenseScratch<T>>,
    /// P of each lane's element, one after the other.
    formed_p: Vec<T>,
    /// A of each lane's element, one after the other.
    formed_a: Vec<T>,
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
            formed_p: vec![T::zero(); w * n * nl],
            formed_a: vec![T::zero(); w * nl * nl],
            schur: vec![zero; n * n],
            p: vec![zero; n * nl],
            k: vec![zero; nl * nl],
            load: vec![zero; n],
            trace_load: vec![zero; nl],
        }
    }
}

/// [`condense_element`] for [`Batch::WIDTH`] elements at once, `input(lane)` the element of
/// each lane: each element's matrices and load are formed as [`condense_element`] forms them,
/// and the factorisation and the solves run on lanes, one element per lane
/// ([`hdg_core::lanes`]: the same operations, the same bits). The outputs hold the batch's
/// elements one after the other. Err(pivot) if an element's S is not positive definite (then
/// [`condense_element`] says which element); only elements with coefficients constant in the
/// element (`input(lane).points` is `None`).
pub fn condense_batch<'a, T: Real>(
    t: &ElementTables<T>,
    input: impl Fn(usize) -> ElementInput<'a, T>,
    source: &Source,
    scratch: &mut BatchScratch<T>,
    out: CondensedElement<'_, T>,
) -> Result<(), usize> {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (w, n, nl) = (<T::Lanes as Batch<T>>::WIDTH, t.n, t.n_local_trace());
    for (e, element) in scratch.elements.iter_mut().enumerate() {
        let input = input(e);
        debug_assert!(input.points.is_none());
        let p = &mut scratch.formed_p[e * n * nl..(e + 1) * n * nl];
        let a = &mut scratch.formed_a[e * nl * nl..(e + 1) * nl * nl];
        form_element_matrices(t, &input, &mut element.schur, p, a);
        let det = input.geometry[layout.det()];
        element_load(t, input.vertices, det, source, &mut element.load_points, &mut element.load);
    }
    let elements = &scratch.elements;
    let gather = |values: &mut [T::Lanes], of: &dyn Fn(usize, usize) -> T| {
        for (i, v) in values.iter_mut().enumerate() {
            *v = T::Lanes::gather(|e| of(e, i));
        }
    };
    gather(&mut scratch.schur, &|e, i| elements[e].schur[i]);
    gather(&mut scratch.load, &|e, i| elements[e].load[i]);
    gather(&mut scratch.p, &|e, i| scratch.formed_p[e * n * nl + i]);
    gather(&mut scratch.k, &|e, i| scratch.formed_a[e * nl * nl + i]);

    let (s_mat, p, k, load) =
        (&mut scratch.schur, &mut scratch.p, &mut scratch.k, &mut scratch.load);
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
