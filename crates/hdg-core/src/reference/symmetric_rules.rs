//! Fully symmetric quadrature rules on the reference triangle and tetrahedron, with positive
//! weights and every point strictly inside: about two thirds of the points of the collapsed Gauss
//! rule of the same degree on triangles, and under half on tetrahedra (degree 12: 33 against 49
//! points, and 145 against 343).
//!
//! The rules are those of F. D. Witherden and P. E. Vincent, "On the identification of symmetric
//! quadrature rules for finite element methods", Comput. Math. Appl. 69 (2015) 1232-1241, and, for
//! tetrahedra of degree 10 and above, Witherden's later rules found by the same method (polyquad);
//! the digits were read from the rule tables distributed with PyFR (BSD licence). Rules with a
//! point on the boundary or within 1e-4 of it in barycentric coordinates are left out (the
//! triangle's of degree 16, the tetrahedron's of degrees 9, 11, 12, 19 and 20, some of whose
//! points lie 1e-16 to 1e-9 from a face), and so is the tetrahedron's of degree 14, which has
//! negative weights: the collapsed rules have no such points, and callers
//! evaluate data (coefficients, loads) that is only defined inside the cell. A degree without a
//! rule takes the next higher one.
//!
//! A rule is stored as its orbits under the symmetry group of the simplex: one representative
//! point in barycentric coordinates (its free values; the last coordinate follows from the sum 1)
//! and the weight shared by the orbit's points. The tests check each rule against exact integrals
//! of all polynomials of its degree, so a wrong digit cannot pass.

use super::quadrature::QuadratureRule;

/// One orbit: the distinct permutations of a barycentric point, all with weight `w` (the weights
/// of a rule sum to the reference cell's volume: 2 for the triangle, 4/3 for the tetrahedron).
#[derive(Clone, Copy, Debug)]
pub(super) enum Orbit {
    /// The centroid (one point).
    Centroid { w: f64 },
    /// `(a, a, 1-2a)` on the triangle (3 points), `(a, a, a, 1-3a)` on the tetrahedron (4).
    Repeated { a: f64, w: f64 },
    /// `(a, a, 1/2-a, 1/2-a)` on the tetrahedron (6 points).
    TwoPairs { a: f64, w: f64 },
    /// `(a, b, 1-a-b)` on the triangle (6 points).
    Distinct { a: f64, b: f64, w: f64 },
    /// `(a, a, b, 1-2a-b)` on the tetrahedron (12 points).
    PairAndTwo { a: f64, b: f64, w: f64 },
    /// `(a, b, c, 1-a-b-c)` on the tetrahedron (24 points).
    FourDistinct { a: f64, b: f64, c: f64, w: f64 },
}

impl Orbit {
    /// The number of points of the orbit on the simplex of dimension `dim`.
    fn points(&self, dim: usize) -> usize {
        match self {
            Orbit::Centroid { .. } => 1,
            Orbit::Repeated { .. } => dim + 1,
            Orbit::TwoPairs { .. } | Orbit::Distinct { .. } => 6,
            Orbit::PairAndTwo { .. } => 12,
            Orbit::FourDistinct { .. } => 24,
        }
    }

    /// The representative's barycentric coordinates (`dim + 1` of them) with an id per distinct
    /// value (so that permutations are told apart exactly, not by comparing floats), and the
    /// weight.
    fn representative(&self, dim: usize) -> (Vec<f64>, Vec<u8>, f64) {
        let parts = (dim + 1) as f64;
        match (*self, dim) {
            (Orbit::Centroid { w }, _) => (vec![1.0 / parts; dim + 1], vec![0; dim + 1], w),
            (Orbit::Repeated { a, w }, _) => {
                let mut values = vec![a; dim];
                values.push(1.0 - dim as f64 * a);
                let mut ids = vec![0; dim];
                ids.push(1);
                (values, ids, w)
            }
            (Orbit::TwoPairs { a, w }, 3) => (vec![a, a, 0.5 - a, 0.5 - a], vec![0, 0, 1, 1], w),
            (Orbit::Distinct { a, b, w }, 2) => (vec![a, b, 1.0 - a - b], vec![0, 1, 2], w),
            (Orbit::PairAndTwo { a, b, w }, 3) => {
                (vec![a, a, b, 1.0 - 2.0 * a - b], vec![0, 0, 1, 2], w)
            }
            (Orbit::FourDistinct { a, b, c, w }, 3) => {
                (vec![a, b, c, 1.0 - a - b - c], vec![0, 1, 2, 3], w)
            }
            (orbit, _) => unreachable!("orbit {orbit:?} does not exist in dimension {dim}"),
        }
    }
}

/// All permutations of `0..n` in lexicographic order.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for first in 0..n {
        for rest in permutations(n - 1) {
            let mut p = vec![first];
            p.extend(rest.into_iter().map(|i| if i >= first { i + 1 } else { i }));
            out.push(p);
        }
    }
    out
}

