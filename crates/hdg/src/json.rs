//! A run's report as JSON: the stable object `hdg solve --json` prints and problem files
//! write. Keys: `cells`, `trace_dofs`, `order`, `backend`, `precision`, `solver`,
//! `iterations`, `relative_residual`, `converged`, `solve_notes` (free text: a
//! preconditioner's setup and levels, say), `errors` {`u`, `q`, `u_star`} (null without an
//! exact solution), `timings_s` {`setup`, `condense`, `assemble`, `solve`, `recover`,
//! `postprocess`, `total`}; for a whole [`Run`] also `operator`, `device_memory` (null unless
//! watched: `peak_bytes`, `peak_bytes_per_trace_dof`, `baseline_used_bytes`, `total_bytes`,
//! `samples`, `interval_s`), `host_peak_rss_bytes` (null where unknown) and `glibc_tunables`
//! (the process's `GLIBC_TUNABLES`, null where unset).
use hdg_core::PipelineReport;
use serde_json::{json, Value};

use crate::Run;

/// The pipeline's report.
pub fn report(report: &PipelineReport) -> Value {
    let errors = report.errors.map(|e| json!({ "u": e.u, "q": e.q, "u_star": e.u_star }));
    let t = &report.timings;
    json!({
        "cells": report.cells,
        "trace_dofs": report.trace_dofs,
        "order": report.order,
        "backend": report.backend,
        "precision": report.precision,
        "solver": report.solver,
        "iterations": report.solve.iterations,
        "relative_residual": report.solve.relative_residual,
        "converged": report.solve.converged,
        "solve_notes": report.solve.notes,
        "errors": errors,
        "timings_s": timings(t),
    })
}

/// Stage times in seconds, by stage name.
pub fn timings(t: &hdg_core::StageTimings) -> Value {
    serde_json::json!({
        "setup": t.setup,
        "condense": t.condense,
        "assemble": t.assemble,
        "solve": t.solve,
        "recover": t.recover,
        "postprocess": t.postprocess,
        "total": t.total,
    })
}

/// The whole run: [`report`] with the operator and the memory figures.
pub fn run(run: &Run) -> Value {
    let mut value = report(&run.report);
    let dofs = run.report.trace_dofs.max(1) as f64;
    value["operator"] = run.operator.name().into();
    value["device_memory"] = match run.device_memory {
        Some(d) => json!({
            "peak_bytes": d.peak_bytes,
            "peak_bytes_per_trace_dof": d.peak_bytes as f64 / dofs,
            "peak_at_s": d.peak_at_s,
            "baseline_used_bytes": d.baseline_used_bytes,
            "total_bytes": d.total_bytes,
            "samples": d.samples,
            "interval_s": d.interval_s,
        }),
        None => Value::Null,
    };
    value["host_peak_rss_bytes"] = json!(run.host_peak_rss_bytes);
    value["glibc_tunables"] = json!(std::env::var("GLIBC_TUNABLES").ok());
    value
}
