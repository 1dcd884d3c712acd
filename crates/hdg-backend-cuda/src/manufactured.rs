//! The built-in manufactured problems on the device (`kernels/manufactured.cu`): the element
//! loads F_K and the L2 error norms computed where the fields are, with no host closure and no
//! host round trip.
//!
//! A problem knows whether its source and exact solution are manufactured
//! ([`hdg_core::Source::Manufactured`], [`hdg_core::ExactSolution::Manufactured`]); a closure
//! put in their place replaces the description. The kernels evaluate the manufactured ones with
//! device code that `build.rs` generates from the solutions' description in `hdg_core::
//! manufactured` (`build/manufactured_code.rs`), so there is nothing to check at run time: the
//! device performs the host's arithmetic in the host's order, and only its sin, cos, exp, sinh
//! and cosh may differ from the host's in the last bits (`tests/gpu.rs` compares both).
//!
//! The kernels read the mesh on the device ([`DeviceMesh`]); the quadrature tables are uploaded
//! per use.
use cust::memory::DeviceBuffer;
use hdg_core::tables::error_evaluation_names;
use hdg_core::{ElementTables, ExactSolution, Result, Source};

use crate::constant_operator::{OperatorPath, PanelKernel};
use crate::device::{address, arg, grid, reduce_blocks, CudaBackend, DeviceReal};
use crate::geometry::DeviceMesh;
use crate::settings::PointEvaluation;
use crate::solution_numbers::solution_number;
use crate::vector::uninitialized;

/// A manufactured source as the loads kernel takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DeviceSource {
    /// The solution's number ([`solution_number`]).
    solution: u32,
    kappa: f64,
    reaction: f64,
}

impl DeviceSource {
    /// The device's form of `source`; None for a closure (host code) or a solution without
    /// device code.
    pub(crate) fn of(source: &Source) -> Option<DeviceSource> {
        match source {
            Source::Manufactured(spec) => Some(DeviceSource {
                solution: solution_number(spec.solution)?,
                kappa: spec.kappa,
                reaction: spec.reaction,
            }),
            Source::Closure { .. } => None,
        }
    }
}

/// The device's number of `exact`; None for closures or a solution without device code.
pub(crate) fn device_solution(exact: &ExactSolution) -> Option<u32> {
    match exact {
        ExactSolution::Manufactured(m) => solution_number(*m),
        ExactSolution::Closures { .. } | ExactSolution::Value { .. } => None,
    }
}

impl DeviceSource {
    /// The element loads F_K (`[i * n_cells + e]`), as `hdg_core::load::element_load`
    /// computes them. `geometry` is the element-fastest geometry (plane 0: det).
    pub(crate) fn loads<T: DeviceReal>(
        &self,
        backend: &CudaBackend,
        mesh: &DeviceMesh,
        tables: &ElementTables<T>,
        geometry: &DeviceBuffer<T>,
    ) -> Result<DeviceBuffer<T>> {
        let gpu = &backend.gpu;
        let (n, nc) = (tables.n, mesh.n_cells);
        let rule = &tables.load_rule;
        let points = gpu.upload(&rule.points)?;
        let weights = gpu.upload(&rule.weights)?;
        let basis = gpu.upload(&tables.load_basis)?;
        // SAFETY: the kernel writes all n * n_cells entries.
        let load = unsafe { uninitialized::<T>(backend, n * nc)? };
        if nc > 0 {
            let (nc64, nq, n32) = (nc as u64, rule.n_points() as u32, n as u32);
            let (vp, cp, gp, pp, wp, bp, lp) = (
                address(&mesh.vertices),
                address(&mesh.cell_vertices),
                address(geometry),
                address(&points),
                address(&weights),
                address(&basis),
                address(&load),
            );
            let kernel =
                format!("manufactured_loads_{}_d{}_sol{}", T::SUFFIX, mesh.dim, self.solution);
            // SAFETY: manufactured_loads_T_dD_solS(u64 nc, f64 kappa, f64
            // reaction, const f64* vertices, const
            // unsigned* cell_vertices, const T* geometry, unsigned nq, const f64* points, const
            // f64* weights, unsigned n, const T* basis, T* load): vertices and the (D + 1) * nc
            // vertex table of this mesh (every index < n_vertices), geometry's plane 0 holds
            // nc dets, the rule's nq points (D coordinates each) and weights, basis nq * n
            // values, load n * nc entries; one thread per cell.
            unsafe {
                gpu.launch(
                    &kernel,
                    grid(nc)?,
                    &[
                        arg(&nc64),
                        arg(&self.kappa),
                        arg(&self.reaction),
                        arg(&vp),
                        arg(&cp),
                        arg(&gp),
                        arg(&nq),
                        arg(&pp),
                        arg(&wp),
                        arg(&n32),
                        arg(&bp),
                        arg(&lp),
                    ],
                )?
            };
        }
        // The tables are freed when this returns: wait for the kernel that reads them.
        gpu.synchronize()?;
        Ok(load)
    }
}