/// Expands the orbits into the points of the reference simplex of dimension `dim` (vertex 0 at
/// `(-1, ..., -1)`, vertex `s + 1` at `-1 + 2 e_s`, so coordinate `s` is `-1 + 2 lambda_{s+1}`).
fn expand(dim: usize, orbits: &[Orbit]) -> QuadratureRule {
    let perms = permutations(dim + 1);
    let mut points = Vec::new();
    let mut weights = Vec::new();
    for orbit in orbits {
        let (values, ids, w) = orbit.representative(dim);
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for p in &perms {
            let key: Vec<u8> = p.iter().map(|&i| ids[i]).collect();
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            points.extend((1..=dim).map(|s| 2.0 * values[p[s]] - 1.0));
            weights.push(w);
        }
        assert_eq!(seen.len(), orbit.points(dim), "orbit {orbit:?}");
    }
    QuadratureRule { dim, points, weights }
}

/// The symmetric rule with the fewest points that is exact for polynomials of total degree
/// `degree` (the rule of the lowest listed degree at or above it) on the reference simplex of dimension `dim` (2 or 3), if the table has one.
pub(super) fn symmetric_rule(dim: usize, degree: usize) -> Option<QuadratureRule> {
    let table = match dim {
        2 => TRIANGLE_RULES,
        3 => TETRAHEDRON_RULES,
        _ => return None,
    };
    let points = |orbits: &[Orbit]| orbits.iter().map(|o| o.points(dim)).sum::<usize>();
    table
        .iter()
        .filter(|(d, _)| *d >= degree)
        .min_by_key(|(_, orbits)| points(orbits))
        .map(|(_, orbits)| expand(dim, orbits))
}

