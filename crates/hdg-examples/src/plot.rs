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

/// The slope of log(error) against log(h) between the last two meshes: the rate the table of
/// `hdg convergence` prints for its finest pair (NaN with fewer than two meshes or an error
/// that is not positive).
pub fn finest_pair_rate(h: &[f64], errors: &[f64]) -> f64 {
    match (h, errors) {
        ([.., h0, h1], [.., e0, e1]) if *e0 > 0.0 && *e1 > 0.0 => (e0 / e1).ln() / (h0 / h1).ln(),
        _ => f64::NAN,
    }
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

/// The rates a convergence plot states for one series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Between the two finest meshes ([`finest_pair_rate`]), as the table's last row.
    pub finest_pair: f64,
    /// The least-squares slope over all meshes ([`fitted_rate`]).
    pub fit: f64,
}

/// A mesh size for a tick label: "1/16" when 1/h is a whole number, else at most four
/// significant digits ([`hdg::png::short_number`]).
pub fn h_label(h: f64) -> String {
    let n = 1.0 / h;
    if n.is_finite() && n >= 1.0 && (n - n.round()).abs() < 1e-9 * n {
        match n.round() as u64 {
            1 => "1".into(),
            n => format!("1/{n}"),
        }
    } else {
        hdg::png::short_number(h)
    }
}

/// An error for a tick label: exponent form with at most three significant digits ("1e-5",
/// "2.5e-5").
fn error_label(e: f64) -> String {
    let s = format!("{e:.2e}");
    match s.split_once('e') {
        Some((m, x)) if m.contains('.') => {
            format!("{}e{x}", m.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => s,
    }
}

/// Refuses a file name that does not end in `.svg` (any case), before any work is done.
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming the file.
pub fn check_svg_path(path: &Path) -> Result<(), CoreError> {
    if hdg::has_extension(path, &["svg"]) {
        return Ok(());
    }
    Err(CoreError::InvalidParameter {
        name: "plot file",
        reason: format!(
            "{}: the convergence plot is drawn as SVG; use a .svg file name",
            path.display()
        ),
    })
}

/// Writes the log-log plot of each series against h to `path` (SVG): a tick at every mesh's h
/// (labelled 1/N), each series labelled "NAME: rate R (finest pair), fit F, expected E" and a
/// caption below saying what the two rates are; returns the rates stated.
///
/// # Errors
/// [`CoreError::InvalidParameter`] for a file name that does not end in `.svg` or nothing
/// positive to plot; [`CoreError::Io`] when the file cannot be written.
pub fn convergence_svg(
    path: &Path,
    title: &str,
    h: &[f64],
    series: &[Series<'_>],
) -> Result<Vec<Rates>, CoreError> {
    check_svg_path(path)?;
    let io = |e: &dyn std::fmt::Display| CoreError::Io(format!("{}: {e}", path.display()));
    let positive = |v: &&f64| v.is_finite() && **v > 0.0;
    let all = series.iter().flat_map(|s| s.errors.iter()).filter(positive);
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), &e| (a.min(e), b.max(e)));
    let (hmin, hmax) = h.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    if !(lo <= hi && hmin <= hmax && hmin > 0.0) {
        return Err(CoreError::InvalidParameter {
            name: "plot",
            reason: "no positive errors and mesh sizes to plot".into(),
        });
    }
    // plotters lays text out with the library's embedded font (its `ab_glyph` feature).
    hdg::png::register_font();
    let root = SVGBackend::new(path, (800, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| io(&e))?;
    let (upper, caption) = root.split_vertically(548);
    let mut chart = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(76)
        .build_cartesian_2d(
            (hmin / 1.5..hmax * 1.5).log_scale().with_key_points(h.to_vec()),
            (lo / 3.0..hi * 3.0).log_scale(),
        )
        .map_err(|e| io(&e))?;
    chart
        .configure_mesh()
        .x_desc("h")
        .y_desc("L2 error")
        .label_style(("sans-serif", 17))
        .axis_desc_style(("sans-serif", 18))
        .x_label_formatter(&|v| h_label(*v))
        .y_label_formatter(&|v| error_label(*v))
        .draw()
        .map_err(|e| io(&e))?;
    let colours = [RED, BLUE, BLACK, GREEN];
    let mut rates = Vec::new();
    let rate = |r: f64| if r.is_finite() { format!("{r:.2}") } else { "-".into() };
    for (i, s) in series.iter().enumerate() {
        let stated =
            Rates { finest_pair: finest_pair_rate(h, s.errors), fit: fitted_rate(h, s.errors) };
        rates.push(stated);
        let colour = colours[i % colours.len()];
        let points: Vec<(f64, f64)> =
            h.iter().copied().zip(s.errors.iter().copied()).filter(|(_, e)| positive(&e)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
            .map_err(|e| io(&e))?
            .label(format!(
                "{}: rate {} (finest pair), fit {}, expected {}",
                s.name,
                rate(stated.finest_pair),
                rate(stated.fit),
                s.expected
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| io(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 16))
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(|e| io(&e))?;
    // What the two rates are, in the table's terms.
    let (first, last) = (h_label(h[0]), h_label(h[h.len() - 1]));
    let lines = match h {
        [.., h0, h1] => [
            format!(
                "rate: slope between the two finest meshes (h = {} and {}), as in the table's last row",
                h_label(*h0),
                h_label(*h1)
            ),
            format!("fit: least-squares slope over all {} meshes (h = {first} to {last})", h.len()),
        ],
        _ => ["one mesh: no rate".to_string(), String::new()],
    };
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let style =
        TextStyle::from(("sans-serif", 16).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    for (i, line) in lines.iter().enumerate() {
        caption.draw_text(line, &style, (400, 12 + 20 * i as i32)).map_err(|e| io(&e))?;
    }
    root.present().map_err(|e| io(&e))?;
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Errors C h^p give the rate p, whatever C, fitted or from the finest pair.
    #[test]
    fn the_fitted_rate_of_a_power_law_is_its_exponent() {
        let h = [0.25, 0.125, 0.0625, 0.03125];
        let e: Vec<f64> = h.iter().map(|h: &f64| 7.0 * h.powf(3.0)).collect();
        assert!((fitted_rate(&h, &e) - 3.0).abs() < 1e-12);
        assert!((finest_pair_rate(&h, &e) - 3.0).abs() < 1e-12);
        assert!(fitted_rate(&h[..1], &e[..1]).is_nan());
        assert!(finest_pair_rate(&h[..1], &e[..1]).is_nan());
        // A pre-asymptotic first level moves the fit, not the finest pair.
        let mut e = e;
        e[0] *= 4.0;
        assert!((finest_pair_rate(&h, &e) - 3.0).abs() < 1e-12 && fitted_rate(&h, &e) > 3.5);
    }

    /// Mesh sizes read as 1/N; errors in exponent form with no binary noise.
    #[test]
    fn tick_labels_are_clean() {
        assert_eq!(h_label(1.0 / 16.0), "1/16");
        assert_eq!(h_label(1.0 / 3.0), "1/3");
        assert_eq!(h_label(1.0), "1");
        assert_eq!(h_label(0.1 + 0.2), "0.3");
        assert_eq!(error_label(1e-5), "1e-5");
        assert_eq!(error_label(2.5e-5), "2.5e-5");
        assert_eq!(error_label(3.0000000000000004e-3), "3e-3");
    }
}
