//! The docs stand alone: no Markdown file in the repository links outside it, every
//! relative link points at a file or directory that exists (and at a heading of it, when
//! the link names one), and the binary's reference page (`host/cli/README.md`) says what
//! the binary does: every command and flag its `--help` lists, no flag it lacks, and
//! exactly the metrics the host serves.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use support::{Env, HostProcess, field};

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
    if target.is_empty() || external.iter().any(|p| target.starts_with(p)) {
        return None;
    }
    if let Some(anchor) = target.strip_prefix('#') {
        return check_anchor(file, anchor);
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
    match target.split_once('#') {
        Some((_, anchor)) if resolved.extension().is_some_and(|e| e == "md") => {
            check_anchor(&resolved, anchor)
        }
        _ => None,
    }
}

/// What is wrong with a link to heading `anchor` of Markdown file `file`, if anything.
fn check_anchor(file: &Path, anchor: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    if anchors(&text).contains(anchor) {
        None
    } else {
        Some(format!("{} has no heading #{anchor}", file.display()))
    }
}

/// The anchors of a Markdown text's headings, as GitHub makes them: lowercase, spaces to
/// hyphens, punctuation but `-` and `_` dropped, `-1`, `-2`... on repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeMap::<String, usize>::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        let Some(title) = heading(line).filter(|_| !fenced) else {
            continue;
        };
        let slug = slug(title);
        let n = seen.entry(slug.clone()).or_default();
        out.insert(if *n == 0 { slug } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

/// The title of an ATX heading line (`## Title`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    let title = line[hashes..].strip_prefix(' ')?;
    (1..=6).contains(&hashes).then(|| title.trim())
}

