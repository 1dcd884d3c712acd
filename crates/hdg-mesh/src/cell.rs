//! Cell types and their local numbering conventions.
//!
//! These conventions are shared by the mesh (which faces a cell has, and how it meets each) and by
//! the reference elements (which reference face matrices exist): they live here, at the bottom of
//! the dependency graph, so that there is exactly one copy of them.

/// The shape of a simplicial cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CellType {
    /// A triangle (2D). Local face `f` is the edge opposite local vertex `f`.
    Triangle,
    /// A tetrahedron (3D). Local face `f` is the triangle opposite local vertex `f`.
    Tetrahedron,
}

const TRIANGLE_FACES: [[usize; 2]; 3] = [[1, 2], [2, 0], [0, 1]];
const TETRAHEDRON_FACES: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];

impl CellType {
    /// Spatial dimension.
    pub const fn dim(self) -> usize {
        match self {
            CellType::Triangle => 2,
            CellType::Tetrahedron => 3,
        }
    }

    /// Number of vertices of one cell.
    pub const fn vertices_per_cell(self) -> usize {
        self.dim() + 1
    }

    /// Number of faces of one cell.
    pub const fn faces_per_cell(self) -> usize {
        self.dim() + 1
    }

    /// Number of vertices of one face.
    pub const fn vertices_per_face(self) -> usize {
        self.dim()
    }

    /// Number of ways a cell can meet one of its faces: the permutations of the face's vertices
    /// (2 for an edge, 6 for a triangle).
    pub const fn n_orientations(self) -> usize {
        match self {
            CellType::Triangle => 2,
            CellType::Tetrahedron => 6,
        }
    }

    /// Local vertices of local face `f`, in the order that defines the face's local
    /// parametrisation (see the reference elements in `hdg-core`).
    pub fn face_vertices(self, f: usize) -> &'static [usize] {
        match self {
            CellType::Triangle => &TRIANGLE_FACES[f],
            CellType::Tetrahedron => &TETRAHEDRON_FACES[f],
        }
    }

    /// Orientation code of a face met by a cell whose local face vertices have global numbers
    /// `global` (in local order).
    ///
    /// Every global face has one canonical orientation, its vertices sorted by global number; the
    /// code is the lexicographic index of the permutation `perm` with `perm[i]` = canonical
    /// position of the `i`-th local vertex. For an edge: 0 when the local order is the canonical
    /// one, 1 when it is reversed.
    pub fn orientation(self, global: &[usize]) -> u8 {
        debug_assert_eq!(global.len(), self.vertices_per_face());
        let mut perm = [0usize; 3];
        let m = global.len();
        for i in 0..m {
            perm[i] = (0..m).filter(|&j| global[j] < global[i]).count();
        }
        permutation_index(&perm[..m]) as u8
    }

    /// The permutation with lexicographic index `code` (inverse of [`CellType::orientation`]):
    /// entry `i` is the canonical position of the `i`-th local face vertex.
    pub fn orientation_permutation(self, code: u8) -> Vec<usize> {
        let m = self.vertices_per_face();
        let mut remaining: Vec<usize> = (0..m).collect();
        let mut code = code as usize;
        let mut perm = Vec::with_capacity(m);
        for i in (0..m).rev() {
            let f = factorial(i);
            perm.push(remaining.remove(code / f));
            code %= f;
        }
        perm
    }
}

fn factorial(n: usize) -> usize {
    (1..=n).product()
}

/// Lexicographic index of a permutation of `0..m`.
fn permutation_index(perm: &[usize]) -> usize {
    let m = perm.len();
    let mut index = 0;
    for i in 0..m {
        let smaller_after = perm[i + 1..].iter().filter(|&&p| p < perm[i]).count();
        index += smaller_after * factorial(m - 1 - i);
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_orientation_codes() {
        assert_eq!(CellType::Triangle.orientation(&[3, 7]), 0);
        assert_eq!(CellType::Triangle.orientation(&[7, 3]), 1);
        assert_eq!(CellType::Triangle.orientation_permutation(0), vec![0, 1]);
        assert_eq!(CellType::Triangle.orientation_permutation(1), vec![1, 0]);
    }

    #[test]
    fn triangle_face_codes_round_trip_all_six() {
        let mut seen = [false; 6];
        let perms = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
        for p in perms {
            let global = [10 + p[0], 10 + p[1], 10 + p[2]];
            let code = CellType::Tetrahedron.orientation(&global);
            assert_eq!(CellType::Tetrahedron.orientation_permutation(code), p.to_vec());
            seen[code as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
