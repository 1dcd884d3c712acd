//! Conversions between the host's element-contiguous arrays and the device's element-fastest
//! and sector-blocked ones (layouts in the module documentation of [`crate::stages`]).

use rayon::prelude::*;

/// `out[f * n_cells + e] = data[e * per + f]` (per = data.len() / n_cells).
pub(crate) fn to_element_fastest<T: Copy + Default + Send + Sync>(
    data: &[T],
    n_cells: usize,
) -> Vec<T> {
    if n_cells == 0 {
        return Vec::new();
    }
    let per = data.len() / n_cells;
    let mut out = vec![T::default(); data.len()];
    // Parallel within each plane too: a plane per task would leave most threads idle (3 or 4
    // planes of tau).
    const CHUNK: usize = 1 << 14;
    out.par_chunks_mut(n_cells).enumerate().for_each(|(f, plane)| {
        plane.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, part)| {
            for (i, v) in part.iter_mut().enumerate() {
                *v = data[(chunk * CHUNK + i) * per + f];
            }
        });
    });
    out
}

/// Cells per block of the condensation's sector-blocked arrays: one 32-byte sector's worth of T
/// (`kernels/condensed_layout.cuh`).
pub(crate) fn condensed_block<T>() -> usize {
    32 / std::mem::size_of::<T>()
}

/// Cells the sector-blocked arrays of the condensation hold (module documentation): `n_cells`
/// rounded up to whole blocks of one 32-byte sector's worth of T (`condensed_block`).
pub fn condensed_cells<T>(n_cells: usize) -> usize {
    n_cells.div_ceil(condensed_block::<T>()) * condensed_block::<T>()
}

/// A blocked array (`cells` cells, a multiple of `block`, in blocks of `block` cells, each
/// block's values element-fastest: value v of cell e at `[((e / block) planes + v) block +
/// e % block]`, planes = data.len() / cells) to element-contiguous `[e * planes + v]` for the
/// first `n_cells` cells.
pub(crate) fn blocked_to_element_contiguous<T: Copy + Default + Send + Sync>(
    data: &[T],
    n_cells: usize,
    cells: usize,
    block: usize,
) -> Vec<T> {
    if cells == 0 {
        return Vec::new();
    }
    let planes = data.len() / cells;
    let mut out = vec![T::default(); n_cells * planes];
    out.par_chunks_mut(planes.max(1)).enumerate().for_each(|(e, record)| {
        let base = (e / block) * planes * block + e % block;
        for (v, x) in record.iter_mut().enumerate() {
            *x = data[base + v * block];
        }
    });
    out
}

/// A sector-blocked array of the condensation (`data.len()` = planes x [`condensed_cells`])
/// to element-contiguous `[e * planes + v]`, `n_cells` cells.
pub(crate) fn condensed_to_element_contiguous<T: Copy + Default + Send + Sync>(
    data: &[T],
    n_cells: usize,
) -> Vec<T> {
    blocked_to_element_contiguous(
        data,
        n_cells,
        condensed_cells::<T>(n_cells),
        condensed_block::<T>(),
    )
}

/// The inverse of [`to_element_fastest`]: element-fastest planes are one block of all the
/// cells.
pub(crate) fn to_element_contiguous<T: Copy + Default + Send + Sync>(
    data: &[T],
    n_cells: usize,
) -> Vec<T> {
    blocked_to_element_contiguous(data, n_cells, n_cells, n_cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sector-blocked layout written out by hand: 5 cells of 3 values in f64 (blocks of 4
    /// cells: the second block holds cell 4 and three padding cells), 9 cells in f32 (blocks
    /// of 8).
    #[test]
    fn condensed_layout_reads_back_element_contiguous() {
        assert_eq!(condensed_cells::<f64>(5), 8);
        assert_eq!(condensed_cells::<f32>(9), 16);
        assert_eq!(condensed_cells::<f64>(0), 0);
        // Cell e, value v as 10 e + v; padding -1.
        let f64_blocked: Vec<f64> = vec![
            0.0, 10.0, 20.0, 30.0, 1.0, 11.0, 21.0, 31.0, 2.0, 12.0, 22.0, 32.0, // cells 0..4
            40.0, -1.0, -1.0, -1.0, 41.0, -1.0, -1.0, -1.0, 42.0, -1.0, -1.0, -1.0, // cell 4
        ];
        let expected: Vec<f64> =
            (0..5).flat_map(|e| (0..3).map(move |v| (10 * e + v) as f64)).collect();
        assert_eq!(condensed_to_element_contiguous(&f64_blocked, 5), expected);
        let mut f32_blocked = vec![-1.0f32; 16 * 2];
        for e in 0..9 {
            for v in 0..2 {
                f32_blocked[(e / 8) * 16 + v * 8 + e % 8] = (10 * e + v) as f32;
            }
        }
        let expected: Vec<f32> =
            (0..9).flat_map(|e| (0..2).map(move |v| (10 * e + v) as f32)).collect();
        assert_eq!(condensed_to_element_contiguous(&f32_blocked, 9), expected);
        // Element-fastest planes (one block of all the cells), and back.
        let fastest = vec![0.0, 10.0, 20.0, 1.0, 11.0, 21.0];
        let contiguous = vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        assert_eq!(to_element_contiguous(&fastest, 3), contiguous);
        assert_eq!(to_element_fastest(&contiguous, 3), fastest);
        assert!(to_element_contiguous::<f64>(&[], 0).is_empty());
    }
}
