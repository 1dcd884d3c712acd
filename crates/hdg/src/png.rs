//! A picture of a 2D solution (PNG): a figure with a title, x and y axes with tick labels, the
//! field sampled at every pixel of the plot through the solution's point evaluation and
//! coloured with viridis, and a colour bar with labelled values. Axes and text are drawn by
//! `plotters` (bitmap backend) with a font embedded in the library ([`FONT`]).
use std::path::Path;

use hdg_core::{CoreError, Solution};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font of the pictures' text: DejaVu Sans, cut down to Latin, Greek and a few symbols
/// (Bitstream Vera licence with public-domain DejaVu changes: `assets/LICENSE-DejaVu.txt`).
pub const FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");

/// Registers [`FONT`] as plotters' "sans-serif" (once per process). The library's pictures
/// call it; a program that draws its own plots with plotters in the same build calls it too,
/// since plotters' `ab_glyph` feature, which this crate enables, knows no font until one is
/// registered (text layout then fails).
pub fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // The embedded font is valid; were it not, drawing text would report the missing font.
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Which field of a solution a picture shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// u_h
    U,
    /// The postprocessed u* (order k + 1).
    UStar,
}

impl Field {
    /// The field's name in titles: "u_h" or "u*".
    pub fn name(self) -> &'static str {
        match self {
            Field::U => "u_h",
            Field::UStar => "u*",
        }
    }
}

/// What [`write()`] drew.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Picture {
    /// Width and height in pixels of the whole figure.
    pub size: (u32, u32),
    /// The least and largest value shown (the ends of the colour bar).
    pub range: (f64, f64),
    /// The pixels of the field: left column, top row, width, height.
    pub plot: (u32, u32, u32, u32),
    /// The pixels of the colour bar (inside its frame): left column, top row, width, height.
    pub colour_bar: (u32, u32, u32, u32),
}

/// The band above the plot that holds the title, the margins left of and below it that hold
/// the axes' tick labels and names, and the colour bar's width and gap from the plot.
const TITLE_BAND: u32 = 44;
const LEFT: u32 = 72;
const BOTTOM: u32 = 52;
const COLOUR_BAR: u32 = 24;
const COLOUR_BAR_GAP: u32 = 20;
/// Font sizes in pixels: the title, tick labels, axis names.
const TITLE_SIZE: f64 = 22.0;
const LABEL_SIZE: f64 = 17.0;
const AXIS_NAME_SIZE: f64 = 19.0;
/// Values labelled on the colour bar: the least, the largest and three between.
const COLOUR_BAR_LABELS: usize = 5;

/// The default title of a picture: the field, the order and the number of cells, e.g.
/// "u* (k = 3, 524288 cells)".
pub fn default_title(solution: &Solution, field: Field) -> String {
    format!("{} (k = {}, {} cells)", field.name(), solution.order(), solution.mesh().n_cells())
}

/// A number for a tick label: at most four significant digits, without the noise of binary
/// fractions (0.30000000000000004 is "0.3"), in exponent form ("6.25e-2") below 1e-3 or from
/// 1e5 on.
pub fn short_number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let e = v.abs().log10().floor() as i32;
    if !(-3..5).contains(&e) {
        let s = format!("{v:.3e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        return format!("{mantissa}e{exponent}");
    }
    // Rounding through an exact power of ten gives the double nearest the short decimal,
    // which Display prints as that decimal.
    let p = 3 - e;
    let r = if p >= 0 {
        let s = 10f64.powi(p);
        (v * s).round() / s
    } else {
        let s = 10f64.powi(-p);
        (v / s).round() * s
    };
    if r == 0.0 {
        "0".into()
    } else {
        r.to_string()
    }
}

/// Labels for `n` evenly spaced values from `min` to `max` (both included), all with the
/// decimals the spacing needs (0, 0.25, 0.5, 0.75, 1); one label when the range is empty.
fn even_labels(min: f64, max: f64, n: usize) -> Vec<(f64, String)> {
    if max <= min || n < 2 {
        return vec![(min, short_number(min))];
    }
    let step = (max - min) / (n - 1) as f64;
    let largest = min.abs().max(max.abs());
    let scientific = !(1e-3..1e5).contains(&largest) || step < 1e-4;
    let decimals = (1 - step.log10().floor() as i32).max(0) as usize;
    (0..n)
        .map(|i| {
            let v = if i + 1 == n { max } else { min + step * i as f64 };
            let text = if scientific {
                short_number(v)
            } else {
                let s = format!("{v:.decimals$}");
                let s = if s.contains('.') {
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    s
                };
                if s == "-0" {
                    "0".to_string()
                } else {
                    s
                }
            };
            (v, text)
        })
        .collect()
}