fn slug(title: &str) -> String {
    // A link in a heading counts by its text: drop each `(target)` after a `]`.
    let mut plain = String::new();
    let mut rest = title;
    while let Some(i) = rest.find("](") {
        plain.push_str(&rest[..i]);
        rest = rest[i..].find(')').map_or("", |end| &rest[i + end + 1..]);
    }
    plain.push_str(rest);
    plain
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
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
    let text = "see [design](../shared/DESIGN.md), [tc][t], [ok](host/README.md#the-sandbox), \
                [gone](host/NOPE.md) and `[code](../x)`\n\n[t]: ../../shared/TOOLCHAINS.md\n\
                ```\n[fenced](../y)\n```\n";
    let found = links(text);
    let targets: Vec<&str> = found.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        targets,
        [
            "../shared/DESIGN.md",
            "host/README.md#the-sandbox",
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
    // A heading that is not there, in another file or in this one.
    assert!(check_link(&root, &readme, "host/README.md#no-such-heading").is_some());
    assert!(check_link(&root, &readme, "#no-such-heading").is_some());
    assert!(check_link(&root, &readme, "#the-demo").is_none());
}

#[test]
fn anchors_are_githubs() {
    let text = "# The `kubewasm` command: flags\n## Plugin objects: how the host serves them\n\
                ```\n## not a heading\n```\n## Sharding\n## Sharding\n\
                ## See [the sandbox](host/README.md)\n#nothing\n";
    let found: Vec<String> = anchors(text).into_iter().collect();
    assert_eq!(
        found,
        [
            "plugin-objects-how-the-host-serves-them",
            "see-the-sandbox",
            "sharding",
            "sharding-1",
            "the-kubewasm-command-flags",
        ]
    );
}

/// The reference page of the `kubewasm` binary.
const REFERENCE: &str = "host/cli/README.md";

/// `kubewasm ARGS... --help`'s text.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run kubewasm --help");
    assert!(out.status.success(), "kubewasm {args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The long flags a `--help` text defines: its option lines (`  -f, --filename <PATH>`,
/// `      --plugins <DIR>`), not the descriptions under them, which are indented further
/// and mention other commands' flags.
fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter(|l| {
            let indent = l.len() - l.trim_start().len();
            (1..=6).contains(&indent) && l.trim_start().starts_with('-')
        })
        .flat_map(flag_tokens)
        .collect()
}

/// The subcommands `kubewasm --help` lists (hidden ones are not listed, nor `help`).
fn subcommands(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The `--long-flag` tokens of a text (a lone `--` and `---` are not flags).
fn flag_tokens(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("--") {
        let before = text.len() - rest.len() + i;
        let after = &rest[i + 2..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let boundary = text[..before]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'));
        if boundary && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            found.push(format!("--{name}"));
        }
        rest = &after[name.len()..];
    }
    found
}

/// Inline code spans of a line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// One flag-table row of the reference page: the flags its first cell defines, for which
/// commands (`""`: the top-level `kubewasm`), and where.
struct Row {
    line: usize,
    flags: Vec<String>,
    commands: BTreeSet<String>,
}

/// The commands a heading or a table cell names: `kubewasm X` spans in a heading,
/// and bare command names (`approve`) in a cell that narrows a table or a row.
fn named_commands(text: &str, known: &[String], bare: bool) -> BTreeSet<String> {
    code_spans(text)
        .into_iter()
        .filter_map(|span| match span.strip_prefix("kubewasm") {
            Some("") if !bare => Some(String::new()),
            Some(rest) if !bare => {
                let cmd = rest.strip_prefix(' ')?;
                known.iter().find(|k| *k == cmd).cloned()
            }
            _ if bare => known.iter().find(|k| *k == span).cloned(),
            _ => None,
        })
        .collect()
}

/// The flag rows of the reference page. A `##` heading names the commands of its tables;
/// a `###` heading naming commands narrows them; a table whose header, or a row whose
/// first cell, names commands (`(`approve`)`) narrows them further.
fn reference_rows(text: &str, known: &[String]) -> Vec<Row> {
    let (mut section, mut sub, mut table) = (BTreeSet::new(), None, None);
    let mut in_table = false;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(h) = line.strip_prefix("## ") {
            section = named_commands(h, known, false);
            sub = None;
        } else if let Some(h) = line.strip_prefix("### ") {
            let named = named_commands(h, known, false);
            sub = (!named.is_empty()).then_some(named);
        }
        let Some(cells) = line.strip_prefix('|') else {
            in_table = false;
            continue;
        };
        let first = cells.split(" | ").next().unwrap_or("");
        if !in_table {
            // The header row.
            in_table = true;
            let named = named_commands(first, known, true);
            table = (!named.is_empty()).then_some(named);
            continue;
        }
        let flags: Vec<String> = code_spans(first)
            .into_iter()
            .flat_map(flag_tokens)
            .collect();
        if flags.is_empty() {
            continue;
        }
        let named = named_commands(first, known, true);
        let commands = if !named.is_empty() {
            named
        } else {
            table.clone().or(sub.clone()).unwrap_or(section.clone())
        };
        rows.push(Row {
            line: n + 1,
            flags,
            commands,
        });
    }
    rows
}

#[test]
fn the_reference_page_lists_every_command_and_flag_and_no_other() {
    let text = std::fs::read_to_string(root().join(REFERENCE)).expect("the reference page");
    let top = help(&[]);
    let mut commands = subcommands(&top);
    assert!(
        commands.len() >= 10 && commands.iter().any(|c| c == "run"),
        "the command list of `kubewasm --help` did not parse: {commands:?}"
    );
    // A command group's own commands (`preview report`) are commands of the page too.
    for c in commands.clone() {
        commands.extend(
            subcommands(&help(&[&c]))
                .into_iter()
                .map(|sub| format!("{c} {sub}")),
        );
    }
    let global = help_flags(&top);
    assert!(global.contains("--log-format"), "{global:?}");
    let mut flags: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    flags.insert(String::new(), global.clone());
    for c in &commands {
        let args: Vec<&str> = c.split(' ').collect();
        let own = help_flags(&help(&args));
        assert!(
            own.contains("--help"),
            "`kubewasm {c} --help` did not parse"
        );
        flags.insert(c.clone(), own.difference(&global).cloned().collect());
    }
    let every: BTreeSet<&String> = flags.values().flatten().collect();
    let mut wrong = Vec::new();
    for c in &commands {
        if !text.contains(&format!("`kubewasm {c}")) {
            wrong.push(format!("command `kubewasm {c}` is not on the page"));
        }
    }
    let rows = reference_rows(&text, &commands);
    assert!(
        rows.len() > 50,
        "the flag tables did not parse: {} rows",
        rows.len()
    );
    // Every flag a row defines exists in each command the row is for.
    for row in &rows {
        assert!(
            !row.commands.is_empty(),
            "line {}: a row for no command",
            row.line
        );
        for flag in &row.flags {
            for c in &row.commands {
                if !flags[c].contains(flag) {
                    wrong.push(format!("line {}: `kubewasm {c}` has no {flag}", row.line));
                }
            }
        }
    }
    // Every flag of every command is defined in a row for that command.
    for (c, own) in &flags {
        for flag in own {
            let documented = rows
                .iter()
                .any(|r| r.commands.contains(c) && r.flags.contains(flag));
            if !documented {
                wrong.push(format!("`kubewasm {c}` {flag} is in no row for it"));
            }
        }
    }
    // No flag mentioned anywhere on the page is one the binary lacks.
    for (n, line) in text.lines().enumerate() {
        for flag in flag_tokens(line) {
            if !every.contains(&flag) {
                wrong.push(format!("line {}: {flag} is no flag of kubewasm", n + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{REFERENCE} and the binary disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_help_parsers_find_flags_and_commands() {
    let help = "Commands:\n  run   Run it\n  help  Print this\n\nOptions:\n  -f, --filename <PATH>\n\
                \x20         Files (see `kubewasm run --approvals`)\n      --no-reload\n";
    assert_eq!(subcommands(help), ["run"]);
    let found: Vec<String> = help_flags(help).into_iter().collect();
    assert_eq!(found, ["--filename", "--no-reload"]);
    assert_eq!(
        flag_tokens("`--a-b X` / `--c`, not a--b, `--` or ---"),
        ["--a-b", "--c"]
    );
    let known = ["run".to_string(), "dev".into(), "approve".into()];
    let page = "## `kubewasm run` and `kubewasm dev`\n\n| flag | d |\n| --- | --- |\n\
                | `--plugins DIR` | x |\n| `--module REF` (`approve`) | y |\n\n\
                ### `kubewasm dev` only\n\n| flag | d |\n| --- | --- |\n| `--port N` | z |\n";
    let rows = reference_rows(page, &known);
    let got: Vec<(Vec<String>, Vec<String>)> = rows
        .into_iter()
        .map(|r| (r.flags, r.commands.into_iter().collect()))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        [
            (s(&["--plugins"]), s(&["dev", "run"])),
            (s(&["--module"]), s(&["approve"])),
            (s(&["--port"]), s(&["dev"])),
        ]
    );
}

/// The metric families a `/metrics` text declares (`# TYPE NAME TYPE`), under the names
/// their samples carry: a counter's with `_total`.
fn served_metrics(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            let name = match kind {
                "counter" if !name.ends_with("_total") => format!("{name}_total"),
                _ => name.to_string(),
            };
            Some((name, kind.to_string()))
        })
        .collect()
}

/// The metrics table of the reference page: name → type.
fn documented_metrics(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .skip_while(|l| *l != "## Metrics")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| ")?.split(" | ");
            let name = code_spans(cells.next()?)
                .first()?
                .split('{')
                .next()?
                .to_string();
            let kind = cells.next()?.trim().to_string();
            name.starts_with("kubewasm_").then_some((name, kind))
        })
        .collect()
}

/// The metric names the engine registers (`registry.register("NAME", ...)` in the file
/// that makes the `kubewasm` registry), with the prefix and without a counter's `_total`.
fn registered_metrics() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("host/engine/src"), &mut files);
    let source = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find(|s| s.contains("Registry::with_prefix(\"kubewasm\")"))
        .expect("the engine makes the kubewasm metrics registry");
    source
        .split(".register(")
        .skip(1)
        .filter_map(|call| {
            let name = call.trim_start().strip_prefix('"')?.split('"').next()?;
            Some(format!("kubewasm_{name}"))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The reference page's metrics table is what the host registers and serves: every
/// registered family, no other, a counter named with `_total` and only a counter; and what
/// a running host serves, of the type it says. The pages that name metrics name only
/// documented ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_page_lists_exactly_the_metrics_served() {
    let registered = registered_metrics();
    assert!(
        registered.len() >= 20 && registered.contains("kubewasm_leader"),
        "the registrations did not parse: {registered:?}"
    );
    let text = std::fs::read_to_string(root().join(REFERENCE)).expect("the reference page");
    let documented = documented_metrics(&text);
    let mut wrong = Vec::new();
    let bases: BTreeSet<String> = documented
        .iter()
        .map(|(name, kind)| {
            let base = name.strip_suffix("_total");
            if (kind == "counter") != base.is_some() {
                wrong.push(format!("{name}: a {kind} (only counters end in _total)"));
            }
            base.unwrap_or(name).to_string()
        })
        .collect();
    for name in registered.difference(&bases) {
        wrong.push(format!("{name} is registered, not in {REFERENCE}"));
    }
    for name in bases.difference(&registered) {
        wrong.push(format!("{name} is in {REFERENCE}, not registered"));
    }

    let env = Env::new().await;
    let host = env.start_host(&[]);
    let addr = metrics_addr(&host).await;
    let served = served_metrics(&http_get(&addr, "/metrics"));
    host.stop();
    assert!(
        served.contains_key("kubewasm_leader") && served.len() >= 4,
        "/metrics did not parse: {served:?}"
    );
    for (name, kind) in &served {
        if documented.get(name) != Some(kind) {
            wrong.push(format!(
                "/metrics serves {name}, a {kind}; {REFERENCE} says {:?}",
                documented.get(name)
            ));
        }
    }

    for page in [
        REFERENCE,
        "README.md",
        "deploy/README.md",
        "host/README.md",
        "tests/bench/README.md",
    ] {
        let text = std::fs::read_to_string(root().join(page)).expect("a doc page");
        for (n, line) in text.lines().enumerate() {
            for name in metric_names(line) {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|b| documented.get(*b).is_some_and(|k| k == "histogram"))
                    .unwrap_or(&name);
                if !documented.contains_key(base) {
                    wrong.push(format!("{page}:{}: {name} is no metric", n + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `kubewasm_...` metric names in a line (not crate paths such as `kubewasm_core::`).
fn metric_names(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("kubewasm_") {
        let after = &rest[i..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !after[name.len()..].starts_with("::") {
            found.push(name.clone());
        }
        rest = &after[name.len()..];
    }
    found
}

#[test]
fn metric_parsers() {
    let served = served_metrics(
        "# HELP kubewasm_events Events.\n# TYPE kubewasm_events counter\n\
         kubewasm_events_total{plugin=\"a\"} 1\n# TYPE kubewasm_leader gauge\n\
         # TYPE kubewasm_plugin_call_seconds histogram\n# EOF\n",
    );
    let s = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        served,
        BTreeMap::from([
            s("kubewasm_events_total", "counter"),
            s("kubewasm_leader", "gauge"),
            s("kubewasm_plugin_call_seconds", "histogram"),
        ])
    );
    let page = "## Metrics\n\n| metric | type | what |\n| --- | --- | --- |\n\
                | `kubewasm_leader` | gauge | x |\n| `kubewasm_events_total{plugin}` | counter | y |\n\n\
                ## Exit codes\n\n| `kubewasm_other` | gauge | z |\n";
    assert_eq!(
        documented_metrics(page),
        BTreeMap::from([
            s("kubewasm_events_total", "counter"),
            s("kubewasm_leader", "gauge")
        ])
    );
    assert_eq!(
        metric_names("`kubewasm_leader`, kubewasm_core::admit and `kubewasm_x_total{a}`"),
        ["kubewasm_leader", "kubewasm_x_total"]
    );
}

/// Where the host serves `/metrics`: the address its start-up line names.
async fn metrics_addr(host: &HostProcess) -> String {
    let line = host
        .wait_log("the ops endpoint", |l| {
            field(l, "message").starts_with("serving /healthz")
        })
        .await;
    field(&line, "addr").to_string()
}

/// GET over plain HTTP/1.0: the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("a read timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}
