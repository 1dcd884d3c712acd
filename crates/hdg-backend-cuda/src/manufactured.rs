//! The built-in manufactured problems on the device (`kernels/manufactured.cu`): the element
//! loads F_K and the L2 error norms computed where the fields are, with no host closure and no
//! host round trip.
//!
//! A [`Problem`](hdg_core::Problem) built by `Problem::manufactured` carries a
//! [`ManufacturedSpec`] (the solution and the coefficients its source was built with). From it
//! the kernels evaluate f, u and grad u at the quadrature points with the same formulas as the
//! closures of `hdg_core::problem`. The closures stay the reference: before the device computes
//! loads, the host compares the device's f with the problem's `source` at sample points of the
//! mesh (vertices and centroids of 64 cells spread over it), and before it computes error
//! norms, the device's u and grad u with the `ExactSolution` it is given. Where they disagree
//! (a caller replaced a closure and kept the description) the backend uses the closures on the
//! host, as it does for problems without a description.
//!
//! The kernels read the mesh on the device ([`DeviceMesh`]); the quadrature tables are uploaded
//! per use.
use cust::memory::{DeviceBuffer, DeviceCopy};
use hdg_core::{ElementTables, ExactSolution, Manufactured, ManufacturedSpec, Result, ScalarField};
use hdg_mesh::Mesh;

use crate::device::{address, arg, grid, reduce_blocks, CudaBackend, DeviceReal};
use crate::geometry::DeviceMesh;
use crate::vector::uninitialized;

/// `struct Spec` of manufactured.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Spec {
    kind: i32,
    degree: i32,
    kappa: f64,
    reaction: f64,
}

// SAFETY: plain old data (two integers and two floats, C layout).
unsafe impl DeviceCopy for Spec {}

impl Spec {
    fn new(m: &ManufacturedSpec) -> Option<Spec> {
        let (kind, degree) = match m.solution {
            Manufactured::Sine => (0, 0),
            Manufactured::ExpSin => (1, 0),
            Manufactured::Polynomial(k) => (2, i32::try_from(k).ok()?),
        };
        Some(Spec { kind, degree, kappa: m.kappa, reaction: m.reaction })
    }
}

/// Cells whose vertices and centroids are the sample points of the agreement checks.
const SAMPLE_CELLS: usize = 64;

/// Relative agreement asked of the device's f, u and grad u against the closures (scaled by
/// max(1, |closure value|)): a few units of round-off of the transcendental functions pass, a
/// different function does not.
const AGREEMENT: f64 = 1e-10;

/// A manufactured problem's description, for the device.
pub(crate) struct DeviceManufactured {
    spec: Spec,
    dim: usize,
    /// Sample points of the mesh (point-major), for the agreement checks.
    sample_points: Vec<f64>,
    backend: CudaBackend,
}

impl DeviceManufactured {
    /// The device side of `spec` on `mesh` (None for a description the kernels do not know:
    /// a polynomial degree beyond i32).
    pub(crate) fn new(
        backend: &CudaBackend,
        spec: &ManufacturedSpec,
        mesh: &Mesh,
    ) -> Result<Option<Self>> {
        let Some(spec) = Spec::new(spec) else {
            return Ok(None);
        };
        let (d, n_cells) = (mesh.dim(), mesh.n_cells());
        let vpc = mesh.cell_type().vertices_per_cell();
        let mut sample_points = Vec::new();
        let stride = (n_cells / SAMPLE_CELLS).max(1);
        for c in (0..n_cells).step_by(stride).take(SAMPLE_CELLS) {
            let mut centroid = vec![0.0; d];
            for &v in mesh.cell_vertices(c) {
                let x = mesh.vertex(v);
                sample_points.extend_from_slice(x);
                centroid.iter_mut().zip(x).for_each(|(m, xr)| *m += xr / vpc as f64);
            }
            sample_points.extend_from_slice(&centroid);
        }
        Ok(Some(DeviceManufactured { spec, dim: d, sample_points, backend: backend.clone() }))
    }

    /// f, u and grad u at the sample points, from the device (`[p * (dim + 2) + c]`).
    fn device_fields(&self) -> Result<Vec<f64>> {
        let gpu = &self.backend.gpu;
        let n = self.sample_points.len() / self.dim;
        let points = gpu.upload(&self.sample_points)?;
        // SAFETY: written entirely by the kernel below before the download reads it.
        let out = unsafe { uninitialized::<f64>(&self.backend, n * (self.dim + 2))? };
        if n > 0 {
            let (n64, pp, op) = (n as u64, address(&points), address(&out));
            let kernel = format!("manufactured_fields_d{}", self.dim);
            // SAFETY: manufactured_fields_dD(u64 n, Spec s, const f64* points, f64* out): points
            // holds n * D coordinates, out n * (D + 2) values; one thread per point.
            unsafe {
                gpu.launch(&kernel, grid(n)?, &[arg(&n64), arg(&self.spec), arg(&pp), arg(&op)])?
            };
        }
        gpu.download(&out)
    }

