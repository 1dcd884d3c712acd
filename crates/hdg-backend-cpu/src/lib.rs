//! The CPU backend: every stage of the HDG pipeline as batched kernels over Rayon.
//!
//! Per-element data is stored element-contiguous (one element's matrices in one block): each
//! task processes whole elements, and a block per element is what the cache wants here. The
//! kernels themselves are in [`condense`], [`local`] and [`dbf`]; this file only batches them.
mod blocks;
pub mod condense;
pub mod constant_operator;
pub mod dbf;
pub mod dense;
pub mod local;
pub mod multigrid;
mod vector;
pub mod weighted;

use hdg_core::error_norms;
use hdg_core::geometry::{mesh_geometry, GeometryLayout};
use hdg_core::{
    Assembler, Backend, CoreError, Discretization, ErrorNorms, ExactSolution, HostCondensed,
    HostFields, LocalSolver, Postprocessor, Real, Result, NONE,
};
use rayon::prelude::*;

pub use dbf::{Bf16, DbfMatrix, Entry};

use condense::{condense_element, CondenseScratch, CondensedElement, ElementInput};
use hdg_core::lanes::{Batch, Dense};
use weighted::WeightedScratch;

/// The CPU backend. Runs on Rayon's global pool (set `RAYON_NUM_THREADS` to choose the threads).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }
}

/// Discretization data of the CPU backend.
pub struct CpuPrepared<T> {
    /// Geometry records, `layout.stride()` values per cell.
    pub geometry: Vec<T>,
    /// Record layout.
    pub layout: GeometryLayout,
    /// Vertex coordinates per cell (`[c][v][r]`), so that a kernel reads one contiguous record.
    pub cell_vertices: Vec<f64>,
    /// Face orientation codes per cell.
    pub orientations: Vec<u8>,
}

impl<T: Real> CpuPrepared<T> {
    /// What the element kernels read of element `e`.
    pub fn element_input<'a>(
        &'a self,
        disc: &'a Discretization<'_, T>,
        e: usize,
    ) -> ElementInput<'a, T> {
        let (fpc, stride) = (disc.tables.n_faces, self.layout.stride());
        let vsz = self.cell_vertices.len() / disc.mesh.n_cells().max(1);
        ElementInput {
            geometry: &self.geometry[e * stride..(e + 1) * stride],
            vertices: &self.cell_vertices[e * vsz..(e + 1) * vsz],
            orientations: &self.orientations[e * fpc..(e + 1) * fpc],
            kappa: disc.kappa[e],
            reaction: disc.reaction[e],
            tau: &disc.tau[e * fpc..(e + 1) * fpc],
            points: element_points(disc, e),
        }
    }
}

/// The condensation's parallel loop over the elements (see [`LocalSolver::condense`]), in
/// batches of [`Batch::WIDTH`] elements ([`condense::condense_batch`]); a partial batch, a
/// batch with a coefficient varying inside a cell or one that fails goes element by element
/// (which says which element failed).
fn condense_all<T: Real>(
    disc: &Discretization<'_, T>,
    prep: &CpuPrepared<T>,
    out: &mut HostCondensed<T>,
    source: &hdg_core::Source,
) -> Result<()> {
    let t = &disc.tables;
    let (n, nl) = (t.n, t.n_local_trace());
    let w = <T::Lanes as Batch<T>>::WIDTH;
    let input = |e: usize| prep.element_input(disc, e);
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
            || (CondenseScratch::new(t), condense::BatchScratch::new(t)),
            |(scratch, batch_scratch), (batch, (k, b, z, u0))| {
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
                    let batched = condense::condense_batch(
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
            },
        )
}

/// kappa^-1 and c at the coefficient points of element `e`, where they vary inside cells.
fn element_points<'a, T: Real>(
    disc: &'a Discretization<'_, T>,
    e: usize,
) -> Option<weighted::ElementPoints<'a, T>> {
    disc.point_coefficients.as_ref().map(|pc| weighted::ElementPoints {
        inverse_kappa: pc.inverse_kappa_of(e),
        reaction: pc.reaction_of(e),
        tensor: pc.is_tensor(),
    })
}

