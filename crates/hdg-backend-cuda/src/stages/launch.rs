//! What every element stage's launch shares: poisoning outputs for tests, reading back the
//! per-element failure flags, and the optional phase clock.

use cust::memory::DeviceBuffer;
use hdg_core::{CoreError, Result};

use crate::device::{CudaBackend, DeviceReal};

/// Fills the buffers with NaN (every bit set), in stream order.
pub(crate) fn poison<T: DeviceReal, const B: usize>(
    backend: &CudaBackend,
    buffers: [&mut DeviceBuffer<T>; B],
) -> Result<()> {
    backend.gpu.bind()?;
    for buffer in buffers {
        // SAFETY: a memset on the backend's stream of a live buffer of this context: ordered
        // after the work queued before it and before the work queued after it; all bits set
        // is a valid f32 or f64 (a NaN).
        unsafe { buffer.set_8_async(0xff, &backend.gpu.stream) }
            .map_err(|e| crate::device::cuda_error("cannot poison device memory", e))?;
    }
    Ok(())
}

/// The error of the first element whose `info` flag is set (0 = fine, else pivot + 1; -1: the
/// kernel got less dynamic shared memory than its layout needs).
pub(crate) fn first_failure<T: DeviceReal>(
    backend: &CudaBackend,
    info: &DeviceBuffer<i32>,
    values: &DeviceBuffer<T>,
) -> Result<()> {
    let flags = backend.gpu.download(info)?;
    if let Some(element) = flags.iter().position(|&v| v != 0) {
        if flags[element] < 0 {
            return Err(launch_configuration_error());
        }
        let values = backend.gpu.download(values)?;
        return Err(CoreError::NotPositiveDefinite {
            element,
            pivot: (flags[element] - 1) as usize,
            value: values[element].as_f64(),
        });
    }
    Ok(())
}

/// The error of a block kernel that found less dynamic shared memory than its layout needs.
pub(crate) fn launch_configuration_error() -> CoreError {
    CoreError::Backend(
        "an element kernel got less dynamic shared memory than its layout needs (the sizes of \
         design.rs and the kernel files disagree)"
            .into(),
    )
}

/// Wall-clock phases of a host function, printed to standard error when enabled
/// ([`crate::CudaSettings::profile`]: what `gpu-bench.sh e2e2d` uses to split the setup and
/// postprocessing stages); silent and nearly free otherwise.
pub(crate) struct PhaseClock {
    what: &'static str,
    enabled: bool,
    last: std::time::Instant,
    phases: Vec<(std::borrow::Cow<'static, str>, f64)>,
}

impl PhaseClock {
    pub(crate) fn new(what: &'static str, enabled: bool) -> Self {
        PhaseClock { what, enabled, last: std::time::Instant::now(), phases: Vec::new() }
    }

    /// Ends the current phase. Uploads are synchronous and the device loads synchronise, so a
    /// phase includes its device work.
    pub(crate) fn lap(&mut self, phase: impl Into<std::borrow::Cow<'static, str>>) {
        if self.enabled {
            let now = std::time::Instant::now();
            self.phases.push((phase.into(), (now - self.last).as_secs_f64()));
            self.last = now;
        }
    }

    pub(crate) fn report(&self) {
        if self.enabled {
            let phases: Vec<String> =
                self.phases.iter().map(|(p, s)| format!("{p} {s:.4} s")).collect();
            eprintln!("[hdg-cuda profile] {}: {}", self.what, phases.join(", "));
        }
    }
}
