//! The plot of `hdg convergence`: the errors against h, with the rates fitted to them (SVG
//! through `plotters`). Pictures of a solution are the library's (`hdg::png`).
use std::path::Path;

use hdg::CoreError;
use plotters::prelude::*;

/// The least-squares slope of log(error) against log(h) over all meshes: the rate a sequence
/// shows (NaN with fewer than two meshes or an error that is not positive).
pub fn fitted_rate(h: &[f64], errors: &[f64]) -> f64 {
    let points: Vec<(f64, f64)> = h.iter().zip(errors).map(|(h, e)| (h.ln(), e.ln())).collect();
    let n = points.len() as f64;
    if points.len() < 2 || points.iter().any(|(_, y)| !y.is_finite()) {
        return f64::NAN;
    }
    let (mx, my) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    sxy / sxx
}

/// One curve of a convergence plot: its name, its errors (one per mesh) and the rate the
/// method should show.
pub struct Series<'a> {
    /// "u", "q", "u*".
    pub name: &'a str,
    /// Errors, one per h.
    pub errors: &'a [f64],
    /// The expected rate.
    pub expected: f64,
}

/// Writes the log-log plot of each series against h to `path` (SVG), each labelled
/// "NAME: rate R (expected E)" with its [`fitted_rate`]; returns the fitted rates.
///
/// # Errors
/// [`CoreError::Io`] when the file cannot be written.
pub fn convergence_svg(
    path: &Path,
    title: &str,
    h: &[f64],
    series: &[Series<'_>],
) -> Result<Vec<f64>, CoreError> {
    let io = |e: &dyn std::fmt::Display| CoreError::Io(format!("{}: {e}", path.display()));
    let positive = |v: &&f64| v.is_finite() && **v > 0.0;
    let all = series.iter().flat_map(|s| s.errors.iter()).filter(positive);
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), &e| (a.min(e), b.max(e)));
    let (hmin, hmax) = h.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    if !(lo <= hi && hmin <= hmax) {
        return Err(CoreError::InvalidParameter {
            name: "plot",
            reason: "no positive errors and mesh sizes to plot".into(),
        });
    }
    // plotters lays text out with the library's embedded font (its `ab_glyph` feature).
    hdg::png::register_font();
    let root = SVGBackend::new(path, (720, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| io(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((hmin / 1.5..hmax * 1.5).log_scale(), (lo / 3.0..hi * 3.0).log_scale())
        .map_err(|e| io(&e))?;
    chart
        .configure_mesh()
        .x_desc("h")
        .y_desc("L2 error")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()
        .map_err(|e| io(&e))?;
    let colours = [RED, BLUE, BLACK, GREEN];
    let mut rates = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let rate = fitted_rate(h, s.errors);
        rates.push(rate);
        let colour = colours[i % colours.len()];
        let points: Vec<(f64, f64)> =
            h.iter().copied().zip(s.errors.iter().copied()).filter(|(_, e)| positive(&e)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
            .map_err(|e| io(&e))?
            .label(format!("{}: rate {rate:.2} (expected {})", s.name, s.expected))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| io(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(|e| io(&e))?;
    root.present().map_err(|e| io(&e))?;
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Errors C h^p give the rate p, whatever C.
    #[test]
    fn the_fitted_rate_of_a_power_law_is_its_exponent() {
        let h = [0.25, 0.125, 0.0625, 0.03125];
        let e: Vec<f64> = h.iter().map(|h: &f64| 7.0 * h.powf(3.0)).collect();
        assert!((fitted_rate(&h, &e) - 3.0).abs() < 1e-12);
        assert!(fitted_rate(&h[..1], &e[..1]).is_nan());
    }
}
