//! Block Jacobi on the device: batched Cholesky factorisation and inversion of the diagonal
//! blocks (in registers) and the block solve (unrolled), for the block sizes of
//! `crate::block_sizes`; larger blocks in place in device memory.
use cust::memory::CopyDestination;
use hdg_core::{check_lengths, whole_blocks, BlockOps, CoreError, Result};

use super::DeviceVector;
use crate::design::{MAX_BLOCK_SIZE, TETRAHEDRON_BLOCK_SIZES};
use crate::device::{address, arg, cuda_error, elementwise_blocks, CudaBackend, DeviceReal};

impl<T: DeviceReal> BlockOps<T> for CudaBackend {
    fn factor_blocks(&self, blocks: &mut DeviceVector<T>, block_size: usize) -> Result<()> {
        let bsz = block_size * block_size;
        let n_blocks = whole_blocks("factor_blocks", blocks.len(), bsz)?;
        if n_blocks == 0 {
            return Ok(());
        }
        let info = self.gpu.zeros::<i32>(n_blocks)?;
        let (n64, b, bp, ip) =
            (n_blocks as u64, block_size as u32, blocks.address(), address(&info));
        let grid = elementwise_blocks(n_blocks);
        // Blocks of a compiled size are factored in registers; larger ones in place.
        if (1..=MAX_BLOCK_SIZE).contains(&block_size) {
            let kernel = format!("factor_blocks_{}_b{block_size}", T::SUFFIX);
            // SAFETY: factor_blocks_T_bB(u64 n_blocks, T* blocks, int* info): blocks holds
            // n_blocks * B * B entries (checked above), info n_blocks ints.
            unsafe { self.gpu.launch(&kernel, grid, &[arg(&n64), arg(&bp), arg(&ip)])? };
        } else {
            let kernel = format!("factor_blocks_{}_any", T::SUFFIX);
            // SAFETY: factor_blocks_T_any(u64 n_blocks, unsigned b, T* blocks, int* info):
            // sizes as above.
            unsafe { self.gpu.launch(&kernel, grid, &[arg(&n64), arg(&b), arg(&bp), arg(&ip)])? };
        }
        let info = self.gpu.download(&info)?;
        if let Some(bad) = info.iter().position(|&v| v != 0) {
            let pivot = (info[bad] - 1) as usize;
            let at = bad * bsz + pivot * block_size + pivot;
            let mut value = [T::zero()];
            blocks
                .buffer
                .index(at..at + 1)
                .copy_to(&mut value[..])
                .map_err(|e| cuda_error("device-to-host copy failed", e))?;
            return Err(CoreError::Solver(format!(
                "block Jacobi: diagonal block {bad} is not positive definite (pivot {pivot} = {:e})",
                value[0].as_f64()
            )));
        }
        Ok(())
    }

    fn solve_blocks(
        &self,
        factors: &DeviceVector<T>,
        block_size: usize,
        r: &DeviceVector<T>,
        z: &mut DeviceVector<T>,
    ) -> Result<()> {
        let n_blocks = whole_blocks("solve_blocks", r.len(), block_size)?;
        let bsz = block_size * block_size;
        check_lengths("solve_blocks", &[r.len(), n_blocks * bsz], &[z.len(), factors.len()])?;
        if n_blocks == 0 {
            return Ok(());
        }
        let (n64, fp, rp, zp) = (n_blocks as u64, factors.address(), r.address(), z.address());
        let grid = elementwise_blocks(n_blocks);
        let b = block_size as u32;
        // Blocks of a compiled size have an unrolled kernel (any slot count: no SpMV here).
        if (1..=MAX_BLOCK_SIZE).contains(&block_size)
            || TETRAHEDRON_BLOCK_SIZES.contains(&block_size)
        {
            let kernel = format!("solve_blocks_{}_b{block_size}", T::SUFFIX);
            // SAFETY: solve_blocks_T_bB(u64 n_blocks, const T* factors, const T* r, T* z):
            // factors of n_blocks * B * B entries, r and z of n_blocks * B (checked above).
            unsafe { self.gpu.launch(&kernel, grid, &[arg(&n64), arg(&fp), arg(&rp), arg(&zp)]) }
        } else {
            let kernel = format!("solve_blocks_{}_any", T::SUFFIX);
            // SAFETY: solve_blocks_T_any(u64 n_blocks, unsigned b, const T* factors,
            // const T* r, T* z), sizes as above.
            unsafe {
                self.gpu.launch(&kernel, grid, &[arg(&n64), arg(&b), arg(&fp), arg(&rp), arg(&zp)])
            }
        }
    }
}
