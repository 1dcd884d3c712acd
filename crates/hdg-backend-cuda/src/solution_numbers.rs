//! The numbers by which the kernels know the manufactured solutions: the one source of the
//! solutions' branches and kernel instances that `build.rs` generates
//! (`manufactured_solutions.cuh`, from `hdg_core::manufactured`) and of the number in the name
//! of the kernel the host launches.
use super::Manufactured;

/// Polynomial solutions up to this degree have device code (the degrees of every order the
/// core allows); a higher degree is evaluated on the host.
pub const MAX_POLYNOMIAL_DEGREE: usize = 10;

/// The kernels' number of `solution`; None for a solution without device code.
pub fn solution_number(solution: Manufactured) -> Option<u32> {
    match solution {
        Manufactured::Sine => Some(0),
        Manufactured::ExpSin => Some(1),
        Manufactured::Polynomial(k) if k <= MAX_POLYNOMIAL_DEGREE => Some(2 + k as u32),
        Manufactured::Polynomial(_) => None,
    }
}

/// Every solution with device code.
pub fn solutions_with_device_code() -> impl Iterator<Item = Manufactured> {
    [Manufactured::Sine, Manufactured::ExpSin]
        .into_iter()
        .chain((0..=MAX_POLYNOMIAL_DEGREE).map(Manufactured::Polynomial))
}
