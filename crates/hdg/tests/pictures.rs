//! The pictures and files the library writes: a PNG figure with its title, axes and labelled
//! colour bar found in the decoded pixels, and each writer refusing a file name whose
//! extension is not its format's.
use std::path::{Path, PathBuf};

use hdg::core::CoreError;
use hdg::mesh::Diagonal;
use hdg::png::{self, Field, Picture};
use hdg::{generate, Error, Manufactured, Problem, Silent, Solution, Solver};

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hdg-pictures-{}-{name}", std::process::id()))
}

fn sine(n: usize) -> Solution {
    let mesh = generate::unit_square(n, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    Solver::new(mesh, problem).order(2).solve().unwrap()
}

/// A decoded RGB image.
struct Image {
    rgb: Vec<u8>,
    width: u32,
    height: u32,
}

impl Image {
    fn read(path: &Path) -> Image {
        let decoder = ::png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!(info.color_type, ::png::ColorType::Rgb);
        Image { rgb, width: info.width, height: info.height }
    }

    fn at(&self, col: u32, row: u32) -> [u8; 3] {
        let i = ((row * self.width + col) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Text and lines: dark grey to black (viridis's darkest, 68 1 84, has a red of 68).
    fn dark(&self, col: u32, row: u32) -> bool {
        self.at(col, row).iter().all(|&c| c < 60)
    }

    /// The rows of a column range that hold a dark pixel, as runs (first, last).
    fn dark_runs(&self, cols: std::ops::Range<u32>, rows: std::ops::Range<u32>) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for row in rows {
            if cols.clone().any(|c| self.dark(c, row)) {
                match runs.last_mut() {
                    Some(run) if run.1 + 1 == row => run.1 = row,
                    _ => runs.push((row, row)),
                }
            }
        }
        runs
    }

    fn dark_count(&self, cols: std::ops::Range<u32>, rows: std::ops::Range<u32>) -> usize {
        rows.flat_map(|r| cols.clone().map(move |c| (c, r)))
            .filter(|&(c, r)| self.dark(c, r))
            .count()
    }
}

/// The figure of u = sin(pi x) sin(pi y): a title band above the plot with the title's text
/// (a longer title darkens more of it), tick labels below and left of the plot, and right of
/// the colour bar five labels, the top one at the bar's top and the bottom one at its foot;
/// the field and the bar keep their viridis colours. The old layout (the plot and a bar,
/// nothing else) has none of these.
#[test]
fn a_png_picture_is_a_figure_with_title_axes_and_a_labelled_colour_bar() {
    let solution = sine(8);
    let path = scratch("figure.png");
    let title = "u* (k = 2, 128 cells)";
    let picture: Picture = png::write_titled(&solution, Field::UStar, &path, 200, title).unwrap();
    let image = Image::read(&path);
    assert_eq!((image.width, image.height), picture.size);
    let (px, py, pw, ph) = picture.plot;
    let (bx, by, bw, bh) = picture.colour_bar;
    assert_eq!((pw, ph), (200, 200));
    assert!(px >= 30 && py >= 20, "room for the y labels and the title: {picture:?}");
    assert!(image.height >= py + ph + 30, "room for the x labels: {picture:?}");
    assert!(bx > px + pw && by == py && bh == ph);

    // The field and the colour bar.
    let viridis = |t: f64| {
        let c = colorous::VIRIDIS.eval_continuous(t);
        [c.r, c.g, c.b]
    };
    let (min, max) = picture.range;
    let centre =
        solution.evaluate_many(&[100.5 / 200.0, 1.0 - 100.5 / 200.0]).unwrap()[0].unwrap().u_star;
    assert_eq!(image.at(px + 100, py + 100), viridis((centre - min) / (max - min)));
    assert_eq!(image.at(bx + bw / 2, by), viridis(1.0));
    assert_eq!(image.at(bx + bw / 2, by + bh - 1), viridis(0.0));

    // The title: dark pixels in the band above the plot (above the top tick labels, which
    // reach a few rows above it), centred over the plot.
    let title_rows = 0..py * 3 / 4;
    let band = image.dark_count(0..image.width, title_rows.clone());
    assert!(band > 100, "no title text above the plot ({band} dark pixels)");
    let columns: Vec<u32> =
        (0..image.width).filter(|&c| title_rows.clone().any(|r| image.dark(c, r))).collect();
    let middle = (columns[0] + columns[columns.len() - 1]) / 2;
    assert!(
        middle.abs_diff(px + pw / 2) < 10,
        "title centred at {middle}, plot at {}",
        px + pw / 2
    );
    png::write_titled(&solution, Field::UStar, &path, 200, "u").unwrap();
    let short = Image::read(&path).dark_count(0..image.width, title_rows);
    assert!(short * 3 < band, "the title is the caller's: {short} vs {band} dark pixels");

    // Tick labels of the axes: text left of the plot and below it (beyond the axis lines).
    assert!(image.dark_count(0..px - 8, py..py + ph) > 100, "no y tick labels");
    assert!(image.dark_count(px..px + pw, py + ph + 8..image.height) > 100, "no x tick labels");

    // The colour bar's labels: five runs of text rows right of its ticks, the first level
    // with the bar's top, the last with its foot.
    let labels = image.dark_runs(bx + bw + 7..image.width, 0..image.height);
    assert_eq!(labels.len(), 5, "{labels:?}");
    let centre_of = |run: (u32, u32)| (run.0 + run.1) / 2;
    assert!(centre_of(labels[0]).abs_diff(by) <= 8, "{labels:?} top {by}");
    assert!(centre_of(labels[4]).abs_diff(by + bh - 1) <= 8, "{labels:?} foot {}", by + bh - 1);
    for run in &labels {
        let height = run.1 - run.0 + 1;
        assert!((6..=24).contains(&height), "text rows {run:?}");
    }
    std::fs::remove_file(&path).ok();
}

/// The default title names the field, the order and the cells.
#[test]
fn the_default_title_says_what_is_shown() {
    let solution = sine(4);
    assert_eq!(png::default_title(&solution, Field::UStar), "u* (k = 2, 32 cells)");
    assert_eq!(png::default_title(&solution, Field::U), "u_h (k = 2, 32 cells)");
}

/// Each writer refuses a name with another format's extension, saying which to use, and
/// writes nothing; the right extension (in any case) still works.
#[test]
fn writers_refuse_a_file_name_of_another_format() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let run = Solver::new(mesh, problem).order(1).keep_operator(true).run(&mut Silent).unwrap();
    let solution = run.solution.as_ref().expect("kept");

    let svg = scratch("u.svg");
    match png::write(solution, Field::UStar, &svg, 64) {
        Err(CoreError::InvalidParameter { reason, .. }) => {
            assert!(reason.contains("u.svg") && reason.contains(".png"), "{reason}")
        }
        other => panic!("a PNG into u.svg: {other:?}"),
    }
    assert!(!svg.exists());
    let png_path = scratch("u.PNG");
    png::write(solution, Field::UStar, &png_path, 64).unwrap();
    assert_eq!(&std::fs::read(&png_path).unwrap()[..4], b"\x89PNG");
    std::fs::remove_file(&png_path).ok();

    let vtk = scratch("u.vtk");
    match hdg::vtu::write(solution, &vtk, &Default::default()) {
        Err(e @ Error::Output { .. }) => {
            let text = e.to_string();
            assert!(text.contains("u.vtk") && text.contains("use a .vtu file name"), "{text}");
        }
        other => panic!("VTU into u.vtk: {other:?}"),
    }
    assert!(!vtk.exists());
    let vtu = scratch("u.vtu");
    hdg::vtu::write(solution, &vtu, &Default::default()).unwrap();
    assert!(std::fs::read_to_string(&vtu).unwrap().contains("<VTKFile"));
    std::fs::remove_file(&vtu).ok();

    let matrix = run.trace_matrix.as_ref().expect("kept");
    let txt = scratch("a.txt");
    match hdg::matrix_market::write(matrix, &txt) {
        Err(CoreError::InvalidParameter { reason, .. }) => {
            assert!(reason.contains("a.txt") && reason.contains(".mtx"), "{reason}")
        }
        other => panic!("Matrix Market into a.txt: {other:?}"),
    }
    assert!(!txt.exists());
    let mtx = scratch("a.mtx");
    hdg::matrix_market::write(matrix, &mtx).unwrap();
    assert!(std::fs::read_to_string(&mtx).unwrap().starts_with("%%MatrixMarket"));
    std::fs::remove_file(&mtx).ok();
}