/// Symmetric triangle rules with positive weights and all points inside: `(degree, orbits)`.
#[rustfmt::skip]
pub(super) const TRIANGLE_RULES: &[(usize, &[Orbit])] = &[
    (1, &[
        Orbit::Centroid { w: 2.0 },
    ]),
    (2, &[
        Orbit::Repeated { a: 0.16666666666666666, w: 0.6666666666666666 },
    ]),
    (4, &[
        Orbit::Repeated { a: 0.4459484909159649, w: 0.44676317935602294 },
        Orbit::Repeated { a: 0.09157621350977074, w: 0.21990348731064374 },
    ]),
    (5, &[
        Orbit::Centroid { w: 0.45 },
        Orbit::Repeated { a: 0.10128650732345634, w: 0.2518783610896543 },
        Orbit::Repeated { a: 0.4701420641051151, w: 0.2647883055770124 },
    ]),
    (6, &[
        Orbit::Repeated { a: 0.06308901449150223, w: 0.10168981274041364 },
        Orbit::Repeated { a: 0.24928674517091043, w: 0.23357255145275874 },
        Orbit::Distinct { a: 0.053145049844816945, b: 0.3103524510337844, w: 0.16570215123674714 },
    ]),
    (7, &[
        Orbit::Repeated { a: 0.03373064855458785, w: 0.03309010022158426 },
        Orbit::Repeated { a: 0.24157738259540357, w: 0.25588834246031117 },
        Orbit::Repeated { a: 0.4743096925047182, w: 0.15417329237197214 },
        Orbit::Distinct { a: 0.04703664465259523, b: 0.1986833147973516, w: 0.11175746580639956 },
    ]),
    (8, &[
        Orbit::Centroid { w: 0.28863121535557434 },
        Orbit::Repeated { a: 0.4592925882927232, w: 0.19018326853456924 },
        Orbit::Repeated { a: 0.1705693077517602, w: 0.2064347410694365 },
        Orbit::Repeated { a: 0.05054722831703098, w: 0.06491699524639616 },
        Orbit::Distinct { a: 0.008394777409957605, b: 0.2631128296346381, w: 0.054460628348869985 },
    ]),
    (9, &[
        Orbit::Centroid { w: 0.19427159256559767 },
        Orbit::Repeated { a: 0.43708959149293664, w: 0.15565508200954856 },
        Orbit::Repeated { a: 0.18820353561903272, w: 0.1592954778544205 },
        Orbit::Repeated { a: 0.4896825191987376, w: 0.06266940045427814 },
        Orbit::Repeated { a: 0.04472951339445271, w: 0.05115535131739606 },
        Orbit::Distinct { a: 0.036838412054736286, b: 0.2219629891607657, w: 0.08656707875457875 },
    ]),
    (10, &[
        Orbit::Centroid { w: 0.16348665829257195 },
        Orbit::Repeated { a: 0.03205537321694351, w: 0.026705937626299133 },
        Orbit::Repeated { a: 0.14216110105656438, w: 0.09191592720948946 },
        Orbit::Distinct { a: 0.14813288578382056, b: 0.32181299528883545, w: 0.1278098127928481 },
        Orbit::Distinct { a: 0.02961988948872977, b: 0.36914678182781097, w: 0.06836929632591886 },
        Orbit::Distinct { a: 0.02836766533993844, b: 0.1637017337371825, w: 0.05059551541457677 },
    ]),
    (11, &[
        Orbit::Centroid { w: 0.17152235946444844 },
        Orbit::Repeated { a: 0.02848541761437191, w: 0.020863741025789393 },
        Orbit::Repeated { a: 0.21021995670317825, w: 0.14103136822343315 },
        Orbit::Repeated { a: 0.10263548271224643, w: 0.07726151847403864 },
        Orbit::Repeated { a: 0.4958919009658909, w: 0.03321254610917074 },
        Orbit::Repeated { a: 0.4384659267643522, w: 0.1346323081589366 },
        Orbit::Distinct { a: 0.007325427686064452, b: 0.14932478865208237, w: 0.020580579145906556 },
        Orbit::Distinct { a: 0.04601050016542996, b: 0.2895811256377058, w: 0.08066495328100111 },
    ]),
    (12, &[
        Orbit::Repeated { a: 0.4882037509455415, w: 0.04853367616290406 },
        Orbit::Repeated { a: 0.1092578276593543, w: 0.05697210413775509 },
        Orbit::Repeated { a: 0.2714625070149261, w: 0.12508242639180553 },
        Orbit::Repeated { a: 0.024646363436335594, w: 0.015863285019947278 },
        Orbit::Repeated { a: 0.4401116486585931, w: 0.09983666985612188 },
        Orbit::Distinct { a: 0.02303415635526714, b: 0.29165567973834094, w: 0.04356717007721512 },
        Orbit::Distinct { a: 0.11629601967792659, b: 0.25545422863851736, w: 0.08645472731882842 },
        Orbit::Distinct { a: 0.02138249025617059, b: 0.12727971723358936, w: 0.030167355153022875 },
    ]),
    (13, &[
        Orbit::Centroid { w: 0.13592007317366328 },
        Orbit::Repeated { a: 0.48907694645253935, w: 0.04798880385778946 },
        Orbit::Repeated { a: 0.2213722862918329, w: 0.11655697023839996 },
        Orbit::Repeated { a: 0.4269414142598004, w: 0.11120393506090666 },
        Orbit::Repeated { a: 0.021509681108843184, w: 0.012104674207078343 },
        Orbit::Distinct { a: 0.08789548303219732, b: 0.16359740106785048, w: 0.04835807962318764 },
        Orbit::Distinct { a: 0.02437018690109383, b: 0.11092204280346339, w: 0.029930802210331335 },
        Orbit::Distinct { a: 0.06801224355420665, b: 0.3084417608921178, w: 0.06928255228169675 },
        Orbit::Distinct { a: 0.0051263891023823685, b: 0.27251581777342965, w: 0.019181362007086526 },
    ]),
    (14, &[
        Orbit::Repeated { a: 0.17720553241254344, w: 0.08432517747398603 },
        Orbit::Repeated { a: 0.41764471934045394, w: 0.0655767070882507 },
        Orbit::Repeated { a: 0.0617998830908726, w: 0.028867399339553335 },
        Orbit::Repeated { a: 0.4889639103621786, w: 0.04376716273885778 },
        Orbit::Repeated { a: 0.27347752830883865, w: 0.10354820901458317 },
        Orbit::Repeated { a: 0.019390961248701048, w: 0.009846807204800164 },
        Orbit::Distinct { a: 0.01464695005565441, b: 0.29837288213625773, w: 0.02887261622706768 },
        Orbit::Distinct { a: 0.05712475740364794, b: 0.17226668782135557, w: 0.04933150642512735 },
        Orbit::Distinct { a: 0.09291624935697182, b: 0.336861459796345, w: 0.07714302157412137 },
        Orbit::Distinct { a: 0.001268330932872025, b: 0.11897449769695685, w: 0.010020457677001344 },
    ]),
    (15, &[
        Orbit::Centroid { w: 0.08867077476436815 },
        Orbit::Repeated { a: 0.4053622141339755, w: 0.08542756314292113 },
        Orbit::Repeated { a: 0.07017355289998602, w: 0.032889475125250325 },
        Orbit::Repeated { a: 0.47417068143801977, w: 0.03479229600152683 },
        Orbit::Repeated { a: 0.2263787134203496, w: 0.09356672345741926 },
        Orbit::Repeated { a: 0.4949969567691262, w: 0.01914769236492017 },
        Orbit::Repeated { a: 0.015811726250988645, w: 0.005921549275810751 },
        Orbit::Distinct { a: 0.01837611238568109, b: 0.3146482428124508, w: 0.03120514566115193 },
        Orbit::Distinct { a: 0.009139237037308396, b: 0.07094860523645553, w: 0.008059706744036199 },
        Orbit::Distinct { a: 0.09424205359215536, b: 0.19053558947639393, w: 0.057441173850402684 },
        Orbit::Distinct { a: 0.018638713728166376, b: 0.16806864522241435, w: 0.02334524236315169 },
        Orbit::Distinct { a: 0.09579672364760859, b: 0.33895061147527716, w: 0.06263095256993857 },
    ]),
    (17, &[
        Orbit::Repeated { a: 0.4171034443615992, w: 0.05462185305620421 },
        Orbit::Repeated { a: 0.014755491660753954, w: 0.005547775155275284 },
        Orbit::Repeated { a: 0.4655978716188903, w: 0.05003890190099471 },
        Orbit::Repeated { a: 0.18035811626637063, w: 0.05262526117603597 },
        Orbit::Repeated { a: 0.06665406347959693, w: 0.024918001604610884 },
        Orbit::Repeated { a: 0.28570650243658663, w: 0.07543247430559057 },
        Orbit::Distinct { a: 0.0160176423621193, b: 0.15919228747279268, w: 0.015956600411859187 },
        Orbit::Distinct { a: 0.0673493778673612, b: 0.3062815917461865, w: 0.044975545093382134 },
        Orbit::Distinct { a: 0.013229672760086894, b: 0.41547545929522905, w: 0.020796879911679073 },
        Orbit::Distinct { a: 0.07804234056828242, b: 0.16872251349525946, w: 0.04111579664090904 },
        Orbit::Distinct { a: 0.013135870834002694, b: 0.2717918700553548, w: 0.017384429002002384 },
        Orbit::Distinct { a: 0.011575175903180615, b: 0.07250547079900242, w: 0.009168696803471734 },
        Orbit::Distinct { a: 0.1575054779268699, b: 0.29921894247697034, w: 0.05234325187067398 },
    ]),
    (18, &[
        Orbit::Centroid { w: 0.07271147060285334 },
        Orbit::Repeated { a: 0.39995562806757623, w: 0.06660894006678027 },
        Orbit::Repeated { a: 0.48758030157486953, w: 0.024093295267999422 },
        Orbit::Repeated { a: 0.46180950640644924, w: 0.03789834301355773 },
        Orbit::Repeated { a: 0.24226470251427196, w: 0.07295017881788728 },
        Orbit::Repeated { a: 0.038830256088685594, w: 0.014258652039437941 },
        Orbit::Repeated { a: 0.0919477421216432, w: 0.033118319904006495 },
        Orbit::Distinct { a: 0.04580491585986078, b: 0.183822707925464, w: 0.02751923246988441 },
        Orbit::Distinct { a: 0.12269675737192755, b: 0.20634925743383795, w: 0.04756382180030566 },
        Orbit::Distinct { a: 0.0038976110334733825, b: 0.3956834343322697, w: 0.00906106900451413 },
        Orbit::Distinct { a: 0.013462016741444989, b: 0.10819579379103329, w: 0.013680220239214363 },
        Orbit::Distinct { a: 0.040260283469908065, b: 0.31975162452537736, w: 0.03549497820404081 },
        Orbit::Distinct { a: 0.005298335186609765, b: 0.23577218495819174, w: 0.010021321749159444 },
        Orbit::Distinct { a: 0.000548360042042319, b: 0.027090910995162015, w: 0.0024458962539221796 },
        Orbit::Distinct { a: 0.12058769516392465, b: 0.33349352944988075, w: 0.05096435062364888 },
    ]),
    (19, &[
        Orbit::Centroid { w: 0.06893879540802467 },
        Orbit::Repeated { a: 0.05252389035120897, w: 0.014218513195596262 },
        Orbit::Repeated { a: 0.4925126750413369, w: 0.020643510285888563 },
        Orbit::Repeated { a: 0.11144887332302138, w: 0.0304687021860366 },
        Orbit::Repeated { a: 0.45919420103954367, w: 0.045967180053483214 },
        Orbit::Repeated { a: 0.4039697225519012, w: 0.06307506978630995 },
        Orbit::Repeated { a: 0.17817010478176432, w: 0.04930382969638171 },
        Orbit::Repeated { a: 0.011639461183789447, w: 0.0035306455528856953 },
        Orbit::Repeated { a: 0.2551616329136077, w: 0.06350603873200615 },
        Orbit::Distinct { a: 0.03914585933169222, b: 0.13069767626803241, w: 0.019390968973710093 },
        Orbit::Distinct { a: 0.12931256447015782, b: 0.31131762980954125, w: 0.052692643954781467 },
        Orbit::Distinct { a: 0.0020689258966048074, b: 0.36461778097461106, w: 0.006564153103671639 },
        Orbit::Distinct { a: 0.07456029460162668, b: 0.22143488543233122, w: 0.0362158898624249 },
        Orbit::Distinct { a: 0.005007288257354491, b: 0.1424257573657563, w: 0.005852630206940401 },
        Orbit::Distinct { a: 0.04088801119601688, b: 0.35402800973527515, w: 0.032204325528048215 },
        Orbit::Distinct { a: 0.014924052081984072, b: 0.24189457896057956, w: 0.016911774999072992 },
        Orbit::Distinct { a: 0.009776025800888155, b: 0.0600862753223067, w: 0.006654402725718776 },
    ]),
    (20, &[
        Orbit::Centroid { w: 0.055640442805812464 },
        Orbit::Repeated { a: 0.2545792676733391, w: 0.05633280523008099 },
        Orbit::Repeated { a: 0.010976141028397763, w: 0.0031953631642664794 },
        Orbit::Repeated { a: 0.1093835967117146, w: 0.03132092310429813 },
        Orbit::Repeated { a: 0.18629499774454095, w: 0.03669385189701166 },
        Orbit::Repeated { a: 0.44555105695592484, w: 0.03780959973292979 },
        Orbit::Repeated { a: 0.037310880598884696, w: 0.00864510164266231 },
        Orbit::Repeated { a: 0.39342534781709987, w: 0.055152202516281834 },
        Orbit::Repeated { a: 0.476245611540499, w: 0.028407301213633763 },
        Orbit::Distinct { a: 0.0075707805046965285, b: 0.15913370765706722, w: 0.00881158967423399 },
        Orbit::Distinct { a: 0.04656036490766432, b: 0.19851813222878817, w: 0.02394559431581876 },
        Orbit::Distinct { a: 0.0048549376076237535, b: 0.06409058560843406, w: 0.004519478408503462 },
        Orbit::Distinct { a: 0.05498747914298681, b: 0.3331348173095875, w: 0.03466890226887733 },
        Orbit::Distinct { a: 0.03836368477537459, b: 0.09995229628813866, w: 0.01658284611045543 },
        Orbit::Distinct { a: 0.10622720472027004, b: 0.2156070573900944, w: 0.03089043128839692 },
        Orbit::Distinct { a: 0.00983154829280256, b: 0.42002375881622406, w: 0.014782726001021191 },
        Orbit::Distinct { a: 0.1398080719917999, b: 0.317860123835772, w: 0.04676698292731095 },
        Orbit::Distinct { a: 0.010737212856011088, b: 0.2805814114236652, w: 0.01431280095383074 },
    ]),
];

