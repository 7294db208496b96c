//! The library's layers, as `src/lib.rs` lists them, are the ones its code keeps: every module
//! is in exactly one layer, a module uses only modules of its own layer or of the layers before
//! it, and no modules use each other, directly or round a longer cycle. Read from the source's
//! `crate::` paths (tests and comments left out), so a new import that breaks a layer fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules its non-test code names through `crate::`.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The layers as `lib.rs` documents them: each `//! N. ...` item (and its indented continuation
/// lines), with the modules it names as [`name`] links, in order.
fn documented_layers(lib: &str) -> Vec<Vec<String>> {
    let mut layers: Vec<String> = Vec::new();
    for line in lib.lines().filter_map(|line| line.strip_prefix("//!")) {
        let item = line.trim_start();
        let numbered = item
            .split_once(". ")
            .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        match layers.last_mut() {
            _ if numbered => layers.push(item.to_owned()),
            Some(text) if line.starts_with("    ") => text.push_str(item),
            _ => {}
        }
    }
    layers
        .iter()
        .map(|text| {
            text.split("[`")
                .skip(1)
                .filter_map(|rest| rest.split_once("`]").map(|(name, _)| name.to_owned()))
                .collect()
        })
        .collect()
}

/// The `pub mod` declarations of `lib.rs`.
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';').to_owned())
        .collect()
}

/// Code without its `#[cfg(test)]` module and without comments.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names: `crate::a::...` and `use crate::{a, b::c}`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for part in code.split("crate::").skip(1) {
        if let Some(group) = part.strip_prefix('{') {
            // The first segment of each path in the group, at the group's own depth.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(ident(&item));
                        item.clear();
                    }
                    c if depth == 0 => item.push(c),
                    _ => {}
                }
            }
            names.insert(ident(&item));
        } else {
            names.insert(ident(part));
        }
    }
    names.retain(|n| n.chars().next().is_some_and(|c| c.is_lowercase()));
    names
}

