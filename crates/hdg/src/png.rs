//! A picture of a 2D solution (PNG): a field sampled at every pixel through the solution's
//! point evaluation, coloured with viridis, with a colour bar.
use std::path::Path;

use hdg_core::{CoreError, Solution};

/// Which field of a solution a picture shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// u_h
    U,
    /// The postprocessed u* (order k + 1).
    UStar,
}

/// What [`write()`] drew.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Picture {
    /// Width and height in pixels, colour bar included.
    pub size: (u32, u32),
    /// The least and largest value shown (the ends of the colour bar).
    pub range: (f64, f64),
}

/// Pixels of the colour bar at the right edge of a picture, and of the gap before it.
const COLOUR_BAR: u32 = 24;
const COLOUR_BAR_GAP: u32 = 8;

/// Writes a picture of `field` of a 2D solution to `path` (PNG, RGBA): `width` pixels across
/// the mesh's bounding box (the height keeps the aspect ratio), each pixel the field at its
/// centre (found by the point locator), transparent outside the mesh; a colour bar from the
/// least value (bottom) to the largest (top) at the right edge.
///
/// # Errors
/// [`CoreError::InvalidParameter`] for a 3D solution or a width outside 16..=8192;
/// [`CoreError::Io`] when the file cannot be written.
pub fn write(
    solution: &Solution,
    field: Field,
    path: &Path,
    width: u32,
) -> Result<Picture, CoreError> {
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
        })
        .collect();
    let (min, max) = values
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    let colour = |v: f64| {
        let t = if max > min { (v - min) / (max - min) } else { 0.5 };
        let c = colorous::VIRIDIS.eval_continuous(t.clamp(0.0, 1.0));
        [c.r, c.g, c.b, 255]
    };
    let full_width = width + COLOUR_BAR_GAP + COLOUR_BAR;
    let mut rgba = vec![0u8; (full_width * height * 4) as usize];
    for row in 0..height {
        for col in 0..full_width {
            let at = ((row * full_width + col) * 4) as usize;
            let pixel = if col < width {
                match values[(row * width + col) as usize] {
                    Some(v) if v.is_finite() => colour(v),
                    _ => [0, 0, 0, 0],
                }
            } else if col >= width + COLOUR_BAR_GAP {
                colour(min + (max - min) * (height - 1 - row) as f64 / (height - 1).max(1) as f64)
            } else {
                [0, 0, 0, 0]
            };
            rgba[at..at + 4].copy_from_slice(&pixel);
        }
    }
    let io = |e: std::io::Error| CoreError::Io(format!("{}: {e}", path.display()));
    let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let mut encoder = ::png::Encoder::new(file, full_width, height);
    encoder.set_color(::png::ColorType::Rgba);
    encoder.set_depth(::png::BitDepth::Eight);
    let encoded = encoder.write_header().and_then(|mut w| w.write_image_data(&rgba));
    encoded.map_err(|e| CoreError::Io(format!("{}: {e}", path.display())))?;
    Ok(Picture { size: (full_width, height), range: (min, max) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The picture of u = sin(pi x) sin(pi y) on the unit square, read back with the PNG
    /// decoder: the centre (u = 1, the largest value) has the top colour of viridis, the
    /// corners (u = 0, the least) its bottom colour, and the colour bar runs from one to the
    /// other; an L-shaped mesh leaves the pixels of the missing quarter transparent.
    #[test]
    fn a_picture_of_a_solution_shows_its_values() {
        use crate::{generate, mesh::Diagonal, Manufactured, Problem, Solver};
        let viridis = |t: f64| {
            let c = colorous::VIRIDIS.eval_continuous(t);
            [c.r, c.g, c.b, 255]
        };
        let mesh = generate::unit_square(8, Diagonal::Right).unwrap();
        let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        let solution = Solver::new(mesh, problem).order(3).solve().unwrap();
        let path = std::env::temp_dir().join(format!("hdg-picture-{}.png", std::process::id()));
        let picture = write(&solution, Field::U, &path, 101).unwrap();
        let decoder = ::png::Decoder::new(std::fs::File::open(&path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut rgba = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgba).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!((info.width, info.height), picture.size);
        assert_eq!(picture.size, (101 + COLOUR_BAR_GAP + COLOUR_BAR, 101));
        let at = |col: u32, row: u32| {
            let i = ((row * info.width + col) * 4) as usize;
            [rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3]]
        };
        // The range is that of the sampled u_h: near 0 at the corner pixels, near 1 at the
        // centre pixel (u_h at order 3 on this mesh is within 1e-3 of u).
        assert!(picture.range.0.abs() < 1e-2 && (picture.range.1 - 1.0).abs() < 1e-3);
        let t = |u: f64| (u - picture.range.0) / (picture.range.1 - picture.range.0);
        assert_eq!(at(50, 50), viridis(t(solution.evaluate(&[0.5, 0.5]).unwrap().u)));
        let corner = solution.evaluate(&[0.5 / 101.0, 1.0 - 0.5 / 101.0]).unwrap().u;
        assert_eq!(at(0, 0), viridis(t(corner)));
        assert_eq!(at(info.width - 1, 0), viridis(1.0));
        assert_eq!(at(info.width - 1, info.height - 1), viridis(0.0));
        assert_eq!(at(101, 50)[3], 0, "the gap before the colour bar is transparent");

        let l_shape = crate::gmsh::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/meshes/l-shape-1.msh")
                .as_path(),
        )
        .unwrap()
        .mesh;
        let problem = Problem::builder().source(|_| 1.0).build();
        let solution = Solver::new(l_shape, problem).order(1).solve().unwrap();
        let picture = write(&solution, Field::UStar, &path, 64).unwrap();
        let decoder = ::png::Decoder::new(std::fs::File::open(&path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut rgba = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgba).unwrap();
        std::fs::remove_file(&path).ok();
        let (mut inside, mut outside) = (0, 0);
        for row in 0..info.height {
            for col in 0..64 {
                let x =
                    [-1.0 + (col as f64 + 0.5) * 2.0 / 64.0, 1.0 - (row as f64 + 0.5) * 2.0 / 64.0];
                let alpha = rgba[((row * info.width + col) * 4 + 3) as usize];
                match solution.evaluate(&x) {
                    Some(_) => inside += (alpha == 255) as usize,
                    None => outside += (alpha == 0) as usize,
                }
            }
        }
        assert_eq!(inside + outside, (64 * info.height) as usize, "{picture:?}");
        assert!(outside > 0 && inside > outside);
        assert!(write(&solution, Field::U, &path, 8).is_err());
    }
}