/// The squared L2 errors of u_h, q_h and u* against the solution numbered `solution`
/// ([`device_solution`]), summed over the cells (as `hdg_core::error_norms::error_norms` does
/// per cell), from the element-fastest fields, and how the fields were evaluated at the points.
///
/// With [`PointEvaluation::Operators`] (or [`PointEvaluation::Auto`] where [`operators_win`]), the
/// evaluation operators ([`crate::constant_operator`]: cuBLAS, the built-in kernels or the dense
/// fallback) write the fields at the error rule's points for a panel of cells at a time and
/// `manufactured_errors_at_points` compares them with the solution; with [`PointEvaluation::Loop`]
/// one thread per cell sums the basis at every point (`manufactured_errors`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn squared_errors<T: DeviceReal>(
    backend: &CudaBackend,
    solution: u32,
    mesh: &DeviceMesh,
    tables: &ElementTables<T>,
    geometry: &DeviceBuffer<T>,
    kappa: &DeviceBuffer<T>,
    u: &DeviceBuffer<T>,
    q: &DeviceBuffer<T>,
    u_star: &DeviceBuffer<T>,
    first: Option<usize>,
) -> Result<([f64; 3], PointKernels)> {
    let gpu = &backend.gpu;
    let nc = mesh.n_cells;
    let use_operators = match backend.settings().point_evaluation {
        PointEvaluation::Auto => operators_win(mesh.dim, tables.n, tables.n_post),
        PointEvaluation::Operators => true,
        PointEvaluation::Loop => false,
    };
    let operators =
        if use_operators { Some(evaluation_operators::<T>(backend, tables)?) } else { None };
    let evaluation = match &operators {
        Some([basis, post]) => PointKernels::Operators { basis: basis.path(), post: post.path() },
        None => PointKernels::Loop,
    };
    if nc == 0 {
        return Ok(([0.0; 3], evaluation));
    }
    let rule = &tables.error_rule;
    let points = gpu.upload(&rule.points)?;
    let weights = gpu.upload(&rule.weights)?;
    // SAFETY: the error kernels write all 3 * nc entries before the partials kernel reads them.
    let errors = unsafe { uninitialized::<f64>(backend, 3 * nc)? };
    let fields = ErrorFields { mesh, tables, geometry, kappa, u, q, u_star, points, weights };
    let nc64 = nc as u64;
    let ep = address(&errors);
    match operators {
        Some(ops) => fields.errors_from_operators(backend, solution, ops, &errors)?,
        None => fields.errors_by_loop(backend, solution, &errors)?,
    }
    if let Some(cells) = first.filter(|&c| c < nc) {
        // Cells 0..cells only (a distributed run's owned cells): the per-cell errors summed on
        // the host, in cell order.
        let errors = gpu.download(&errors)?;
        let mut sums = [0.0; 3];
        for (c, sum) in sums.iter_mut().enumerate() {
            *sum = errors[c * nc..c * nc + cells].iter().sum();
        }
        return Ok((sums, evaluation));
    }
    let blocks = reduce_blocks(nc) as usize;
    // SAFETY: the kernel writes all 3 * blocks partials.
    let partials = unsafe { uninitialized::<f64>(backend, 3 * blocks)? };
    let pp = address(&partials);
    // SAFETY: manufactured_error_partials(u64 nc, const f64* errors, f64* partials) with
    // `blocks` blocks of 256 threads: reads 3 * nc errors, writes 3 * blocks partials.
    unsafe {
        gpu.launch("manufactured_error_partials", blocks as u32, &[arg(&nc64), arg(&ep), arg(&pp)])?
    };
    let partials = gpu.download(&partials)?;
    // In block order: the same total every run.
    let mut sums = [0.0; 3];
    for (c, sum) in sums.iter_mut().enumerate() {
        *sum = partials[c * blocks..(c + 1) * blocks].iter().sum();
    }
    Ok((sums, evaluation))
}

