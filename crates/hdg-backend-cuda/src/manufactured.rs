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
use hdg_core::{ElementTables, ExactSolution, Result, Source};

use crate::device::{address, arg, grid, reduce_blocks, CudaBackend, DeviceReal};
use crate::geometry::DeviceMesh;
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
/// per cell), from the element-fastest fields.
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
) -> Result<[f64; 3]> {
    let gpu = &backend.gpu;
    let nc = mesh.n_cells;
    if nc == 0 {
        return Ok([0.0; 3]);
    }
    let rule = &tables.error_rule;
    let points = gpu.upload(&rule.points)?;
    let weights = gpu.upload(&rule.weights)?;
    let basis = gpu.upload(&tables.error_basis)?;
    let basis_post = gpu.upload(&tables.error_basis_post)?;
    // SAFETY: the first kernel writes all 3 * nc entries before the second reads them.
    let errors = unsafe { uninitialized::<f64>(backend, 3 * nc)? };
    let (nc64, nq, n, np) =
        (nc as u64, rule.n_points() as u32, tables.n as u32, tables.n_post as u32);
    let (vp, cp, gp, kp, up, qp, sp) = (
        address(&mesh.vertices),
        address(&mesh.cell_vertices),
        address(geometry),
        address(kappa),
        address(u),
        address(q),
        address(u_star),
    );
    let (pp, wp, bp, bpp, ep) = (
        address(&points),
        address(&weights),
        address(&basis),
        address(&basis_post),
        address(&errors),
    );
    let kernel = format!("manufactured_errors_{}_d{}_sol{solution}", T::SUFFIX, mesh.dim);
    // SAFETY: manufactured_errors_T_dD_solS(u64 nc, const f64* vertices, const
    // unsigned* cell_vertices, const T* geometry, const T* kappa, const T* u, const T* q, const T*
    // u_star, unsigned nq, const f64* points, const f64* weights, unsigned n, unsigned np,
    // const T* basis, const T* basis_post, f64* errors): the mesh arrays as for the loads,
    // kappa nc values, u n * nc, q D * n * nc, u_star np * nc (the backend's fields of
    // this discretization), the rule's nq points and weights, basis nq * n and basis_post
    // nq * np values, errors 3 * nc; one thread per cell.
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
    Ok(sums)
}
