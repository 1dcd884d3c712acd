//! mesh-bench: times the host work on a mesh before the pipeline starts: generating a
//! structured mesh (`Mesh::build`'s checks, face topology and conformity check included) and
//! extracting each rank's part of a block partition (`MeshPart::new`, what every rank of a
//! distributed run does), each the median of `--samples` runs, with the Rayon threads given.
//!
//! Usage: mesh-bench --mesh square:913 [--parts 4] [--samples 3] [--threads N]
use std::time::Instant;

use clap::Parser;
use hdg_mesh::{generate, Diagonal, Mesh, MeshPart, Partition};

#[derive(Parser)]
struct Args {
    /// square:N (2 N^2 triangles) or cube:N (6 N^3 tetrahedra).
    #[arg(long, default_value = "square:913")]
    mesh: String,
    /// Parts of the block partition whose part 0 is extracted (0: none).
    #[arg(long, default_value_t = 4)]
    parts: usize,
    #[arg(long, default_value_t = 3)]
    samples: usize,
    /// Rayon threads (default: Rayon's).
    #[arg(long)]
    threads: Option<usize>,
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn generate(spec: &str) -> Mesh {
    let (kind, n) = spec.split_once(':').expect("square:N or cube:N");
    let n: usize = n.parse().expect("a size");
    match kind {
        "square" => generate::unit_square(n, Diagonal::Right),
        "cube" => generate::unit_cube(n),
        _ => panic!("square:N or cube:N"),
    }
    .expect("a mesh")
}

fn main() {
    let args = Args::parse();
    if let Some(threads) = args.threads {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().expect("a pool");
    }
    let mut mesh = None;
    let times = (0..args.samples)
        .map(|_| {
            drop(mesh.take());
            let start = Instant::now();
            mesh = Some(generate(&args.mesh));
            start.elapsed().as_secs_f64()
        })
        .collect();
    let mesh = mesh.expect("at least one sample");
    println!(
        "{} ({} cells, {} faces, {} threads): generate {:.3} s",
        args.mesh,
        mesh.n_cells(),
        mesh.n_faces(),
        rayon::current_num_threads(),
        median(times)
    );
    if args.parts > 0 {
        let partition = Partition::blocks(mesh.n_cells(), args.parts);
        let times = (0..args.samples)
            .map(|_| {
                let start = Instant::now();
                let part = MeshPart::new(&mesh, &partition, 0).expect("a part");
                let t = start.elapsed().as_secs_f64();
                drop(part);
                t
            })
            .collect();
        println!("part 0 of {} blocks: {:.3} s", args.parts, median(times));
    }
}
