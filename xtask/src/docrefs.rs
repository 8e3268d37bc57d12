//! Keeps the docs honest where that is cheap: every repository path the docs name in
//! backticks (`crates/x/src/y.rs`, optionally `::item` or `:line`) and every relative
//! Markdown link must exist, and a named item must be defined in that file
//! (`fn`, `struct`, `enum`, `trait`, `mod`, `const`, `static`, `type` or a test).
//!
//! Runs as a unit test (`cargo test -p xtask`), so every CI run checks it.

use std::fs;
use std::path::{Path, PathBuf};

/// Top-level folders (and files) a backticked path may start with.
const ROOTS: [&str; 9] = [
    "crates/",
    "docs/",
    "benches/",
    "fuzz/",
    "xtask/",
    "proto/",
    ".ci/",
    "README.md",
    "Cargo.toml",
];

/// One reference found in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ref {
    /// The document and line it appears on.
    doc: String,
    line: usize,
    /// The path, relative to the repository root.
    path: PathBuf,
    /// `::a::b` items after the path (the last one is looked up).
    items: Vec<String>,
    /// A `:N` or `:N-M` line reference (its first line).
    at_line: Option<usize>,
}

/// The repository root (the parent of `xtask/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Splits `crates/a/src/b.rs::item::sub:12-20` into its parts; `None` if it is not a
/// repository path.
fn parse_token(token: &str) -> Option<(String, Vec<String>, Option<usize>)> {
    if !ROOTS.iter().any(|r| token.starts_with(r)) || token.contains(' ') {
        return None;
    }
    let (rest, at_line) = match token.rsplit_once(':') {
        Some((head, tail))
            if !head.ends_with(':')
                && !tail.is_empty()
                && tail
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '-' || c == ',') =>
        {
            let first = tail.split(['-', ',']).next().and_then(|n| n.parse().ok());
            (head, first)
        }
        _ => (token, None),
    };
    let mut parts = rest.split("::");
    let path = parts.next()?.trim_end_matches('/').to_owned();
    let items = parts.map(str::to_owned).collect();
    Some((path, items, at_line))
}

/// Every reference in `doc` (its text `text`), relative links resolved against `dir`.
fn refs_in(doc: &str, dir: &Path, text: &str) -> Vec<Ref> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Backticked tokens: every second piece between backticks.
        for token in line.split('`').skip(1).step_by(2) {
            if let Some((path, items, at_line)) = parse_token(token) {
                out.push(Ref {
                    doc: doc.to_owned(),
                    line: i + 1,
                    path: PathBuf::from(path),
                    items,
                    at_line,
                });
            }
        }
        // Relative Markdown links: `](target)`.
        for piece in line.split("](").skip(1) {
            let Some(target) = piece.split(')').next() else {
                continue;
            };
            let target = target.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            out.push(Ref {
                doc: doc.to_owned(),
                line: i + 1,
                path: dir.join(target),
                items: Vec::new(),
                at_line: None,
            });
        }
    }
    out
}

/// Whether `source` defines `item` (a Rust item or a test of that name; for other
/// files, whether the word appears).
fn defines(source: &str, file: &Path, item: &str) -> bool {
    let rust = file.extension().is_some_and(|e| e == "rs");
    if !rust {
        return source.contains(item);
    }
    [
        "fn ",
        "struct ",
        "enum ",
        "trait ",
        "mod ",
        "const ",
        "static ",
        "type ",
        "macro_rules! ",
    ]
    .iter()
    .any(|kw| {
        source.match_indices(&format!("{kw}{item}")).any(|(at, m)| {
            source[at + m.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
    })
}

/// The problems with the references of every Markdown file under `docs/` and the
/// README.
fn problems(root: &Path) -> Vec<String> {
    let mut docs: Vec<PathBuf> = vec![root.join("README.md")];
    if let Ok(entries) = fs::read_dir(root.join("docs")) {
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                docs.push(e.path());
            }
        }
    }
    docs.sort();
    let mut out = Vec::new();
    for doc in docs {
        let Ok(text) = fs::read_to_string(&doc) else {
            continue;
        };
        let name = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
        let dir = doc.parent().unwrap_or(root).to_path_buf();
        for r in refs_in(&name, &dir, &text) {
            let file = root.join(&r.path);
            let file = if r.path.is_absolute() {
                r.path.clone()
            } else {
                file
            };
            let here = format!("{}:{}", r.doc, r.line);
            if !file.exists() {
                out.push(format!("{here}: {} does not exist", r.path.display()));
                continue;
            }
            if file.is_dir() {
                continue;
            }
            let source = fs::read_to_string(&file).unwrap_or_default();
            if let Some(item) = r.items.last()
                && !defines(&source, &file, item)
            {
                out.push(format!(
                    "{here}: {} does not define `{item}`",
                    r.path.display()
                ));
            }
            if let Some(n) = r.at_line
                && source.lines().count() < n
            {
                out.push(format!("{here}: {} has no line {n}", r.path.display()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_into_path_items_and_line() {
        assert_eq!(
            parse_token("crates/gc/src/reclaim.rs::Reclaimer::run_once:12-20"),
            Some((
                "crates/gc/src/reclaim.rs".to_owned(),
                vec!["Reclaimer".to_owned(), "run_once".to_owned()],
                Some(12)
            ))
        );
        assert_eq!(parse_token("gc/boundary"), None, "a store key, not a path");
        assert_eq!(parse_token("cargo xtask ci"), None);
    }

    #[test]
    fn the_check_catches_a_missing_file_and_a_missing_function() {
        let root = root();
        let text = "see `crates/gc/src/reclaim.rs::no_such_fn` and `crates/nope.rs` and \
                    `crates/gc/src/reclaim.rs::run_once`, [x](architecture.md), [y](gone.md)";
        let refs = refs_in("t.md", &root.join("docs"), text);
        assert_eq!(refs.len(), 5);
        let bad: Vec<&Ref> = refs
            .iter()
            .filter(|r| {
                let f = root.join(&r.path);
                !f.exists()
                    || r.items.last().is_some_and(|i| {
                        !defines(&fs::read_to_string(&f).unwrap_or_default(), &f, i)
                    })
            })
            .collect();
        assert_eq!(bad.len(), 3, "{bad:?}");
    }

    #[test]
    fn docs_name_only_things_that_exist() {
        let p = problems(&root());
        assert!(
            p.is_empty(),
            "the docs name {} thing(s) that do not exist:\n{}",
            p.len(),
            p.join("\n")
        );
    }
}