fn not_spd(element: usize, (pivot, value): (usize, impl Real)) -> CoreError {
    CoreError::NotPositiveDefinite { element, pivot, value: value.as_f64() }
}

impl<T: Real> LocalSolver<T> for CpuBackend {
    type Prepared = CpuPrepared<T>;
    type Condensed = HostCondensed<T>;
    type LocalFields = HostFields<T>;

    fn prepare(&self, disc: &Discretization<'_, T>) -> Result<CpuPrepared<T>> {
        let mesh = disc.mesh;
        let estimate = hdg_core::resources::pipeline_bytes(
            mesh.cell_type(),
            mesh.n_cells() as u64,
            disc.order,
            std::mem::size_of::<T>() as u64,
        );
        hdg_core::resources::check_host_memory(
            &format!("{} cells at order {} in {} on the CPU", mesh.n_cells(), disc.order, T::NAME),
            estimate,
        )?;
        let layout = GeometryLayout::new(mesh.cell_type());
        let fpc = mesh.cell_type().faces_per_cell();
        let (cell_vertices, geometry) = mesh_geometry(mesh, disc.tables.face_parameter_measure);
        let mut orientations = vec![0u8; mesh.n_cells() * fpc];
        orientations.par_chunks_mut(fpc).enumerate().for_each(|(c, o)| {
            o.copy_from_slice(mesh.cell_face_orientations(c));
        });
        Ok(CpuPrepared { geometry, layout, cell_vertices, orientations })
    }

