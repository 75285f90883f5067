//! The docs stand alone: no Markdown file in the repository links outside it, and every
//! relative link points at a file or directory that exists.

use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Every `*.md` under `dir`, skipping build outputs, installed packages and hidden
/// directories (none of them is the project's documentation).
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => markdown_files(&path, out),
            Ok(t) if t.is_file() && name.ends_with(".md") => out.push(path),
            _ => {}
        }
    }
}

/// Link targets in Markdown text: inline `[text](target)` and reference definitions
/// `[label]: target`, outside fenced code blocks and inline code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans, whose brackets are not links.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        if let Some(rest) = plain.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]:")
            && let Some(t) = target.split_whitespace().next()
        {
            found.push((n + 1, t.trim_matches(['<', '>']).to_string()));
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((n + 1, target.trim_matches(['<', '>']).to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// What is wrong with one link of `file`, if anything.
fn check_link(root: &Path, file: &Path, target: &str) -> Option<String> {
    let external = ["http://", "https://", "mailto:"];
    if target.is_empty()
        || target.starts_with('#')
        || external.iter().any(|p| target.starts_with(p))
    {
        return None;
    }
    if target.contains("://") {
        return Some("a URL scheme other than http(s)".into());
    }
    let path = target.split(['#', '?']).next().unwrap_or("");
    if path.starts_with('/') {
        return Some("an absolute path (outside the repository)".into());
    }
    // Lexical resolution: `..` above the root leaves the repository even when the
    // target happens to exist on this machine.
    let mut resolved = file.parent().unwrap_or(root).to_path_buf();
    for c in Path::new(path).components() {
        match c {
            Component::ParentDir => {
                let popped = resolved.pop();
                if !popped || !resolved.starts_with(root) {
                    return Some("it leaves the repository".into());
                }
            }
            Component::Normal(p) => resolved.push(p),
            _ => {}
        }
    }
    if !resolved.starts_with(root) {
        return Some("it leaves the repository".into());
    }
    if !resolved.exists() {
        return Some(format!("{} does not exist", resolved.display()));
    }
    None
}

#[test]
fn no_doc_links_outside_the_repository_or_to_missing_files() {
    let root = root();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")),
        "no Markdown found under {}",
        root.display()
    );
    let mut bad = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a Markdown file");
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(why) = check_link(&root, file, &target) {
                let rel = file.strip_prefix(&root).unwrap_or(file);
                bad.push(format!("{}:{line}: {target}: {why}", rel.display()));
            }
        }
    }
    assert!(checked > 0, "no links found: the link parser is broken");
    assert!(bad.is_empty(), "bad doc links:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_catches_escaping_and_missing_links() {
    let root = root();
    let readme = root.join("README.md");
    let text = "see [design](../shared/DESIGN.md), [tc][t], [ok](host/README.md#x), \
                [gone](host/NOPE.md) and `[code](../x)`\n\n[t]: ../../shared/TOOLCHAINS.md\n\
                ```\n[fenced](../y)\n```\n";
    let found = links(text);
    let targets: Vec<&str> = found.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        targets,
        [
            "../shared/DESIGN.md",
            "host/README.md#x",
            "host/NOPE.md",
            "../../shared/TOOLCHAINS.md"
        ]
    );
    let verdicts: Vec<bool> = targets
        .iter()
        .map(|t| check_link(&root, &readme, t).is_some())
        .collect();
    assert_eq!(verdicts, [true, false, true, true]);
    assert!(check_link(&root, &readme, "https://kubernetes.io").is_none());
    assert!(check_link(&root, &readme, "/etc/passwd").is_some());
    // Down and back up stays inside; further up does not.
    assert!(check_link(&root, &readme, "host/../README.md").is_none());
    assert!(check_link(&root, &readme, "host/../../README.md").is_some());
}