/// Symmetric tetrahedron rules with positive weights and all points inside: `(degree, orbits)`.
#[rustfmt::skip]
pub(super) const TETRAHEDRON_RULES: &[(usize, &[Orbit])] = &[
    (1, &[
        Orbit::Centroid { w: 1.3333333333333333 },
    ]),
    (2, &[
        Orbit::Repeated { a: 0.1381966011250105, w: 0.3333333333333333 },
    ]),
    (3, &[
        Orbit::Repeated { a: 0.3281633025163817, w: 0.1816237900494498 },
        Orbit::Repeated { a: 0.10804724989842861, w: 0.15170954328388353 },
    ]),
    (5, &[
        Orbit::Repeated { a: 0.3108859192633006, w: 0.15025056762402114 },
        Orbit::Repeated { a: 0.09273525031089122, w: 0.09799072415514927 },
        Orbit::TwoPairs { a: 0.04550370412564965, w: 0.05672802770277529 },
    ]),
    (6, &[
        Orbit::Repeated { a: 0.04067395853461135, w: 0.013436281407094191 },
        Orbit::Repeated { a: 0.3223378901422755, w: 0.07380957539153964 },
        Orbit::Repeated { a: 0.21460287125915203, w: 0.053230333677556654 },
        Orbit::PairAndTwo { a: 0.06366100187501753, b: 0.2696723314583158, w: 0.06428571428571428 },
    ]),
    (7, &[
        Orbit::Centroid { w: 0.1273137192855078 },
        Orbit::Repeated { a: 0.3157011497782028, w: 0.05643944161328937 },
        Orbit::TwoPairs { a: 0.05048982259839637, w: 0.04252923711047677 },
        Orbit::PairAndTwo { a: 0.18883383102600104, b: 0.047160700360997884, w: 0.04960950763777949 },
        Orbit::PairAndTwo { a: 0.021265472541483248, b: 0.14663881381848495, w: 0.010814361106537789 },
    ]),
    (8, &[
        Orbit::Repeated { a: 0.10795272496221085, w: 0.03523553454454511 },
        Orbit::Repeated { a: 0.18510948778258657, w: 0.06937566341831804 },
        Orbit::Repeated { a: 0.04231654368476728, w: 0.010033674871386932 },
        Orbit::Repeated { a: 0.314181709124039, w: 0.05568504380924653 },
        Orbit::TwoPairs { a: 0.0644086714161698, w: 0.048374573681745095 },
        Orbit::PairAndTwo { a: 0.021433930127130574, b: 0.23966807631943052, w: 0.009542537187792577 },
        Orbit::PairAndTwo { a: 0.20413933387602912, b: 0.007923953945797353, w: 0.020604648201280447 },
    ]),
    (10, &[
        Orbit::Centroid { w: 0.06319969807469432 },
        Orbit::Repeated { a: 0.3122500686951886, w: 0.0359160799896916 },
        Orbit::Repeated { a: 0.11430965385734615, w: 0.013158879622391177 },
        Orbit::PairAndTwo { a: 0.4104307392189655, b: 0.01365249594245796, w: 0.015191841626926975 },
        Orbit::PairAndTwo { a: 0.006138008824790748, b: 0.04473521500521364, w: 0.0004825924591190048 },
        Orbit::PairAndTwo { a: 0.12105018114558942, b: 0.2807092578045408, w: 0.03431964264060809 },
        Orbit::PairAndTwo { a: 0.03277946821644267, b: 0.3401847940871076, w: 0.013514495573007724 },
        Orbit::PairAndTwo { a: 0.03248528156482305, b: 0.13385215221200952, w: 0.008768196369381205 },
        Orbit::PairAndTwo { a: 0.174979342183939, b: 0.02196947015675594, w: 0.01720938106514932 },
    ]),
    (13, &[
        Orbit::Centroid { w: 0.03721309006010304 },
        Orbit::Repeated { a: 0.0183047574861928, w: 0.0008906283547064081 },
        Orbit::Repeated { a: 0.17901508263002278, w: 0.02574306481157203 },
        Orbit::Repeated { a: 0.32961585375444813, w: 0.008929078610076545 },
        Orbit::TwoPairs { a: 0.015741080803952555, w: 0.003382221093281887 },
        Orbit::TwoPairs { a: 0.06230620062271838, w: 0.011419352831570879 },
        Orbit::PairAndTwo { a: 0.016858025081950345, b: 0.24966122768071147, w: 0.0026178110061802497 },
        Orbit::PairAndTwo { a: 0.023525718244859602, b: 0.10234763590487778, w: 0.003369055233725195 },
        Orbit::PairAndTwo { a: 0.06944189504954647, b: 0.15254189508030244, w: 0.007991526682061477 },
        Orbit::PairAndTwo { a: 0.09370052728214766, b: 0.24914221761321528, w: 0.015089871846919106 },
        Orbit::PairAndTwo { a: 0.12588536016404245, b: 0.008123294004249961, w: 0.00429477753768467 },
        Orbit::PairAndTwo { a: 0.21795527054773767, b: 0.028798833628512335, w: 0.014394515271123802 },
        Orbit::PairAndTwo { a: 0.3546634554727839, b: 0.09065817884381445, w: 0.02334901863510714 },
        Orbit::PairAndTwo { a: 0.4166892876570384, b: 0.014566569709145579, w: 0.007702002056102268 },
        Orbit::FourDistinct { a: 0.011242443361469569, b: 0.07794656223180788, c: 0.3041584336763726, w: 0.004973198891326954 },
    ]),
    (15, &[
        Orbit::Centroid { w: 0.008767825136538017 },
        Orbit::Repeated { a: 0.0613445374189439, w: 0.004869233165083913 },
        Orbit::Repeated { a: 0.1566198483112966, w: 0.012772327660837478 },
        Orbit::Repeated { a: 0.2089834169508055, w: 0.01898224329160983 },
        Orbit::Repeated { a: 0.30234142406893816, w: 0.014945986299408588 },
        Orbit::Repeated { a: 0.32918890369404286, w: 0.006401113219776429 },
        Orbit::TwoPairs { a: 0.015429943539614214, w: 0.0025694120986694637 },
        Orbit::TwoPairs { a: 0.13288687427109583, w: 0.01844279451319459 },
        Orbit::PairAndTwo { a: 0.0114254053187452, b: 0.04531412532490483, w: 0.0005396317818722208 },
        Orbit::PairAndTwo { a: 0.01754584383382559, b: 0.2918896064992873, w: 0.0027493212453723343 },
        Orbit::PairAndTwo { a: 0.017678104487353265, b: 0.1438674732633193, w: 0.0020064961015583975 },
        Orbit::PairAndTwo { a: 0.06061894673609964, b: 0.36076783680815944, w: 0.008055861799704677 },
        Orbit::PairAndTwo { a: 0.0795111143787261, b: 0.006918347034501819, w: 0.0016031490345585298 },
        Orbit::PairAndTwo { a: 0.08134840768648532, b: 0.16331986207867416, w: 0.00665406021943234 },
        Orbit::PairAndTwo { a: 0.2261378124791957, b: 0.007925326392389428, w: 0.004939464567829083 },
        Orbit::PairAndTwo { a: 0.24362348103144302, b: 0.08033570926973509, w: 0.00898777472667294 },
        Orbit::PairAndTwo { a: 0.3957624425578794, b: 0.024986661592403602, w: 0.00977402944631118 },
        Orbit::FourDistinct { a: 0.007328172319026643, b: 0.08811928567836942, c: 0.3590810015790217, w: 0.0032643296601142214 },
        Orbit::FourDistinct { a: 0.018357928578734153, b: 0.09291732576240098, c: 0.19566023487770134, w: 0.00524512389874379 },
        Orbit::FourDistinct { a: 0.06117984479620483, b: 0.14715709053659737, c: 0.25761477755976575, w: 0.009111012561933888 },
    ]),
    (16, &[
        Orbit::Centroid { w: 0.020716789083766788 },
        Orbit::Repeated { a: 0.012374723709988798, w: 0.0002911716540226108 },
        Orbit::Repeated { a: 0.060201258857379064, w: 0.002692072470401332 },
        Orbit::Repeated { a: 0.10804377199176118, w: 0.005163435971372841 },
        Orbit::Repeated { a: 0.18891446148467836, w: 0.01875373961041703 },
        Orbit::Repeated { a: 0.29779783058899084, w: 0.01744051294021115 },
        Orbit::Repeated { a: 0.3248305479505549, w: 0.008498377107535133 },
        Orbit::Repeated { a: 0.332449334330004, w: 0.0007824584578323613 },
        Orbit::TwoPairs { a: 0.01575182391403356, w: 0.001574952818872078 },
        Orbit::TwoPairs { a: 0.07246435526822567, w: 0.010410744526915582 },
        Orbit::TwoPairs { a: 0.14936538394898394, w: 0.01520056581669785 },
        Orbit::PairAndTwo { a: 0.012293597305859775, b: 0.1814899309406073, w: 0.001097313816769052 },
        Orbit::PairAndTwo { a: 0.015099678627867319, b: 0.33658686320247055, w: 0.0019455362375498672 },
        Orbit::PairAndTwo { a: 0.016130874014262928, b: 0.07265259480608893, w: 0.001166053773161283 },
        Orbit::PairAndTwo { a: 0.05075881995006513, b: 0.1521382387618881, w: 0.004765678446428553 },
        Orbit::PairAndTwo { a: 0.052560355089244226, b: 0.2894704400626103, w: 0.004861174882174819 },
        Orbit::PairAndTwo { a: 0.08770890402001588, b: 0.006724171267861532, w: 0.001710637095121891 },
        Orbit::PairAndTwo { a: 0.1043880191517784, b: 0.21318247838476204, w: 0.009804632447007428 },
        Orbit::PairAndTwo { a: 0.16034741183314938, b: 0.025547923631537954, w: 0.006982985486983984 },
        Orbit::PairAndTwo { a: 0.23945767694980685, b: 0.00477168011266897, w: 0.003289281924024351 },
        Orbit::PairAndTwo { a: 0.3998815751299476, b: 0.015636610206920944, w: 0.005583872758355365 },
        Orbit::PairAndTwo { a: 0.462084718127788, b: 0.009070081036537926, w: 0.0024667971230787644 },
        Orbit::FourDistinct { a: 0.004901932929944594, b: 0.06686572990250111, c: 0.21570292154644607, w: 0.0015879002829195898 },
        Orbit::FourDistinct { a: 0.015006817140012315, b: 0.1047833026105097, c: 0.31601376932317765, w: 0.004153922483852925 },
        Orbit::FourDistinct { a: 0.06306921447529051, b: 0.18035596984545066, c: 0.2874543292449691, w: 0.01138002408904496 },
    ]),
    (17, &[
        Orbit::Repeated { a: 0.015183403594311784, w: 0.0004528528351494235 },
        Orbit::Repeated { a: 0.07746476064142375, w: 0.0042215085054636645 },
        Orbit::Repeated { a: 0.13150297015049736, w: 0.010366547293270885 },
        Orbit::Repeated { a: 0.2780357307685262, w: 0.013834039120850811 },
        Orbit::Repeated { a: 0.30727962146527965, w: 0.01232363667265406 },
        Orbit::TwoPairs { a: 0.060515060896100904, w: 0.006963379024439538 },
        Orbit::PairAndTwo { a: 0.0014164550316577518, b: 0.30727649930629997, w: 0.0002488006948831629 },
        Orbit::PairAndTwo { a: 0.011165274135254102, b: 0.46751004268745183, w: 0.0006649895539692236 },
        Orbit::PairAndTwo { a: 0.013537912304950387, b: 0.07591917118984523, w: 0.0008097059818300856 },
        Orbit::PairAndTwo { a: 0.015646184165472275, b: 0.17585920864704416, w: 0.0014545996237087342 },
        Orbit::PairAndTwo { a: 0.05335877410411043, b: 0.181372688041693, w: 0.004931686982451692 },
        Orbit::PairAndTwo { a: 0.07416971254690422, b: 0.015509867161441567, w: 0.0023048628936894774 },
        Orbit::PairAndTwo { a: 0.08448398734089928, b: 0.275931475888849, w: 0.008956074466180056 },
        Orbit::PairAndTwo { a: 0.1486742301881034, b: 0.0332263215203804, w: 0.005775353586033017 },
        Orbit::PairAndTwo { a: 0.15621790481707465, b: 0.2695445766360554, w: 0.013981450935560243 },
        Orbit::PairAndTwo { a: 0.19264469971922044, b: 0.07753913730820138, w: 0.005072585594919154 },
        Orbit::PairAndTwo { a: 0.20742450202955304, b: 0.00226750594591623, w: 0.0016448856171356848 },
        Orbit::PairAndTwo { a: 0.23232676188721907, b: 0.06033666325076561, w: 0.007554885740483008 },
        Orbit::PairAndTwo { a: 0.2810926882498174, b: 0.014840294883028515, w: 0.005476821933611089 },
        Orbit::PairAndTwo { a: 0.385776545450869, b: 0.0638091838936867, w: 0.010976824831571839 },
        Orbit::PairAndTwo { a: 0.41236826313734454, b: 0.008185789056597193, w: 0.0031156835867235983 },
        Orbit::PairAndTwo { a: 0.46114733878118896, b: 0.010001621823546112, w: 0.002480791888331502 },
        Orbit::FourDistinct { a: 0.0034268636433943847, b: 0.07834694603819169, c: 0.1857382712268353, w: 0.0014504911830783332 },
        Orbit::FourDistinct { a: 0.013381969334753555, b: 0.04487498924768625, c: 0.3208551693232658, w: 0.0025543440743643095 },
        Orbit::FourDistinct { a: 0.01978622972186529, b: 0.12855964238665127, c: 0.2953970184679329, w: 0.005218442848564105 },
    ]),
    (18, &[
        Orbit::Repeated { a: 0.009616860578859037, w: 0.00014392047880870492 },
        Orbit::Repeated { a: 0.05129363143513755, w: 0.002068398400965442 },
        Orbit::Repeated { a: 0.10338833389264504, w: 0.006668507779911104 },
        Orbit::Repeated { a: 0.16664458270546895, w: 0.010514196003600457 },
        Orbit::Repeated { a: 0.2264167194128488, w: 0.008107109568695665 },
        Orbit::Repeated { a: 0.3079651341962894, w: 0.006115405566149526 },
        Orbit::Repeated { a: 0.3282162426504544, w: 0.005548230092759046 },
        Orbit::TwoPairs { a: 0.015203739113624526, w: 0.0018212076240284492 },
        Orbit::TwoPairs { a: 0.16091080635726382, w: 0.009187577117580038 },
        Orbit::PairAndTwo { a: 0.007718504241650767, b: 0.3377980266110293, w: 0.000577532813619307 },
        Orbit::PairAndTwo { a: 0.008952344933562235, b: 0.16846141420098387, w: 0.0006458287401962107 },
        Orbit::PairAndTwo { a: 0.013461017876039597, b: 0.059320252372415914, w: 0.0006901933901057788 },
        Orbit::PairAndTwo { a: 0.021921539855344768, b: 0.2776746151281192, w: 0.0013140935497732485 },
        Orbit::PairAndTwo { a: 0.040119714340028756, b: 0.12717625625457296, w: 0.002665304181974112 },
        Orbit::PairAndTwo { a: 0.04561724108066423, b: 0.3548753691214385, w: 0.004026474377010632 },
        Orbit::PairAndTwo { a: 0.07009770920161433, b: 0.2184266288540285, w: 0.00608038010275035 },
        Orbit::PairAndTwo { a: 0.10780794177618389, b: 0.30934999575204974, w: 0.010345205249341908 },
        Orbit::PairAndTwo { a: 0.12601083407498276, b: 0.024173159641378467, w: 0.003963070926360041 },
        Orbit::PairAndTwo { a: 0.17840684977461002, b: 0.0013614241886503408, w: 0.0011663488862517556 },
        Orbit::PairAndTwo { a: 0.18145583679578603, b: 0.07024695484715375, w: 0.008612006226282679 },
        Orbit::PairAndTwo { a: 0.2439431484762388, b: 0.12019064404963181, w: 0.010084573448095078 },
        Orbit::PairAndTwo { a: 0.2547036978289152, b: 0.011036505964394597, w: 0.0032429058015748125 },
        Orbit::PairAndTwo { a: 0.4320114453302278, b: 0.03409884329596881, w: 0.005559055442008985 },
        Orbit::FourDistinct { a: 0.002317998523740097, b: 0.05578295939077449, c: 0.10000288643382717, w: 0.0005727993191276301 },
        Orbit::FourDistinct { a: 0.00344940960087309, b: 0.17738824795795938, c: 0.37330588852574603, w: 0.0013409006058031623 },
        Orbit::FourDistinct { a: 0.00396832261741354, b: 0.06715767454790163, c: 0.376087919669856, w: 0.0015026912103607687 },
        Orbit::FourDistinct { a: 0.008803415766310002, b: 0.06182093748671576, c: 0.21694027398959587, w: 0.0018142325207084814 },
        Orbit::FourDistinct { a: 0.02106995794528151, b: 0.1324718782149084, c: 0.27031565862426493, w: 0.00471805117100489 },
        Orbit::FourDistinct { a: 0.04996751250428648, b: 0.19854637621894866, c: 0.31894274996952043, w: 0.006840569993661062 },
    ]),
];