/// Whether the operator kernels evaluate the fields at the points faster than the loop kernel, for
/// n basis functions of u_h (D + 1 fields with q_h) and n' of u*: when the loop kernel reads more
/// than 40 coefficients per point, n (D + 1) + n' > 40 (triangles from k = 3, tetrahedra from
/// k = 2), the line the measurement per order draws (benchmarks/history/constant-operators.md,
/// section 'Constant operators in the pipeline: the device error norms'): below it the loop
/// kernel's reads stay in cache and the operators' round trip of the values through device memory
/// costs more; above it the loop kernel falls out of cache.
pub(crate) fn operators_win(dim: usize, n: usize, n_post: usize) -> bool {
    n * (dim + 1) + n_post > 40
}

/// The error norms' two evaluation operators for these tables' cell type, order and precision
/// (`hdg_core::tables::error_evaluation_names`): the basis and the postprocessing basis at the
/// error rule's points.
fn evaluation_operators<T: DeviceReal>(
    backend: &CudaBackend,
    tables: &ElementTables<T>,
) -> Result<[PanelKernel<T>; 2]> {
    let [basis_name, post_name] = error_evaluation_names(tables.cell_type, tables.order);
    let nq = tables.error_rule.n_points();
    Ok([
        PanelKernel::for_operator(backend, &basis_name, nq, tables.n, &tables.error_basis)?,
        PanelKernel::for_operator(
            backend,
            &post_name,
            nq,
            tables.n_post,
            &tables.error_basis_post,
        )?,
    ])
}

/// The fields and tables one error-norm evaluation reads.
struct ErrorFields<'a, T: DeviceReal> {
    mesh: &'a DeviceMesh,
    tables: &'a ElementTables<T>,
    geometry: &'a DeviceBuffer<T>,
    kappa: &'a DeviceBuffer<T>,
    u: &'a DeviceBuffer<T>,
    q: &'a DeviceBuffer<T>,
    u_star: &'a DeviceBuffer<T>,
    /// The error rule's points and weights on the device.
    points: DeviceBuffer<f64>,
    weights: DeviceBuffer<f64>,
}

/// Bytes of the fields at the points that one panel of cells may take at most (the panel is
/// smaller where a quarter of the free device memory is less).
const POINT_VALUES_BYTES: usize = 1 << 30;