    fn condense(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
    ) -> Result<HostCondensed<T>> {
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
        let condensed =
            hdg_core::user_code::run_user("the source f (in the element loads)", || {
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

    fn recover(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
        condensed: &HostCondensed<T>,
        trace: &Vec<T>,
    ) -> Result<HostFields<T>> {
        let t = &disc.tables;
        let (n, nf, d, fpc) = (t.n, t.n_f, t.dim, t.n_faces);
        let nl = t.n_local_trace();
        let stride = prep.layout.stride();
        let n_cells = disc.mesh.n_cells();
        let mut fields =
            HostFields { u: vec![T::zero(); n_cells * n], q: vec![T::zero(); n_cells * d * n] };
        let topology = &disc.topology;
        fields
            .u
            .par_chunks_mut(n)
            .zip(fields.q.par_chunks_mut(d * n))
            .enumerate()
            .with_min_len(64)
            .try_for_each_init(
                || (vec![T::zero(); nl], None),
                |(lambda, weighted), (e, (u, q))| {
                    for (f, &face) in disc.mesh.cell_faces(e).iter().enumerate() {
                        let free = topology.free_index[face];
                        let src = if free == NONE {
                            &disc.dirichlet_values[face * nf..(face + 1) * nf]
                        } else {
                            &trace[free as usize * nf..(free as usize + 1) * nf]
                        };
                        lambda[f * nf..(f + 1) * nf].copy_from_slice(src);
                    }
                    local::recover_element(
                        t,
                        &prep.geometry[e * stride..(e + 1) * stride],
                        &prep.orientations[e * fpc..(e + 1) * fpc],
                        disc.kappa[e],
                        &condensed.recovery_operator[e * n * nl..(e + 1) * n * nl],
                        &condensed.recovery_load[e * n..(e + 1) * n],
                        lambda,
                        u,
                        q,
                    );
                    let Some(points) = element_points(disc, e) else { return Ok(()) };
                    // kappa varies in the element: Q from the weighted flux mass matrix.
                    let input = prep.element_input(disc, e);
                    let scratch = weighted.get_or_insert_with(|| WeightedScratch::new(t));
                    weighted::recover_weighted_flux(t, &input, &points, scratch, u, lambda, q)
                        .map_err(|p| not_spd(e, p))
                },
            )?;
        Ok(fields)
    }

    fn condensed_to_host(&self, condensed: &HostCondensed<T>) -> Result<HostCondensed<T>> {
        Ok(condensed.clone())
    }

    fn fields_to_host(&self, fields: &HostFields<T>) -> Result<HostFields<T>> {
        Ok(fields.clone())
    }
}

impl<T: Real> Assembler<T> for CpuBackend {
    type Operator = DbfMatrix<T>;

    fn assemble(
        &self,
        disc: &Discretization<'_, T>,
        _prep: &CpuPrepared<T>,
        condensed: &HostCondensed<T>,
    ) -> Result<(DbfMatrix<T>, Vec<T>)> {
        let (mut matrix, mut rhs) = dbf::assemble(
            &disc.topology,
            disc.tables.n_f,
            &condensed.trace_matrices,
            &condensed.trace_loads,
            &disc.dirichlet_values,
        );
        let n_f = disc.tables.n_f;
        disc.boundary_terms
            .add_to(n_f, &mut rhs, |row, value| matrix.add_to_diagonal_block(row, value));
        Ok((matrix, rhs))
    }

    /// The DBF matrix holds its own copy of every entry: K_e goes.
    fn release_assembly_inputs(&self, condensed: &mut HostCondensed<T>, _: &DbfMatrix<T>) {
        condensed.trace_matrices = Vec::new();
    }
}

impl<T: Real> Postprocessor<T> for CpuBackend {
    type Postprocessed = Vec<T>;

    fn postprocess(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
        fields: &HostFields<T>,
    ) -> Result<Vec<T>> {
        let t = &disc.tables;
        let (n, d, np) = (t.n, t.dim, t.n_post);
        let stride = prep.layout.stride();
        let n_cells = disc.mesh.n_cells();
        let mut u_star = vec![T::zero(); n_cells * np];
        let width = <T::Lanes as Batch<T>>::WIDTH;
        let lane_work = (np - 1) * (np - 1) + np + d * n;
        // Batches of `width` elements, one per SIMD lane (hdg_core::lanes: the same bits as one
        // at a time); a batch with a coefficient varying inside a cell, a partial batch, or a
        // batch that fails goes element by element (which says which element failed).
        u_star.par_chunks_mut(np * width).enumerate().with_min_len(16).try_for_each_init(
            || {
                let lanes = vec![<T::Lanes as Dense>::zero(); lane_work];
                (lanes, vec![T::zero(); np * np], vec![T::zero(); d * n])
            },
            |(lanes, work, flux), (batch, us)| {
                let first = batch * width;
                let count = us.len() / np;
                let constant = (first..first + count).all(|e| element_points(disc, e).is_none());
                if count == width && constant {
                    let cells = first..first + width;
                    let batched = local::postprocess_batch(
                        t,
                        &prep.geometry[cells.start * stride..cells.end * stride],
                        stride,
                        &disc.kappa[cells.clone()],
                        &fields.u[cells.start * n..cells.end * n],
                        &fields.q[cells.start * d * n..cells.end * d * n],
                        lanes,
                        us,
                    );
                    if batched.is_ok() {
                        return Ok::<(), CoreError>(());
                    }
                }
                for (i, us) in us.chunks_exact_mut(np).enumerate() {
                    let e = first + i;
                    let q = &fields.q[e * d * n..(e + 1) * d * n];
                    let (kappa, q) = match element_points(disc, e) {
                        None => (Some(disc.kappa[e]), q),
                        Some(points) => {
                            weighted::projected_inverse_kappa_flux(t, &points, q, flux);
                            (None, &flux[..])
                        }
                    };
                    local::postprocess_element(
                        t,
                        &prep.geometry[e * stride..(e + 1) * stride],
                        kappa,
                        &fields.u[e * n..(e + 1) * n],
                        q,
                        work,
                        us,
                    )
                    .map_err(|p| not_spd(e, p))?;
                }
                Ok(())
            },
        )?;
        Ok(u_star)
    }

    fn postprocessed_to_host(&self, u_star: &Vec<T>) -> Result<Vec<T>> {
        Ok(u_star.clone())
    }

    fn error_norms(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
        fields: &HostFields<T>,
        u_star: &Vec<T>,
        exact: &ExactSolution,
    ) -> Result<ErrorNorms> {
        Ok(error_norms::error_norms(
            disc,
            &prep.geometry,
            &prep.cell_vertices,
            fields,
            u_star,
            exact,
        ))
    }
}

impl<T: Real> Backend<T> for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn describe(&self) -> String {
        format!("CPU, {} Rayon threads", rayon::current_num_threads())
    }
}