fn graph(src: &Path, modules: &BTreeSet<String>) -> Graph {
    let mut graph = Graph::new();
    for module in modules {
        let file = src.join(format!("{module}.rs"));
        let files: Vec<_> = if file.exists() {
            vec![file]
        } else {
            walk(&src.join(module))
        };
        assert!(!files.is_empty(), "no source for module {module}");
        let uses = graph.entry(module.clone()).or_default();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for name in named_modules(&code_of(&text)) {
                if &name != module && modules.contains(&name) {
                    uses.insert(name);
                }
            }
        }
    }
    graph
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// A cycle through `from`, if any: the path back to it.
fn cycle_through(graph: &Graph, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![(from.to_owned(), vec![from.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == from {
                let mut cycle = path.clone();
                cycle.push(from.to_owned());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

fn lib_and_graph() -> (Vec<Vec<String>>, BTreeSet<String>, Graph) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let modules = declared_modules(&lib);
    let graph = graph(&src, &modules);
    (documented_layers(&lib), modules, graph)
}

#[test]
fn every_module_is_in_one_documented_layer() {
    let (layers, modules, _) = lib_and_graph();
    let listed: Vec<&String> = layers.iter().flatten().collect();
    let unique: BTreeSet<String> = listed.iter().map(|s| (*s).clone()).collect();
    assert_eq!(listed.len(), unique.len(), "a module is in two layers");
    assert_eq!(unique, modules, "lib.rs's layers and its modules differ");
}

#[test]
fn modules_use_only_their_layer_and_the_layers_before() {
    let (layers, _, graph) = lib_and_graph();
    let layer_of = |m: &str| layers.iter().position(|l| l.iter().any(|n| n == m));
    let mut broken = Vec::new();
    for (module, uses) in &graph {
        for used in uses {
            if layer_of(used) > layer_of(module) {
                broken.push(format!(
                    "{module} (layer {:?}) uses {used}",
                    layer_of(module)
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let (_, modules, graph) = lib_and_graph();
    let cycles: Vec<String> = modules
        .iter()
        .filter_map(|m| cycle_through(&graph, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(cycles.is_empty(), "{cycles:#?}");
}

/// A file's module path under `src/` (`store/lease_store.rs` is `store::lease_store`; a folder's
/// `mod.rs` is the folder's module), and the child modules its parent declares under
/// `#[cfg(test)]` (test-only, left out of the sibling graph).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// The modules `code` (of the module at `at`) names, as absolute paths: `crate::a::b`,
/// `super::a`, `super::super::a`, and `use super::{a, b::c}` groups. Only their first segments
/// past the prefix matter for siblings, so a group's inner paths are cut at their first.
fn named_paths(code: &str, at: &[String]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let segment = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    // Every start of a path: `crate::` or one or more `super::`.
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let (base, after) = if word_start && rest.starts_with("crate::") {
            (Vec::new(), &rest["crate::".len()..])
        } else if word_start && rest.starts_with("super::") {
            let mut base = at.to_vec();
            let mut after = rest;
            while let Some(next) = after.strip_prefix("super::") {
                base.pop();
                after = next;
            }
            (base, after)
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let firsts: Vec<String> = match after.strip_prefix('{') {
            Some(group) => {
                let end = group.find('}').unwrap_or(group.len());
                group[..end].split(',').map(segment).collect()
            }
            None => {
                // The whole path, segment by segment.
                let path: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut full = base.clone();
                full.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
                paths.push(full);
                i = code.len() - after.len();
                continue;
            }
        };
        for first in firsts.into_iter().filter(|f| !f.is_empty()) {
            let mut full = base.clone();
            full.push(first);
            paths.push(full);
        }
        i = code.len() - after.len();
    }
    paths
}

/// Modules declared test-only (`#[cfg(test)]` then `mod name;`) by the file `file`.
fn test_only_children(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .filter_map(|w| {
            w[1].strip_prefix("mod ")?
                .strip_suffix(';')
                .map(String::from)
        })
        .collect()
}

/// For every folder module, the graph of its child modules: `a -> b` when code in `a` (or
/// below it) names `b` (or something below it).
fn sibling_graphs() -> BTreeMap<Vec<String>, Graph> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = walk(&src);
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let at = module_path(&src, file);
        for child in test_only_children(&text) {
            let mut path = at.clone();
            path.push(child);
            test_only.insert(path);
        }
    }
    let is_test = |path: &[String]| (1..=path.len()).any(|n| test_only.contains(&path[..n]));
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|f| module_path(&src, f))
        .filter(|p| !is_test(p))
        .collect();
    let mut graphs: BTreeMap<Vec<String>, Graph> = BTreeMap::new();
    for file in &files {
        let at = module_path(&src, file);
        if is_test(&at) || at.is_empty() {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for named in named_paths(&code, &at) {
            // The first segment where the two paths part: siblings under their common parent.
            let k = at.iter().zip(&named).take_while(|(a, b)| a == b).count();
            if k >= at.len() || k >= named.len() {
                continue;
            }
            let (from, to) = (&at[..=k], &named[..=k]);
            if modules.contains(from) && modules.contains(to) && !is_test(to) {
                graphs
                    .entry(at[..k].to_vec())
                    .or_default()
                    .entry(at[k].clone())
                    .or_default()
                    .insert(named[k].clone());
            }
        }
    }
    graphs
}

#[test]
fn no_sibling_modules_use_each_other() {
    let mut cycles = Vec::new();
    for (parent, graph) in sibling_graphs() {
        for module in graph.keys() {
            if let Some(cycle) = cycle_through(&graph, module) {
                cycles.push(format!("in {}: {}", parent.join("::"), cycle.join(" -> ")));
            }
        }
    }
    assert!(cycles.is_empty(), "{cycles:#?}");
}

/// The reader itself: each way of naming a module is seen, so the checks above can fail.
#[test]
fn the_reader_sees_every_way_of_naming_a_module() {
    let code = code_of(
        "use crate::store::Tables;\nuse crate::{lease::Op, clock};\nlet x = crate::metrics::count(\"a\");\n// crate::http\n#[cfg(test)]\nuse crate::bootstrap;",
    );
    let names = named_modules(&code);
    let expected: BTreeSet<String> = ["store", "lease", "clock", "metrics"]
        .map(String::from)
        .into();
    assert_eq!(names, expected);
    let mut graph = Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle_through(&graph, "a"), None);
    graph.entry("c".into()).or_default().insert("a".into());
    // Relative paths, as siblings name each other.
    let at: Vec<String> = ["store", "lease_index"].map(String::from).into();
    let named = named_paths(
        "use super::lease_store::{free};\nuse super::{Item, expr::Expr};\nlet x = super::super::clock::now();\nuse crate::lease::ops::Op;",
        &at,
    );
    let firsts: Vec<String> = named.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        firsts,
        [
            "store::lease_store",
            "store::Item",
            "store::expr",
            "clock::now",
            "lease::ops::Op"
        ]
    );
    assert_eq!(
        cycle_through(&graph, "a"),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
