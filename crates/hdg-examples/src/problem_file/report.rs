//! The summary and the outputs of a solved problem file.
use super::*;

impl Solved {
    /// Writes the JSON report where the file asks for it, and prints the summary (or, with
    /// `json`, the JSON report on standard output); whether the trace solve converged within
    /// the tolerance.
    ///
    /// # Errors
    /// [`CoreError::Io`] if the JSON report cannot be written.
    pub fn finish(mut self, json: bool) -> Result<bool, CoreError> {
        self.account();
        let report = self.json();
        self.write_json(&report)?;
        let files =
            crate::SolutionOutputs { vtu: self.outputs.vtu.clone(), png: self.outputs.png.clone() };
        let pending = match &self.run.solution {
            Some(solution) => files.write(solution, self.regions.as_deref())?,
            None => Vec::new(),
        };
        self.present(&report, json, &pending);
        Ok(self.converged())
    }

    /// The summary's account of the wall time up to now (its `process` line): the report is
    /// made before the outputs are written, so they are not in it.
    pub(super) fn account(&mut self) {
        let (mesh, backend, run) = self.times;
        let pipeline = self.run.report.timings.total;
        self.summary.process = Some(ProcessTimes::now(mesh, backend, run, pipeline, 0.0, 0.0));
    }

    /// Writes the JSON report where the file asks for it.
    ///
    /// # Errors
    /// [`CoreError::Io`] if it cannot be written.
    pub(super) fn write_json(&self, report: &serde_json::Value) -> Result<(), CoreError> {
        if let Some(path) = &self.outputs.json {
            let text = serde_json::to_string_pretty(report)
                .map_err(|e| CoreError::Io(format!("JSON report: {e}")))?;
            std::fs::write(path, text + "\n")
                .map_err(|e| CoreError::Io(format!("cannot write {}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// Prints the summary (or, with `json`, the JSON report on standard output) and the lines
    /// about the files written (`pending`), and warns about an f32 tolerance below what f32
    /// reaches.
    pub(super) fn present(&self, report: &serde_json::Value, json: bool, pending: &[String]) {
        if json {
            println!("{report}");
            for line in pending {
                eprintln!("hdg: {line}");
            }
        } else {
            print_report(&self.run, &self.summary);
            if let Some(path) = &self.outputs.json {
                println!("  output         {} (JSON report)", path.display());
            }
            for line in pending {
                println!("  {line}");
            }
        }
        let floor = hdg::default_tolerance(Precision::F32);
        if self.precision == Precision::F32 && self.summary.tolerance < floor {
            eprintln!(
                "hdg: warning: tolerance {:e} is below what f32 reaches (about {floor:e}); the \
                 solve stopped at relative residual {:.3e} (use precision = \"f64\")",
                self.summary.tolerance, self.run.report.solve.relative_residual
            );
        }
    }

    /// Whether the trace solve converged within the tolerance (never, for an f32 tolerance
    /// below what f32 reaches).
    pub(super) fn converged(&self) -> bool {
        let floor = hdg::default_tolerance(Precision::F32);
        if self.precision == Precision::F32 && self.summary.tolerance < floor {
            return false;
        }
        self.run.report.solve.converged
    }

    /// The JSON report: that of `hdg solve --json` ([`crate::summary_json`]: with `mesh`,
    /// `problem`, `options` and `mesh_notes`, the summary's lines about the mesh), with
    /// `problem_file` and `title`.
    pub fn json(&self) -> serde_json::Value {
        let mut json = summary_json(&self.run, &self.summary);
        json["problem_file"] = self.path.display().to_string().into();
        json["title"] = serde_json::json!(self.title);
        json
    }
}
