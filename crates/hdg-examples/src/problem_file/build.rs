//! Building a problem file against its mesh: regions and boundary groups by name, the
//! problem's closures, the solve settings.
use super::*;

impl ProblemFile {
    /// Builds (reads) the mesh and the problem, checking the file against the mesh: the
    /// dimension of expressions, boundary groups and regions by name, coefficient values and
    /// the finiteness of every expression at one point of the domain (or of its group).
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] naming the file and the line; a generated mesh too
    /// large for the host ([`MeshSpec::check_size`]); [`CoreError::Io`] if the CUDA settings
    /// in the environment are malformed.
    pub fn build(&self) -> Result<Setup, CoreError> {
        self.build_started(self.backend.start(), |start| {
            start.wait().map_err(hdg::Error::into_core)
        })
    }

    /// [`ProblemFile::build`] while the backend `start` (of this file's backend,
    /// [`hdg::Backend::start_on`]) starts on another thread; `wait` waits for it after the
    /// mesh was built or read (over MPI ranks: making a failure every rank's).
    ///
    /// # Errors
    /// Those of [`ProblemFile::build`], and those `wait` returns.
    pub fn build_started(
        &self,
        start: hdg::BackendStart,
        wait: impl FnOnce(hdg::BackendStart) -> Result<hdg::StartedBackend, CoreError>,
    ) -> Result<Setup, CoreError> {
        let started = std::time::Instant::now();
        let built = self.build_mesh()?;
        let mesh_seconds = started.elapsed().as_secs_f64();
        let mesh = &built.mesh;
        let dim = mesh.dim();
        let mut notes = Vec::new();

        // Expressions against the dimension, and at a point of the domain.
        let inside = cell_centroid(mesh, 0);
        for (what, f) in self.point_fields() {
            self.check_dimension(what, f, dim)?;
        }
        let kappa = self.coefficient("kappa", &self.kappa, &built, true, &inside)?;
        let reaction = self.coefficient("reaction", &self.reaction, &built, false, &inside)?;
        self.check_finite("source", &self.source, &inside, &[])?;
        let source = self.source.scalar();

        let mut builder = Problem::builder().kappa(kappa).reaction(reaction);
        builder = match self.source.as_constant() {
            Some(v) => builder.polynomial_source(0, move |_| v),
            None => builder.source(move |x| source(x)),
        };
        let default = self.dirichlet_default.scalar();
        builder =
            builder.dirichlet(move |x| default(x)).tau(self.tau.clone()).mean_zero(self.mean_zero);

        // Boundary groups.
        let tags: Vec<u32> = mesh.boundary_tag_counts().iter().map(|&(t, _)| t).collect();
        let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
        let mut conditions = Vec::new();
        for group in &self.boundary {
            let tag = self.boundary_tag(&group.key, &built, &tags).map_err(|m| {
                self.error_at(&group.span, format!("boundary `{}`: {m}", group.key))
            })?;
            if let Some(other) = seen.insert(tag, &group.key) {
                return Err(self.error_at(
                    &group.span,
                    format!("boundary `{}` is `{other}` (tag {tag}) again", group.key),
                ));
            }
            let face = boundary_point(mesh, tag);
            let name = built.tag_name(tag);
            let (kind, data) = match &group.kind {
                ConditionKind::Dirichlet(data) => ("Dirichlet", data),
                ConditionKind::Neumann(data) => ("Neumann", data),
                ConditionKind::Robin { data, .. } => ("Robin", data),
            };
            let what = format!("boundary `{}`, {}", group.key, kind.to_lowercase());
            self.check_dimension(&what, data, dim)?;
            if let Some((x, n)) = &face {
                self.check_finite(&what, data, x, n)?;
            }
            let g = data.face();
            builder = match &group.kind {
                ConditionKind::Dirichlet(data) => {
                    let g = data.scalar();
                    builder.dirichlet_on(tag, move |x| g(x))
                }
                ConditionKind::Neumann(_) => builder.neumann(tag, move |x, n| g(x, n)),
                ConditionKind::Robin { alpha, .. } => {
                    builder.robin(tag, *alpha, move |x, n| g(x, n))
                }
            };
            conditions.push((
                tag,
                match &group.kind {
                    ConditionKind::Robin { alpha, .. } => {
                        format!("Robin (alpha {alpha}) on {name}")
                    }
                    _ => format!("{kind} on {name}"),
                },
            ));
        }
        let rest: Vec<String> =
            tags.iter().filter(|t| !seen.contains_key(t)).map(|&t| built.tag_name(t)).collect();
        if let Some(&tag) = tags.iter().find(|t| !seen.contains_key(t)) {
            if let Some((x, _)) = boundary_point(mesh, tag) {
                self.check_finite("boundary default", &self.dirichlet_default, &x, &[])?;
            }
            conditions.push((tag, format!("Dirichlet (default data) on {}", rest.join(", "))));
        }
        conditions.sort_by_key(|(tag, _)| *tag);
        let description = Description {
            kappa: self.kappa.describe(),
            reaction: self.reaction.describe(),
            source: self.source.describe(),
            exact: self.exact.as_ref().map(|e| format!("u = {}", e.u.describe())),
            boundary: conditions.into_iter().map(|(_, c)| c).collect(),
            mean_zero: self.mean_zero,
        };

        // The exact solution.
        if let Some(exact) = &self.exact {
            self.check_finite("exact u", &exact.u, &inside, &[])?;
            let u = exact.u.scalar();
            let gradient: Result<Vec<Field>, String> = match &exact.gradient {
                Some((g, span)) if g.len() != dim => {
                    return Err(self.error_at(
                        span,
                        format!("the exact gradient has {} entries for a {dim}D mesh", g.len()),
                    ))
                }
                Some((g, _)) => {
                    for (i, f) in g.iter().enumerate() {
                        self.check_finite(&format!("exact gradient[{i}]"), f, &inside, &[])?;
                    }
                    notes.push("exact solution: u and its gradient as given".into());
                    Ok(g.clone())
                }
                None => match exact.u.expression() {
                    None => Ok(vec![Field::constant(0.0); dim]),
                    Some(e) => (0..dim)
                        .map(|slot| {
                            e.derivative(slot).map(|d| Field {
                                kind: FieldKind::Expression(Arc::new(d)),
                                span: exact.u.span.clone(),
                            })
                        })
                        .collect(),
                },
            };
            match gradient {
                Ok(g) => {
                    if exact.gradient.is_none() {
                        notes.push("exact solution: u as given, its gradient derived".into());
                    }
                    let g: Vec<ScalarField> = g.iter().map(Field::scalar).collect();
                    builder = builder.exact_with_gradient(
                        move |x| u(x),
                        move |x, out| {
                            for (o, g) in out.iter_mut().zip(&g) {
                                *o = g(x);
                            }
                        },
                    );
                }
                Err(why) => {
                    notes.push(format!(
                        "exact solution: u only (its gradient could not be derived: {why}; give \
                         [exact] gradient for the error of q)"
                    ));
                    builder = builder.exact(move |x| u(x));
                }
            }
        }

        let settings = SolverSettings {
            choice: self.solver,
            tolerance: self.tolerance,
            max_iterations: self.max_iterations,
        };
        let solver = program_solver(built.mesh, builder.build())?
            .order(self.order)
            .backend(self.backend)
            .precision(self.precision)
            .solver_settings(settings)
            .operator(self.operator)
            .keep_solution(self.outputs.vtu.is_some() || self.outputs.png.is_some());
        let waiting = std::time::Instant::now();
        let started = wait(start)?;
        let backend = BackendStartTimes {
            seconds: started.seconds(),
            waited: waiting.elapsed().as_secs_f64(),
        };
        let solver = solver.on_started(started);
        Ok(Setup {
            solver,
            mesh_seconds,
            backend,
            mesh_lines: built.summary,
            regions: built.regions,
            outputs: self.outputs.clone(),
            notes,
            description,
        })
    }
    pub(super) fn build_mesh(&self) -> Result<BuiltMesh, CoreError> {
        let spec = match &self.mesh {
            MeshSource::Generated(spec) => {
                spec.check_size(self.order, self.backend, self.precision)?;
                spec.clone()
            }
            MeshSource::File { given, path } => {
                if !path.is_file() {
                    let resolved = if path.as_path() == Path::new(given) {
                        String::new()
                    } else {
                        format!(" ({})", path.display())
                    };
                    return Err(self.error_at(
                        &self.mesh_span,
                        format!(
                            "the mesh file {given}{resolved} does not exist (a relative path is \
                             taken from the problem file's folder)"
                        ),
                    ));
                }
                MeshSpec::File(path.clone())
            }
        };
        spec.build(Diagonal::Right, self.perturb, self.seed)
            .map_err(|e| self.error_at(&self.mesh_span, format!("mesh {spec}: {e}")))
    }

    /// Every field of the point (not boundary data), with its name.
    pub(super) fn point_fields(&self) -> Vec<(String, &Field)> {
        let mut fields = Vec::new();
        for (name, c) in [("kappa", &self.kappa), ("reaction", &self.reaction)] {
            if let CoefficientSpec::Field(f) = c {
                fields.push((name.to_string(), f));
            }
        }
        fields.push(("source".into(), &self.source));
        fields.push(("boundary default".into(), &self.dirichlet_default));
        if let Some(exact) = &self.exact {
            fields.push(("exact u".into(), &exact.u));
            for (i, g) in exact.gradient.iter().flat_map(|(g, _)| g.iter()).enumerate() {
                fields.push((format!("exact gradient[{i}]"), g));
            }
        }
        fields
    }

    /// Refuses an expression that uses z (nz) on a 2D mesh.
    pub(super) fn check_dimension(
        &self,
        what: impl fmt::Display,
        f: &Field,
        dim: usize,
    ) -> Result<(), CoreError> {
        if let Some(e) = f.expression() {
            if dim == 2 && (e.uses(2) || e.uses(5)) {
                let name = if e.uses(2) { "z" } else { "nz" };
                return Err(self.error_at(
                    &f.span,
                    format!("{what}: `{}` uses {name}, but the mesh is 2D", e.text),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a field whose value at `x` (normal `n`) is not finite.
    pub(super) fn check_finite(
        &self,
        what: &str,
        f: &Field,
        x: &[f64],
        n: &[f64],
    ) -> Result<(), CoreError> {
        let value = f.face()(x, n);
        if value.is_finite() {
            return Ok(());
        }
        let text = f.expression().map_or_else(String::new, |e| format!(" `{}`", e.text));
        Err(self
            .error_at(&f.span, format!("{what}{text} is {value} at {x:?}, a point of the mesh")))
    }

    /// A coefficient against the mesh: constants' sign, expressions at a point of the domain,
    /// regions by name with a value for each region the mesh has.
    pub(super) fn coefficient(
        &self,
        name: &'static str,
        spec: &CoefficientSpec,
        built: &BuiltMesh,
        positive: bool,
        inside: &[f64],
    ) -> Result<Coefficient, CoreError> {
        let rule = if positive { "> 0" } else { ">= 0" };
        let bad = |v: f64| !v.is_finite() || if positive { v <= 0.0 } else { v < 0.0 };
        match spec {
            CoefficientSpec::Field(f) => {
                if let Some(v) = f.as_constant() {
                    if bad(v) {
                        return Err(self.error_at(&f.span, format!("{name} = {v} is not {rule}")));
                    }
                    return Ok(Coefficient::Constant(v));
                }
                let value = f.scalar()(inside);
                if bad(value) {
                    let text = f.expression().map_or_else(String::new, |e| e.text.clone());
                    return Err(self.error_at(
                        &f.span,
                        format!("{name} `{text}` is {value} at {inside:?}, a point of the mesh: not {rule}"),
                    ));
                }
                let g = f.scalar();
                Ok(Coefficient::field(move |x| g(x)))
            }
            CoefficientSpec::PerRegion { values, span } => {
                let (Some(groups), Some(regions)) = (&built.file, &built.regions) else {
                    return Err(self.error_at(
                        span,
                        format!(
                            "{name} per region needs a mesh file with regions (physical groups \
                             of cells); a generated mesh has none"
                        ),
                    ));
                };
                let mut by_tag = BTreeMap::new();
                for (region, value, value_span) in values {
                    let tag = match region.parse::<u32>() {
                        Ok(tag) => tag,
                        Err(_) => groups.region(region).map_err(|e| {
                            self.error_at(value_span, format!("{name}: {}", mesh_message(e)))
                        })?,
                    };
                    if bad(*value) {
                        return Err(self.error_at(
                            value_span,
                            format!("{name} = {value} on region `{region}` is not {rule}"),
                        ));
                    }
                    by_tag.insert(tag, *value);
                }
                let present: BTreeSet<u32> = regions.iter().copied().collect();
                let missing: Vec<String> = present
                    .iter()
                    .filter(|t| !by_tag.contains_key(t))
                    .map(|&t| match groups.name(groups.dim, t) {
                        Some(n) => format!("`{n}` ({t})"),
                        None if t == 0 => "0 (cells in no physical group)".to_string(),
                        None => t.to_string(),
                    })
                    .collect();
                if !missing.is_empty() {
                    return Err(self.error_at(
                        span,
                        format!(
                            "{name} has no value for region {} of the mesh",
                            missing.join(", ")
                        ),
                    ));
                }
                Coefficient::per_region(name, regions, &by_tag)
            }
        }
    }

    /// The boundary tag of a `[boundary]` key: a tag number, a physical group's name, or a
    /// generated mesh's side.
    pub(super) fn boundary_tag(
        &self,
        key: &str,
        built: &BuiltMesh,
        tags: &[u32],
    ) -> Result<u32, String> {
        let listed = || tags.iter().map(|&t| built.tag_name(t)).collect::<Vec<_>>().join(", ");
        if let Ok(tag) = key.parse::<u32>() {
            return if tags.contains(&tag) {
                Ok(tag)
            } else {
                Err(format!("no boundary face has tag {tag} (the mesh's tags: {})", listed()))
            };
        }
        match &built.file {
            Some(groups) => groups.boundary_tag(key).map_err(mesh_message),
            None => generated_sides(built.mesh.dim())
                .iter()
                .find(|(name, _)| *name == key)
                .map(|&(_, tag)| tag)
                .ok_or_else(|| {
                    format!(
                        "unknown boundary `{key}` of the generated {}: its sides are {}",
                        self.mesh_name(),
                        listed()
                    )
                }),
        }
    }
}

/// The sides of generated meshes, defined once for problem files and the program's options.
pub(super) use crate::generated_sides;

/// The centroid of cell `c`.
pub(super) fn cell_centroid(mesh: &Mesh, c: usize) -> Vec<f64> {
    let d = mesh.dim();
    let vertices = mesh.cell_vertices(c);
    let mut x = vec![0.0; d];
    for &v in vertices {
        for (xi, p) in x.iter_mut().zip(mesh.vertex(v)) {
            *xi += p / vertices.len() as f64;
        }
    }
    x
}

/// The midpoint of a boundary face tagged `tag` and its outward unit normal.
pub(super) fn boundary_point(mesh: &Mesh, tag: u32) -> Option<(Vec<f64>, Vec<f64>)> {
    let d = mesh.dim();
    let f =
        (0..mesh.n_faces()).find(|&f| mesh.is_boundary_face(f) && mesh.boundary_tag(f) == tag)?;
    let corners: Vec<&[f64]> = mesh.face_vertices(f).iter().map(|&v| mesh.vertex(v)).collect();
    let mid: Vec<f64> =
        (0..d).map(|i| corners.iter().map(|p| p[i]).sum::<f64>() / corners.len() as f64).collect();
    let mut n = if d == 2 {
        vec![corners[1][1] - corners[0][1], corners[0][0] - corners[1][0]]
    } else {
        let a: Vec<f64> = (0..3).map(|i| corners[1][i] - corners[0][i]).collect();
        let b: Vec<f64> = (0..3).map(|i| corners[2][i] - corners[0][i]).collect();
        vec![a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    };
    let inside = cell_centroid(mesh, mesh.face_cells(f)[0]);
    let outward: f64 = n.iter().zip(mid.iter().zip(&inside)).map(|(n, (m, c))| n * (m - c)).sum();
    let length = n.iter().map(|v| v * v).sum::<f64>().sqrt();
    let sign = if outward < 0.0 { -1.0 } else { 1.0 };
    n.iter_mut().for_each(|v| *v *= sign / length);
    Some((mid, n))
}

/// A mesh error's message without its kind (the message of a problem file names the context).
pub(super) fn mesh_message(e: hdg::mesh::MeshError) -> String {
    match e {
        hdg::mesh::MeshError::InvalidParameter(m) => m,
        other => other.to_string(),
    }
}
