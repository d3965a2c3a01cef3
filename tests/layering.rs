//! Every arrow in the import graph points down. The crate's modules sit in layers, bindings at the
//! top and the platform at the bottom (docs/architecture.md); a module may use only modules of
//! lower layers, and the two backends do not use each other or the `Backend` enum above them.
//! The test reads the sources, so it fails the moment a `use crate::…` points up. Run it with
//! `--nocapture` to see the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first. `backend` is split so that its parts are checked apart.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["platform"],
    &["config"],
    &["tokenizer", "sampling"],
    // A GGUF file holds its tokenizer: the weights' formats build it (or write its tokenizer.json).
    &["weights"],
    &["backend::cpu", "backend::gpu"],
    &["backend"],
    &["budget"],
    &["model"],
    &["speculate"],
    &["generate"],
    &["bench"],
    &["wasm", "fuzzing", "lib"],
];

fn layer(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("module {module} has no layer in tests/layering.rs"))
}

/// `src/backend/cpu/q8/avx2.rs` → `backend::cpu`; `src/model.rs` → `model`.
fn module_of(rel: &Path) -> String {
    let parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [b, sub, ..] if b == "backend" && sub != "mod" => format!("backend::{sub}"),
        [first, ..] => first.clone(),
        [] => unreachable!(),
    }
}

/// The module a path after `crate::` names, at the granularity of `LAYERS`.
fn target_of(path: &str) -> String {
    let mut it = path.split("::");
    let first = it.next().unwrap_or_default().to_string();
    // The names lib.rs re-exports at the crate's root, by where they are defined.
    let reexport = match first.as_str() {
        "Error" | "Result" => "error",
        "Config" => "config",
        "Tokenizer" | "Detokenizer" => "tokenizer",
        "Candidate" | "SamplingParams" => "sampling",
        "Draft" => "speculate",
        "CpuDtype" => "backend::cpu",
        "Backend" | "BackendChoice" => "backend",
        "Model" => "model",
        "GenerateParams" | "Generation" | "GenerationResult" | "Metrics" | "StopReason"
        | "TokenEvent" | "Progress" | "NextLogits" | "Beam" | "EarlyStopping" | "generate" => {
            "generate"
        }
        _ => "",
    };
    if !reexport.is_empty() {
        return reexport.to_string();
    }
    match (first.as_str(), it.next()) {
        ("backend", Some(sub @ ("cpu" | "gpu"))) => format!("backend::{sub}"),
        _ => first,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `crate::a::b` paths in the code (comments left out), including `use crate::{a, b}` lists.
fn crate_paths(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                let end = list.find('}').unwrap_or(list.len());
                for item in list[..end].split(',') {
                    let item = item.trim();
                    if !item.is_empty() {
                        out.insert(item.to_string());
                    }
                }
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.insert(rest[..end].trim_end_matches(':').to_string());
        }
    }
    out
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel.starts_with("bin") {
            continue; // a binding: it may use anything the library exports
        }
        let module = module_of(rel);
        let text = std::fs::read_to_string(f).unwrap();
        for path in crate_paths(&text) {
            let target = target_of(&path);
            if target == module || target.is_empty() {
                continue;
            }
            graph
                .entry(module.clone())
                .or_default()
                .insert(target.clone());
            if layer(&target) >= layer(&module) {
                wrong.push(format!(
                    "{}: {module} uses crate::{path} ({target} is not below it)",
                    rel.display()
                ));
            }
        }
    }
    for (from, to) in &graph {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        eprintln!("{from:>14} → {}", to.join(", "));
    }
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
    // The test can fail: a backend that used the model above it would be caught.
    assert!(layer("model") > layer("backend::cpu"));
    assert_eq!(
        crate_paths(
            "use crate::{model::Model, config};\nlet x = crate::backend::gpu::X; // crate::wasm"
        ),
        ["backend::gpu::X", "config", "model::Model"]
            .map(String::from)
            .into(),
    );
}