/// Refuses a file name that does not end in `.png` (any case): the picture is PNG whatever
/// the name says.
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming the file.
pub fn check_path(path: &Path) -> Result<(), CoreError> {
    if crate::has_extension(path, &["png"]) {
        Ok(())
    } else {
        Err(CoreError::InvalidParameter {
            name: "picture file",
            reason: format!(
                "{}: the picture is drawn as PNG; use a .png file name",
                path.display()
            ),
        })
    }
}

/// [`write_titled`] with the [`default_title`].
///
/// # Errors
/// As [`write_titled`].
pub fn write(
    solution: &Solution,
    field: Field,
    path: &Path,
    width: u32,
) -> Result<Picture, CoreError> {
    write_titled(solution, field, path, width, &default_title(solution, field))
}

/// Writes a picture of `field` of a 2D solution to `path` (PNG, RGB): `title` above, the plot
/// `width` pixels across the mesh's bounding box (the height keeps the aspect ratio), each
/// pixel the field at its centre (found by the point locator), white outside the mesh, x and
/// y axes with tick labels, and a colour bar from the least value (bottom) to the largest
/// (top) labelled with five values.
///
/// # Errors
/// [`CoreError::InvalidParameter`] for a file name that does not end in `.png`, a 3D solution
/// or a width outside 16..=8192; [`CoreError::Io`] when the file cannot be written.
pub fn write_titled(
    solution: &Solution,
    field: Field,
    path: &Path,
    width: u32,
    title: &str,
) -> Result<Picture, CoreError> {
    check_path(path)?;
    let mesh = solution.mesh();
    if mesh.dim() != 2 {
        return Err(CoreError::InvalidParameter {
            name: "plot",
            reason: "a PNG picture shows a 2D solution; write a VTU file for 3D".into(),
        });
    }
    if !(16..=8192).contains(&width) {
        return Err(CoreError::InvalidParameter {
            name: "plot width",
            reason: format!("{width} pixels is not in 16..=8192"),
        });
    }
    let (mut low, mut high) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for v in 0..mesh.n_vertices() {
        for r in 0..2 {
            low[r] = low[r].min(mesh.vertex(v)[r]);
            high[r] = high[r].max(mesh.vertex(v)[r]);
        }
    }
    let pixel = (high[0] - low[0]) / width as f64;
    let height = (((high[1] - low[1]) / pixel).round() as u32).clamp(1, 8192);
    // Pixel centres, the top row first (images run downwards, y upwards).
    let mut points = Vec::with_capacity(2 * (width * height) as usize);
    for row in 0..height {
        for col in 0..width {
            points.push(low[0] + (col as f64 + 0.5) * pixel);
            points.push(high[1] - (row as f64 + 0.5) * pixel);
        }
    }
    let values: Vec<Option<f64>> = solution
        .evaluate_many(&points)?
        .into_iter()
        .map(|v| {
            v.map(|v| match field {
                Field::U => v.u,
                Field::UStar => v.u_star,
            })
            .filter(|v| v.is_finite())
        })
        .collect();
    let (min, max) = values
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    if min > max {
        return Err(CoreError::InvalidParameter {
            name: "plot width",
            reason: format!("no pixel centre of a {width}-pixel picture lies in the mesh"),
        });
    }
    let colour = |v: f64| {
        let t = if max > min { (v - min) / (max - min) } else { 0.5 };
        let c = colorous::VIRIDIS.eval_continuous(t.clamp(0.0, 1.0));
        [c.r, c.g, c.b]
    };

    register_font();
    let labels = even_labels(min, max, COLOUR_BAR_LABELS);
    let label_font = FontDesc::new(FontFamily::SansSerif, LABEL_SIZE, FontStyle::Normal);
    let widest = labels.iter().map(|(_, s)| label_font.box_size(s).map_or(0, |b| b.0)).max();
    let bar_x = LEFT + width + COLOUR_BAR_GAP;
    let full_width = bar_x + COLOUR_BAR + 8 + widest.unwrap_or(0) + 12;
    let full_height = TITLE_BAND + height + BOTTOM;
    let (fw, fh) = (full_width as usize, full_height as usize);
    let mut rgb = vec![255u8; fw * fh * 3];
    let mut put = |col: u32, row: u32, c: [u8; 3]| {
        let at = (row as usize * fw + col as usize) * 3;
        rgb[at..at + 3].copy_from_slice(&c);
    };
    for row in 0..height {
        for col in 0..width {
            if let Some(v) = values[(row * width + col) as usize] {
                put(LEFT + col, TITLE_BAND + row, colour(v));
            }
        }
        let t = (height - 1 - row) as f64 / (height - 1).max(1) as f64;
        for col in 0..COLOUR_BAR {
            put(bar_x + col, TITLE_BAND + row, colour(min + (max - min) * t));
        }
    }
    let failed = |e: &dyn std::fmt::Display| CoreError::Io(format!("{}: {e}", path.display()));
    {
        let root =
            BitMapBackend::with_buffer(&mut rgb, (full_width, full_height)).into_drawing_area();
        let centred = Pos::new(HPos::Center, VPos::Center);
        let title_style = TextStyle::from(("sans-serif", TITLE_SIZE).into_font()).pos(centred);
        let title_at = ((LEFT + width / 2) as i32, (TITLE_BAND / 2) as i32);
        root.draw_text(title, &title_style, title_at).map_err(|e| failed(&e))?;
        // The axes: a chart over exactly the plot's pixels (label areas as wide as the margins).
        let area = root.clone().shrink((0, TITLE_BAND), (LEFT + width, height + BOTTOM));
        let mut chart = ChartBuilder::on(&area)
            .x_label_area_size(BOTTOM)
            .y_label_area_size(LEFT)
            .build_cartesian_2d(low[0]..high[0], low[1]..high[1])
            .map_err(|e| failed(&e))?;
        let tick = |v: &f64| short_number(*v);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(6)
            .y_labels(6)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .label_style(("sans-serif", LABEL_SIZE))
            .axis_desc_style(("sans-serif", AXIS_NAME_SIZE))
            .x_desc("x")
            .y_desc("y")
            .draw()
            .map_err(|e| failed(&e))?;
        let frame = |x0: u32, w: u32| {
            Rectangle::new(
                [
                    ((x0 - 1) as i32, (TITLE_BAND - 1) as i32),
                    ((x0 + w) as i32, (TITLE_BAND + height) as i32),
                ],
                BLACK.stroke_width(1),
            )
        };
        root.draw(&frame(LEFT, width)).map_err(|e| failed(&e))?;
        root.draw(&frame(bar_x, COLOUR_BAR)).map_err(|e| failed(&e))?;
        // The colour bar's labels: a tick at each value's row, the value to its right.
        let label_style =
            TextStyle::from(label_font.clone()).pos(Pos::new(HPos::Left, VPos::Center));
        let right = (bar_x + COLOUR_BAR) as i32;
        for (v, text) in &labels {
            let t = if max > min { (v - min) / (max - min) } else { 0.5 };
            let y = (TITLE_BAND + height - 1) as i32 - (t * (height - 1) as f64).round() as i32;
            root.draw(&PathElement::new(vec![(right, y), (right + 5, y)], BLACK))
                .map_err(|e| failed(&e))?;
            root.draw_text(text, &label_style, (right + 8, y)).map_err(|e| failed(&e))?;
        }
        root.present().map_err(|e| failed(&e))?;
    }
    let io = |e: std::io::Error| CoreError::Io(format!("{}: {e}", path.display()));
    let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let mut encoder = ::png::Encoder::new(file, full_width, full_height);
    encoder.set_color(::png::ColorType::Rgb);
    encoder.set_depth(::png::BitDepth::Eight);
    let encoded = encoder.write_header().and_then(|mut w| w.write_image_data(&rgb));
    encoded.map_err(|e| CoreError::Io(format!("{}: {e}", path.display())))?;
    Ok(Picture {
        size: (full_width, full_height),
        range: (min, max),
        plot: (LEFT, TITLE_BAND, width, height),
        colour_bar: (bar_x, TITLE_BAND, COLOUR_BAR, height),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tick labels carry at most four significant digits and no binary-fraction noise.
    #[test]
    fn short_numbers_are_short() {
        assert_eq!(short_number(0.1 + 0.2), "0.3");
        assert_eq!(short_number(0.0625), "0.0625");
        assert_eq!(short_number(1.0 / 3.0), "0.3333");
        assert_eq!(short_number(-2.0), "-2");
        assert_eq!(short_number(12345.0), "12350");
        assert_eq!(short_number(6.25e-4), "6.25e-4");
        assert_eq!(short_number(1.0e-5), "1e-5");
        assert_eq!(short_number(123456.0), "1.235e5");
        assert_eq!(short_number(0.0), "0");
    }

    /// The colour bar's labels share the decimals their spacing needs; a tiny negative
    /// least value (a sampled zero) reads as 0.
    #[test]
    fn colour_bar_labels_are_even_and_clean() {
        let text = |min, max| -> Vec<String> {
            even_labels(min, max, 5).into_iter().map(|(_, s)| s).collect()
        };
        assert_eq!(text(0.0, 1.0), ["0", "0.25", "0.5", "0.75", "1"]);
        assert_eq!(text(-3e-5, 1.0), ["0", "0.25", "0.5", "0.75", "1"]);
        assert_eq!(text(0.0, 8.0), ["0", "2", "4", "6", "8"]);
        assert_eq!(text(1e-6, 5e-6), ["1e-6", "2e-6", "3e-6", "4e-6", "5e-6"]);
        assert_eq!(text(2.0, 2.0), ["2"]);
    }

    /// The picture of u = sin(pi x) sin(pi y) on the unit square, read back with the PNG
    /// decoder: the centre of the plot (u = 1, the largest value) has the top colour of
    /// viridis, its corners (u = 0, the least) colours of the sampled values, and the colour
    /// bar runs from one to the other; an L-shaped mesh leaves the pixels of the missing
    /// quarter white.
    #[test]
    fn a_picture_of_a_solution_shows_its_values() {
        use crate::{generate, mesh::Diagonal, Manufactured, Problem, Solver};
        let viridis = |t: f64| {
            let c = colorous::VIRIDIS.eval_continuous(t);
            [c.r, c.g, c.b]
        };
        let read = |path: &Path| {
            let decoder = ::png::Decoder::new(std::fs::File::open(path).unwrap());
            let mut reader = decoder.read_info().unwrap();
            let mut rgb = vec![0; reader.output_buffer_size()];
            let info = reader.next_frame(&mut rgb).unwrap();
            std::fs::remove_file(path).ok();
            assert_eq!(info.color_type, ::png::ColorType::Rgb);
            (rgb, info.width, info.height)
        };
        let mesh = generate::unit_square(8, Diagonal::Right).unwrap();
        let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let solution = Solver::new(mesh, problem).order(3).solve().unwrap();
        let path = std::env::temp_dir().join(format!("hdg-picture-{}.png", std::process::id()));
        let picture = write(&solution, Field::U, &path, 101).unwrap();
        let (rgb, width, height) = read(&path);
        assert_eq!((width, height), picture.size);
        assert_eq!(picture.plot.2..=picture.plot.3, 101..=101);
        let at = |col: u32, row: u32| {
            let i = ((row * width + col) * 3) as usize;
            [rgb[i], rgb[i + 1], rgb[i + 2]]
        };
        let plot = |col: u32, row: u32| at(picture.plot.0 + col, picture.plot.1 + row);
        // The range is that of the sampled u_h: near 0 at the corner pixels, near 1 at the
        // centre pixel (u_h at order 3 on this mesh is within 1e-3 of u).
        assert!(picture.range.0.abs() < 1e-2 && (picture.range.1 - 1.0).abs() < 1e-3);
        let t = |u: f64| (u - picture.range.0) / (picture.range.1 - picture.range.0);
        assert_eq!(
            plot(50, 50),
            viridis(t(solution.evaluate_many(&[0.5, 0.5]).unwrap()[0].unwrap().u))
        );
        let corner =
            solution.evaluate_many(&[0.5 / 101.0, 1.0 - 0.5 / 101.0]).unwrap()[0].unwrap().u;
        assert_eq!(plot(0, 0), viridis(t(corner)));
        let (x, y, w, h) = picture.colour_bar;
        assert_eq!(at(x + w / 2, y), viridis(1.0));
        assert_eq!(at(x + w / 2, y + h - 1), viridis(0.0));
        assert_eq!(at(x - 4, y + h / 2), [255; 3], "the gap before the colour bar is white");

        let l_shape = crate::gmsh::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/meshes/l-shape-1.msh")
                .as_path(),
        )
        .unwrap()
        .mesh;
        let problem = Problem::builder().source(|_| 1.0).build();
        let solution = Solver::new(l_shape, problem).order(1).solve().unwrap();
        let picture = write_titled(&solution, Field::UStar, &path, 64, "L").unwrap();
        let (rgb, width, _) = read(&path);
        let (inside, outside, n) = (0..picture.plot.3).fold((0, 0, 0), |mut acc, row| {
            for col in 0..64 {
                let x =
                    [-1.0 + (col as f64 + 0.5) * 2.0 / 64.0, 1.0 - (row as f64 + 0.5) * 2.0 / 64.0];
                let i = (((picture.plot.1 + row) * width + picture.plot.0 + col) * 3) as usize;
                let white = rgb[i..i + 3] == [255; 3];
                match solution.evaluate_many(&x).unwrap()[0] {
                    Some(_) => acc.0 += !white as usize,
                    None => acc.1 += white as usize,
                }
                acc.2 += 1;
            }
            acc
        });
        assert_eq!(inside + outside, n, "{picture:?}");
        assert!(outside > 0 && inside > outside);
        assert!(write(&solution, Field::U, &path, 8).is_err());
    }
}