    /// Whether the device's f agrees with `source` at the sample points.
    pub(crate) fn source_agrees(&self, source: &ScalarField) -> Result<bool> {
        let device = self.device_fields()?;
        let d = self.dim;
        Ok(self
            .sample_points
            .chunks(d)
            .zip(device.chunks(d + 2))
            .all(|(x, values)| close(values[0], source(x))))
    }

    /// Whether the device's u and grad u agree with `exact` at the sample points.
    pub(crate) fn exact_agrees(&self, exact: &ExactSolution) -> Result<bool> {
        let device = self.device_fields()?;
        let d = self.dim;
        let mut grad = vec![0.0; d];
        Ok(self.sample_points.chunks(d).zip(device.chunks(d + 2)).all(|(x, values)| {
            (exact.grad_u)(x, &mut grad);
            close(values[1], (exact.u)(x))
                && values[2..].iter().zip(&grad).all(|(&dev, &host)| close(dev, host))
        }))
    }

    /// The element loads F_K (`[i * n_cells + e]`), as `hdg_core::load::element_load`
    /// computes them. `geometry` is the element-fastest geometry (plane 0: det).
    pub(crate) fn loads<T: DeviceReal>(
        &self,
        mesh: &DeviceMesh,
        tables: &ElementTables<T>,
        geometry: &DeviceBuffer<T>,
    ) -> Result<DeviceBuffer<T>> {
        let gpu = &self.backend.gpu;
        let (n, nc) = (tables.n, mesh.n_cells);
        let rule = &tables.load_rule;
        let points = gpu.upload(&rule.points)?;
        let weights = gpu.upload(&rule.weights)?;
        let basis = gpu.upload(&tables.load_basis)?;
        // SAFETY: the kernel writes all n * n_cells entries.
        let load = unsafe { uninitialized::<T>(&self.backend, n * nc)? };
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
            let kernel = format!("manufactured_loads_d{}_{}", self.dim, T::SUFFIX);
            // SAFETY: manufactured_loads_dD_T(u64 nc, Spec s, const f64* vertices, const
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
                        arg(&self.spec),
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

    /// The squared L2 errors of u_h, q_h and u* summed over the cells (as
    /// `hdg_core::error_norms::element_errors` per cell), from the element-fastest fields.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn squared_errors<T: DeviceReal>(
        &self,
        mesh: &DeviceMesh,
        tables: &ElementTables<T>,
        geometry: &DeviceBuffer<T>,
        kappa: &DeviceBuffer<T>,
        u: &DeviceBuffer<T>,
        q: &DeviceBuffer<T>,
        u_star: &DeviceBuffer<T>,
    ) -> Result<[f64; 3]> {
        let gpu = &self.backend.gpu;
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
        let errors = unsafe { uninitialized::<f64>(&self.backend, 3 * nc)? };
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
        let kernel = format!("manufactured_errors_d{}_{}", self.dim, T::SUFFIX);
        // SAFETY: manufactured_errors_dD_T(u64 nc, Spec s, const f64* vertices, const unsigned*
        // cell_vertices, const T* geometry, const T* kappa, const T* u, const T* q, const T*
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
                    arg(&self.spec),
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
        let partials = unsafe { uninitialized::<f64>(&self.backend, 3 * blocks)? };
        let pp = address(&partials);
        // SAFETY: manufactured_error_partials(u64 nc, const f64* errors, f64* partials) with
        // `blocks` blocks of 256 threads: reads 3 * nc errors, writes 3 * blocks partials.
        unsafe {
            gpu.launch(
                "manufactured_error_partials",
                blocks as u32,
                &[arg(&nc64), arg(&ep), arg(&pp)],
            )?
        };
        let partials = gpu.download(&partials)?;
        // In block order: the same total every run.
        let mut sums = [0.0; 3];
        for (c, sum) in sums.iter_mut().enumerate() {
            *sum = partials[c * blocks..(c + 1) * blocks].iter().sum();
        }
        Ok(sums)
    }
}

/// Whether a device value agrees with the closure's (NaN never does).
fn close(device: f64, host: f64) -> bool {
    (device - host).abs() <= AGREEMENT * host.abs().max(1.0)
}
