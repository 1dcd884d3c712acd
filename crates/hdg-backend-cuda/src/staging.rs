//! Large copies between pageable host memory and the device, staged through page-locked
//! buffers (what `Gpu::upload` and `Gpu::download` do from [`STAGED_BYTES`] on).
//!
//! A copy from or to pageable memory (a `Vec`) runs at a few GB/s: the driver stages it
//! through its own page-locked memory with one host thread. From [`STAGED_BYTES`] on the
//! backend stages it itself: two page-locked buffers of [`CHUNK_BYTES`], the device's copy of
//! one chunk running while the host's threads (Rayon, [`PIECE_BYTES`] each) copy the other,
//! so the copy runs near the link's rate. The buffers are allocated on a thread of their own
//! from the backend's start (`crate::device::Preloaded`: pinning memory takes the driver some
//! milliseconds) and kept (32 MiB of page-locked host memory per backend).
use std::ffi::c_void;

use cust::event::{Event, EventFlags};
use cust::memory::LockedBuffer;
use cust::stream::Stream;
use hdg_core::Result;
use rayon::prelude::*;

use crate::device::{cuda_error, driver_status};

/// Copies of at least this many bytes are staged.
pub(crate) const STAGED_BYTES: usize = 8 << 20;
/// Bytes per staging buffer, the unit of the overlap.
const CHUNK_BYTES: usize = 16 << 20;
/// Bytes per host thread's share of a chunk.
const PIECE_BYTES: usize = 1 << 20;

/// The two page-locked buffers and, for each, the event after the last device copy that used
/// it.
pub(crate) struct Staging {
    buffers: [LockedBuffer<u8>; 2],
    copied: [Event; 2],
}

/// dst = src, in pieces on Rayon's threads.
fn parallel_copy(src: &[u8], dst: &mut [u8]) {
    dst.par_chunks_mut(PIECE_BYTES)
        .zip(src.par_chunks(PIECE_BYTES))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

impl Staging {
    /// Allocates the buffers (the context must be current).
    pub(crate) fn new() -> Result<Self> {
        let buffer = || {
            LockedBuffer::new(&0u8, CHUNK_BYTES)
                .map_err(|e| cuda_error("cannot allocate page-locked staging memory", e))
        };
        let event = || {
            Event::new(EventFlags::DISABLE_TIMING)
                .map_err(|e| cuda_error("cannot create a staging event", e))
        };
        Ok(Staging { buffers: [buffer()?, buffer()?], copied: [event()?, event()?] })
    }

    fn wait(&self, b: usize) -> Result<()> {
        self.copied[b].synchronize().map_err(|e| cuda_error("a staged copy failed", e))
    }

    /// host = the `host.len()` bytes at device address `device`, queued on `stream` (after its
    /// earlier work); returns when they are in `host`.
    ///
    /// # Safety
    /// `device` is the address of at least `host.len()` bytes of device memory of the current
    /// context that stay alive, and unwritten by other streams, until the call returns.
    pub(crate) unsafe fn download(
        &mut self,
        stream: &Stream,
        device: u64,
        host: &mut [u8],
    ) -> Result<()> {
        // The chunk whose device copy is queued and whose host copy is still to come.
        let mut pending: Option<(usize, &mut [u8])> = None;
        for (c, chunk) in host.chunks_mut(CHUNK_BYTES).enumerate() {
            let b = c % 2;
            // SAFETY: buffer b (CHUNK_BYTES >= chunk.len()) is free: its last chunk (c - 2)
            // was copied out by the host in the previous pass of this loop; the device range
            // lies inside the caller's (offset + chunk.len() <= host.len()).
            let status = unsafe {
                cust::sys::cuMemcpyDtoHAsync_v2(
                    self.buffers[b].as_mut_ptr() as *mut c_void,
                    device + (c * CHUNK_BYTES) as u64,
                    chunk.len(),
                    stream.as_inner(),
                )
            };
            driver_status("staged device-to-host copy", status)?;
            self.copied[b].record(stream).map_err(|e| cuda_error("cannot record an event", e))?;
            if let Some((previous, dst)) = pending.take() {
                self.wait(previous)?;
                parallel_copy(&self.buffers[previous][..dst.len()], dst);
            }
            pending = Some((b, chunk));
        }
        if let Some((previous, dst)) = pending {
            self.wait(previous)?;
            parallel_copy(&self.buffers[previous][..dst.len()], dst);
        }
        Ok(())
    }

    /// The `host.len()` bytes at device address `device` = host, queued on `stream` (after its
    /// earlier work); returns when the copy is complete.
    ///
    /// # Safety
    /// `device` is the address of at least `host.len()` bytes of device memory of the current
    /// context that stay alive, and untouched by other streams, until the call returns.
    pub(crate) unsafe fn upload(
        &mut self,
        stream: &Stream,
        host: &[u8],
        device: u64,
    ) -> Result<()> {
        for (c, chunk) in host.chunks(CHUNK_BYTES).enumerate() {
            let b = c % 2;
            if c >= 2 {
                // The device copy of chunk c - 2 read buffer b.
                self.wait(b)?;
            }
            parallel_copy(chunk, &mut self.buffers[b][..chunk.len()]);
            // SAFETY: buffer b holds the chunk and is not written again before this copy's
            // event has completed (the wait above, or the stream synchronisation below); the
            // device range lies inside the caller's.
            let status = unsafe {
                cust::sys::cuMemcpyHtoDAsync_v2(
                    device + (c * CHUNK_BYTES) as u64,
                    self.buffers[b].as_ptr() as *const c_void,
                    chunk.len(),
                    stream.as_inner(),
                )
            };
            driver_status("staged host-to-device copy", status)?;
            self.copied[b].record(stream).map_err(|e| cuda_error("cannot record an event", e))?;
        }
        stream.synchronize().map_err(|e| cuda_error("a staged copy failed", e))
    }
}
