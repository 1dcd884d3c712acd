//! Reading a problem file: TOML into the checked [`ProblemFile`], every expression compiled.
use super::*;

impl ProblemFile {
    /// Reads the problem file at `path` and checks it ([`ProblemFile::parse`]).
    ///
    /// # Errors
    /// [`CoreError::Io`] if the file cannot be read; those of [`ProblemFile::parse`].
    pub fn load(path: &Path) -> Result<ProblemFile, CoreError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CoreError::Io(format!("cannot read {}: {e}", path.display())))?;
        ProblemFile::parse(&text, path)
    }

    /// Reads the problem file at `path`, sets the keys of `overrides` (a dotted key path and
    /// a TOML value each, as `hdg run --set` gives them) and checks the result
    /// ([`ProblemFile::parse_with`]).
    ///
    /// # Errors
    /// Those of [`ProblemFile::load`] and [`ProblemFile::parse_with`].
    pub fn load_with(
        path: &Path,
        overrides: &[(String, String)],
    ) -> Result<ProblemFile, CoreError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CoreError::Io(format!("cannot read {}: {e}", path.display())))?;
        ProblemFile::parse_with(&text, path, overrides)
    }

    /// [`ProblemFile::parse`] of `text` with the keys of `overrides` set first: each a dotted
    /// key path (`discretization.order`) and a value parsed as TOML (`4`, `"cg"`, `[1, 2]`; a
    /// bare word that is no TOML value is taken as a string). The document is then checked as
    /// a file would be, so an unknown key or a value of the wrong type is refused naming it;
    /// line numbers are those of the document as rewritten (the file's, re-ordered by TOML).
    ///
    /// # Errors
    /// Those of [`ProblemFile::parse`], and [`CoreError::InvalidParameter`] for a key path
    /// that goes through a value that is not a table.
    pub fn parse_with(
        text: &str,
        path: &Path,
        overrides: &[(String, String)],
    ) -> Result<ProblemFile, CoreError> {
        if overrides.is_empty() {
            return ProblemFile::parse(text, path);
        }
        let mut document: toml::Table = toml::from_str(text).map_err(|e| {
            let (line, column) = line_and_column(text, e.span().map_or(0, |s| s.start));
            problem_error(path, format!("line {line}, column {column}: {}", e.message().trim()))
        })?;
        for (key, value) in overrides {
            set_key(&mut document, key, value)
                .map_err(|m| problem_error(path, format!("--set {key}={value}: {m}")))?;
        }
        let rewritten = toml::to_string(&document)
            .map_err(|e| problem_error(path, format!("after --set: {e}")))?;
        ProblemFile::parse(&rewritten, path).map_err(|e| match e {
            CoreError::InvalidParameter { name, reason } => CoreError::InvalidParameter {
                name,
                reason: format!("{reason} (after --set; lines of the rewritten file)"),
            },
            other => other,
        })
    }

    /// Parses problem file text; `path` names it in messages, and relative paths in it are
    /// taken from its folder.
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] (`problem file`) naming the file and the line of the
    /// first unknown key, value of the wrong type, expression that does not compile or uses a
    /// name it may not, or value out of range.
    pub fn parse(text: &str, path: &Path) -> Result<ProblemFile, CoreError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let (line, column) = line_and_column(text, e.span().map_or(0, |s| s.start));
            problem_error(path, format!("line {line}, column {column}: {}", e.message().trim()))
        })?;
        let at = |span: Range<usize>, message: String| -> CoreError {
            let (line, _) = line_and_column(text, span.start);
            problem_error(path, format!("line {line}: {message}"))
        };
        let field = |value: &Spanned<FieldValue>, what: &str, allowed: &[&str]| {
            compile_field(value, allowed).map_err(|m| at(value.span(), format!("{what}: {m}")))
        };
        let folder = path.parent().unwrap_or(Path::new(""));

        // [mesh]
        let mut mesh_span = raw.mesh.span();
        let raw_mesh = raw.mesh.into_inner();
        let mesh = match (raw_mesh.file, raw_mesh.generate) {
            (Some(file), None) => {
                mesh_span = file.span();
                MeshSource::File { path: folder.join(file.get_ref()), given: file.into_inner() }
            }
            (None, Some(generate)) => {
                let spec: MeshSpec = match generate.get_ref().parse() {
                    Ok(spec @ MeshSpec::Generated { .. }) => spec,
                    Ok(MeshSpec::File(_)) => {
                        return Err(at(
                            generate.span(),
                            "generate names square:N or cube:N; a mesh file is `file = ...`".into(),
                        ))
                    }
                    Err(e) => return Err(at(generate.span(), format!("generate: {e}"))),
                };
                mesh_span = generate.span();
                MeshSource::Generated(spec)
            }
            (Some(_), Some(generate)) => {
                return Err(at(generate.span(), "[mesh] has `file` or `generate`, not both".into()))
            }
            (None, None) => {
                return Err(at(
                    mesh_span.clone(),
                    "[mesh] needs `file = \"NAME.msh\"` or `generate = \"square:N\"` (or cube:N)"
                        .into(),
                ))
            }
        };
        let perturb = match raw_mesh.perturb {
            Some(p) if !(0.0..=0.4).contains(p.get_ref()) => {
                return Err(at(p.span(), format!("perturb {} is not in [0, 0.4]", p.get_ref())))
            }
            Some(p) => p.into_inner(),
            None => 0.0,
        };

        // [equation]
        let coefficient = |value: Option<Spanned<CoefficientValue>>, what: &str, default: f64| {
            let Some(value) = value else {
                return Ok(CoefficientSpec::Field(Field::constant(default)));
            };
            let span = value.span();
            match value.into_inner() {
                CoefficientValue::Field(f) => {
                    field(&Spanned::new(span.clone(), f), what, POINT).map(CoefficientSpec::Field)
                }
                CoefficientValue::PerRegion(values) if values.is_empty() => {
                    Err(at(span, format!("{what}: the table of values per region is empty")))
                }
                CoefficientValue::PerRegion(values) => Ok(CoefficientSpec::PerRegion {
                    values: values
                        .into_iter()
                        .map(|(name, v)| (name, *v.get_ref(), v.span()))
                        .collect(),
                    span,
                }),
            }
        };
        let equation = raw.equation;
        let kappa = coefficient(equation.kappa, "kappa", 1.0)?;
        let reaction = coefficient(equation.reaction, "reaction", 0.0)?;
        let source = match &equation.source {
            Some(s) => field(s, "source", POINT)?,
            None => Field::constant(0.0),
        };

        // [boundary]
        let dirichlet_default = match &raw.boundary.default {
            Some(d) => field(d, "boundary default", POINT)?,
            None => Field::constant(0.0),
        };
        let mut boundary = Vec::new();
        for (key, condition) in raw.boundary.groups {
            let span = condition.span();
            let c = condition.into_inner();
            let what = |kind: &str| format!("boundary `{key}`, {kind}");
            let kind = match (c.dirichlet, c.neumann, c.robin) {
                (Some(d), None, None) => {
                    ConditionKind::Dirichlet(field(&d, &what("dirichlet"), POINT)?)
                }
                (None, Some(n), None) => {
                    ConditionKind::Neumann(field(&n, &what("neumann"), POINT_AND_NORMAL)?)
                }
                (None, None, Some(r)) => {
                    let Some(alpha) = c.alpha.as_ref() else {
                        return Err(at(
                            span,
                            format!("boundary `{key}`: robin needs `alpha` (> 0)"),
                        ));
                    };
                    let a = *alpha.get_ref();
                    if !(a.is_finite() && a > 0.0) {
                        return Err(at(
                            alpha.span(),
                            format!("boundary `{key}`: alpha = {a} is not a positive number"),
                        ));
                    }
                    ConditionKind::Robin {
                        alpha: a,
                        data: field(&r, &what("robin"), POINT_AND_NORMAL)?,
                    }
                }
                _ => {
                    return Err(at(
                        span,
                        format!("boundary `{key}` needs exactly one of dirichlet, neumann, robin"),
                    ))
                }
            };
            if let (Some(alpha), false) = (&c.alpha, matches!(kind, ConditionKind::Robin { .. })) {
                return Err(at(
                    alpha.span(),
                    format!("boundary `{key}`: alpha belongs to robin conditions"),
                ));
            }
            boundary.push(GroupCondition { key, span, kind });
        }

        // [exact]
        let exact = match raw.exact {
            None => None,
            Some(exact) => {
                let exact = exact.into_inner();
                let u = field(&exact.u, "exact u", POINT)?;
                let gradient = match exact.gradient {
                    None => None,
                    Some(g) => {
                        let span = g.span();
                        let fields = g
                            .into_inner()
                            .iter()
                            .enumerate()
                            .map(|(i, c)| field(c, &format!("exact gradient[{i}]"), POINT))
                            .collect::<Result<Vec<_>, _>>()?;
                        Some((fields, span))
                    }
                };
                Some(ExactSpec { u, gradient })
            }
        };

        // [discretization]
        let discretization = raw.discretization.into_inner();
        let order = *discretization.order.get_ref();
        if !(MIN_ORDER as u64..=MAX_ORDER as u64).contains(&order) {
            return Err(at(
                discretization.order.span(),
                format!("order {order} is not in {MIN_ORDER}..={MAX_ORDER}"),
            ));
        }
        let tau = match discretization.tau {
            None => Tau::Constant(1.0),
            Some(t) => {
                let parsed = match t.get_ref() {
                    FieldValue::Number(v) => parse_tau(&v.to_string()),
                    FieldValue::Expression(s) => parse_tau(s),
                };
                parsed.map_err(|e| at(t.span(), format!("tau: {e}")))?
            }
        };

        // [solver]
        let s = raw.solver;
        let precision = match s.precision {
            Some(PrecisionName::F32) => Precision::F32,
            Some(PrecisionName::F64) | None => Precision::F64,
        };
        let backend = s.backend.unwrap_or_default();
        let defaults = SolverSettings::default();
        let solver = match &s.method {
            Some(m) => m.get_ref().parse().map_err(|e: String| at(m.span(), e))?,
            None => defaults.choice,
        };
        let tolerance = match &s.tolerance {
            Some(t) => {
                hdg::check_tolerance(*t.get_ref()).map_err(|e| at(t.span(), e.to_string()))?;
                Some(*t.get_ref())
            }
            None => None,
        };
        let max_iterations = match &s.max_iterations {
            Some(m) if *m.get_ref() == 0 => {
                return Err(at(m.span(), "max_iterations must be at least 1".into()))
            }
            Some(m) => usize::try_from(*m.get_ref()).unwrap_or(usize::MAX),
            None => defaults.max_iterations,
        };
        let operator = match &s.operator {
            Some(o) => o.get_ref().parse().map_err(|e: String| at(o.span(), e))?,
            None => TraceOperatorKind::Dbf,
        };

        // [output]
        let resolve = |p: &Option<String>| p.as_ref().map(|p| folder.join(p));
        let outputs = Outputs {
            json: resolve(&raw.output.json),
            vtu: resolve(&raw.output.vtu),
            png: resolve(&raw.output.png),
        };
        // A file name of another format is refused now, before the mesh is built.
        crate::SolutionOutputs { vtu: outputs.vtu.clone(), png: outputs.png.clone() }.check()?;

        Ok(ProblemFile {
            path: path.to_path_buf(),
            text: text.to_string(),
            title: raw.title,
            mesh,
            mesh_span,
            perturb,
            seed: raw_mesh.seed.unwrap_or(1),
            kappa,
            reaction,
            source,
            mean_zero: equation.mean_zero.unwrap_or(false),
            dirichlet_default,
            boundary,
            exact,
            order: order as usize,
            tau,
            solver,
            tolerance,
            max_iterations,
            backend,
            precision,
            operator,
            outputs,
        })
    }
}

/// Sets `key` (a dotted path: `solver.method`) of `document` to `value` parsed as a TOML value
/// (a string where it parses as none), making the tables on the way; says why not.
fn set_key(document: &mut toml::Table, key: &str, value: &str) -> Result<(), String> {
    let parsed = match toml::from_str::<toml::Table>(&format!("value = {value}")) {
        Ok(mut table) => table.remove("value").unwrap_or_else(|| value.into()),
        Err(_) => toml::Value::String(value.to_string()),
    };
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("`{key}` is not a dotted key path (say, discretization.order)"));
    }
    let (last, tables) = parts.split_last().ok_or_else(|| "empty key".to_string())?;
    let mut table = document;
    for (i, part) in tables.iter().enumerate() {
        let entry =
            table.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| format!("`{}` is a value, not a table", parts[..=i].join(".")))?;
    }
    table.insert(last.to_string(), parsed);
    Ok(())
}
