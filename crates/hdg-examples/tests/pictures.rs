//! The program's pictures and files: the convergence plot's tick labels and rates read back
//! from the SVG's text, and every output refused with one `hdg: error:` line (exit status 2)
//! when its file name has another format's extension, from options and from problem files.
use std::path::{Path, PathBuf};
use std::process::Command;

fn hdg(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hdg")).args(args).output().expect("runs hdg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A folder of this test's own under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pictures").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The contents of the SVG's `<text>` elements, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// The significant digits of a number label ("0.0625" has 3, "2.5e-5" 2), or None for text
/// that is not a number.
fn significant_digits(label: &str) -> Option<usize> {
    label.parse::<f64>().ok()?;
    let mantissa = label.split(['e', 'E']).next().unwrap_or(label);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let trimmed = digits.trim_start_matches('0');
    let trimmed = if mantissa.contains('.') { trimmed } else { trimmed.trim_end_matches('0') };
    Some(trimmed.len().max(1))
}

/// `hdg convergence --plot`: every level's h is a tick labelled 1/N; no tick label carries
/// binary noise (more than four significant digits); the legend's rate of each series is the
/// one the table prints for the finest pair, says so, and the caption says what the fit is.
#[test]
fn the_convergence_plot_labels_every_h_and_states_the_tables_rates() {
    let path = scratch("convergence").join("rates.svg");
    let file = path.to_str().unwrap();
    let args = ["convergence", "--order", "1", "--levels", "4", "--start", "2", "--json"];
    let (code, out, err) = hdg(&[&args[..], &["--plot", file]].concat());
    assert_eq!(code, 0, "{err}");
    let table: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let svg = std::fs::read_to_string(&path).expect("the plot is written");
    let texts = texts(&svg);
    for n in [2, 4, 8, 16] {
        assert!(texts.iter().any(|t| *t == format!("1/{n}")), "no tick 1/{n}: {texts:?}");
    }
    let numbers: Vec<_> = texts.iter().filter_map(|t| Some((t, significant_digits(t)?))).collect();
    assert!(numbers.len() >= 3, "the error axis has number labels: {texts:?}");
    for (label, digits) in numbers {
        assert!(digits <= 4, "tick label {label:?} has {digits} significant digits");
    }
    let last = &table[3]["rates"];
    for (name, key) in [("u", "u"), ("q", "q"), ("u*", "u_star")] {
        let printed = format!("{:.2}", last[key].as_f64().unwrap());
        let legend = format!("{name}: rate {printed} (finest pair)");
        assert!(texts.iter().any(|t| t.starts_with(&legend)), "no {legend:?} in {texts:?}");
    }
    assert!(
        texts.iter().any(|t| t.starts_with("fit: least-squares slope over all 4 meshes")),
        "{texts:?}"
    );
}

/// An error of the program: exit status 2 and one `hdg: error:` line holding `needles`.
fn assert_refused(args: &[&str], needles: &[&str]) {
    let (code, _, err) = hdg(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("hdg: error:")).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    for needle in needles {
        assert!(lines[0].contains(needle), "{args:?}: {needle:?} not in {:?}", lines[0]);
    }
}

/// A picture named .svg, a solution named .vtk, a matrix named .txt and a convergence plot
/// named .png are refused naming the file and the extension to use, before anything is solved
/// (on a problem far too large for the host, whose refusal would otherwise come first), and
/// nothing is written; the right names still work.
#[test]
fn outputs_with_another_formats_extension_are_refused() {
    let dir = scratch("extensions");
    let at = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let too_large = ["solve", "--mesh", "square:100000", "--order", "8"];
    assert_refused(&[&too_large[..], &["--plot", &at("u.svg")]].concat(), &["u.svg", ".png"]);
    assert_refused(&[&too_large[..], &["--output", &at("u.vtk")]].concat(), &["u.vtk", ".vtu"]);
    assert_refused(
        &[&too_large[..], &["--export-matrix", &at("a.txt")]].concat(),
        &["a.txt", ".mtx"],
    );
    let convergence = ["convergence", "--order", "8", "--levels", "2", "--start", "100000"];
    assert_refused(&[&convergence[..], &["--plot", &at("r.png")]].concat(), &["r.png", ".svg"]);
    for name in ["u.svg", "u.vtk", "a.txt", "r.png"] {
        assert!(!dir.join(name).exists(), "{name} was written");
    }

    let solve = ["solve", "--mesh", "square:2", "--order", "1"];
    let names = [at("u.png"), at("u.vtu"), at("a.mtx")];
    let args = ["--plot", &names[0], "--output", &names[1], "--export-matrix", &names[2]];
    let (code, _, err) = hdg(&[&solve[..], &args[..]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(&std::fs::read(&names[0]).unwrap()[..4], b"\x89PNG");
    assert!(std::fs::read_to_string(&names[1]).unwrap().contains("<VTKFile"));
    assert!(std::fs::read_to_string(&names[2]).unwrap().starts_with("%%MatrixMarket"));
}

/// A problem file's outputs are checked the same way.
#[test]
fn problem_file_outputs_with_another_formats_extension_are_refused() {
    let dir = scratch("problem-file");
    for (output, needles) in
        [("png = \"u.svg\"", ["u.svg", ".png"]), ("vtu = \"u.vtk\"", ["u.vtk", ".vtu"])]
    {
        let path = dir.join("p.toml");
        let text = format!(
            "[mesh]\ngenerate = \"square:100000\"\n[discretization]\norder = 8\n[output]\n{output}\n"
        );
        std::fs::write(&path, text).unwrap();
        assert_refused(&["run", path.to_str().unwrap()], &needles);
    }
    assert!(!dir.join("u.svg").exists() && !dir.join("u.vtk").exists());
}