impl<T: DeviceReal> ErrorFields<'_, T> {
    /// The per-cell squared errors into `errors` (3 planes of n_cells) with one thread per cell
    /// summing the basis at every point.
    fn errors_by_loop(
        &self,
        backend: &CudaBackend,
        solution: u32,
        errors: &DeviceBuffer<f64>,
    ) -> Result<()> {
        let (gpu, mesh, t) = (&backend.gpu, self.mesh, self.tables);
        let basis = gpu.upload(&t.error_basis)?;
        let basis_post = gpu.upload(&t.error_basis_post)?;
        let nc = mesh.n_cells;
        let (nc64, nq, n, np) =
            (nc as u64, t.error_rule.n_points() as u32, t.n as u32, t.n_post as u32);
        let (vp, cp, gp, kp, up, qp, sp) = (
            address(&mesh.vertices),
            address(&mesh.cell_vertices),
            address(self.geometry),
            address(self.kappa),
            address(self.u),
            address(self.q),
            address(self.u_star),
        );
        let (pp, wp, bp, bpp, ep) = (
            address(&self.points),
            address(&self.weights),
            address(&basis),
            address(&basis_post),
            address(errors),
        );
        let kernel = format!("manufactured_errors_{}_d{}_sol{solution}", T::SUFFIX, mesh.dim);
        // SAFETY: manufactured_errors_T_dD_solS(u64 nc, const f64* vertices, const
        // unsigned* cell_vertices, const T* geometry, const T* kappa, const T* u, const T* q,
        // const T* u_star, unsigned nq, const f64* points, const f64* weights, unsigned n,
        // unsigned np, const T* basis, const T* basis_post, f64* errors): the mesh arrays as
        // for the loads, kappa nc values, u n * nc, q D * n * nc, u_star np * nc (the backend's
        // fields of this discretization), the rule's nq points and weights, basis nq * n and
        // basis_post nq * np values, errors 3 * nc; one thread per cell.
        unsafe {
            gpu.launch(
                &kernel,
                grid(nc)?,
                &[
                    arg(&nc64),
                    arg(&vp),
                    arg(&cp),
                    arg(&gp),
                    arg(&kp),
                    arg(&up),
                    arg(&qp),
                    arg(&sp),
                    arg(&nq),
                    arg(&pp),
                    arg(&wp),
                    arg(&n),
                    arg(&np),
                    arg(&bp),
                    arg(&bpp),
                    arg(&ep),
                ],
            )?
        };
        // The tables are freed when this returns: wait for the kernel that reads them.
        gpu.synchronize()
    }

    /// The per-cell squared errors into `errors` (3 planes of n_cells) with the operator
    /// kernels: per panel of cells, u_h, the D components of q_h and u* at the points (D + 2
    /// blocks of nq rows, leading dimension `ld`), then the comparison kernel.
    fn errors_from_operators(
        &self,
        backend: &CudaBackend,
        solution: u32,
        [basis, post]: [PanelKernel<T>; 2],
        errors: &DeviceBuffer<f64>,
    ) -> Result<()> {
        let (mesh, t) = (self.mesh, self.tables);
        let (nc, dim, nq, n) = (mesh.n_cells, mesh.dim, t.error_rule.n_points(), t.n);
        let size = std::mem::size_of::<T>();
        let blocks_of_rows = dim + 2;
        let (free, _) = backend.memory_info()?;
        let budget = POINT_VALUES_BYTES.min(free / 4);
        let per_cell = blocks_of_rows * nq * size;
        let panel = (budget / per_cell).clamp(1, nc);
        let ld = panel;
        // SAFETY: every panel's operators write the nq x count values of each block that the
        // comparison kernel then reads (the same stream orders them).
        let values = unsafe { uninitialized::<T>(backend, blocks_of_rows * nq * ld)? };
        let (vp, cp, gp, kp, pp, wp, xp, ep) = (
            address(&mesh.vertices),
            address(&mesh.cell_vertices),
            address(self.geometry),
            address(self.kappa),
            address(&self.points),
            address(&self.weights),
            address(&values),
            address(errors),
        );
        let block = |c: usize| xp + (c * nq * ld * size) as u64;
        let kernel = format!("manufactured_errors_at_points_{}_d{}_sol{solution}", T::SUFFIX, dim);
        let (nc64, nq32, ld64) = (nc as u64, nq as u32, ld as u64);
        for first in (0..nc).step_by(panel) {
            let count = panel.min(nc - first);
            let offset = (first * size) as u64;
            // SAFETY: u is n rows of nc values, q D blocks of n rows of nc, u* n' rows of nc
            // (the element-fastest fields); the panel's cells first .. first + count are
            // columns of them at leading dimension nc, and the values' blocks hold nq rows of
            // ld >= count; the values do not overlap the fields.
            unsafe {
                basis.apply(backend, count, address(self.u) + offset, nc, block(0), ld)?;
                for r in 0..dim {
                    let q_r = address(self.q) + ((r * n * nc) * size) as u64 + offset;
                    basis.apply(backend, count, q_r, nc, block(1 + r), ld)?;
                }
                post.apply(backend, count, address(self.u_star) + offset, nc, block(dim + 1), ld)?;
            }
            let (first64, count64) = (first as u64, count as u64);
            // SAFETY: manufactured_errors_at_points_T_dD_solS(u64 nc, u64 first, u64 count,
            // const f64* vertices, const unsigned* cell_vertices, const T* geometry, const T*
            // kappa, unsigned nq, const f64* points, const f64* weights, const T* values, u64
            // ld, f64* errors): the mesh arrays and the nc geometry dets and kappas, the rule's
            // nq points and weights, the values' D + 2 blocks of nq rows of ld, errors 3 * nc;
            // one thread per cell of the panel.
            unsafe {
                backend.gpu.launch(
                    &kernel,
                    grid(count)?,
                    &[
                        arg(&nc64),
                        arg(&first64),
                        arg(&count64),
                        arg(&vp),
                        arg(&cp),
                        arg(&gp),
                        arg(&kp),
                        arg(&nq32),
                        arg(&pp),
                        arg(&wp),
                        arg(&xp),
                        arg(&ld64),
                        arg(&ep),
                    ],
                )?
            };
        }
        // The values are freed when this returns: wait for the kernels that use them.
        backend.gpu.synchronize()
    }
}

/// Which kernels evaluated the fields at the error norms' points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointKernels {
    /// The constant operators (`crate::constant_operator`) of the basis and of the postprocessing
    /// basis at the points, each on the path shown.
    Operators {
        /// The path of the basis of u_h and q_h.
        basis: OperatorPath,
        /// The path of the basis of u*.
        post: OperatorPath,
    },
    /// The loop kernel ([`crate::PointEvaluation::Loop`]).
    Loop,
}

impl std::fmt::Display for PointKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PointKernels::Operators { basis, post } if basis == post => {
                write!(f, "device ({basis} operators)")
            }
            PointKernels::Operators { basis, post } => {
                write!(f, "device ({basis} and {post} operators)")
            }
            PointKernels::Loop => f.write_str("device (loop kernel)"),
        }
    }
}
