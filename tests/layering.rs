//! Every arrow in the import graph points down. The crate's modules sit in layers, bindings at the
//! top and the platform at the bottom (docs/architecture.md); a module may use only modules of
//! lower layers, and the two backends do not use each other or the `Backend` enum above them.
//! The test reads the sources, so it fails the moment a `use crate::…` points up. Run it with
//! `--nocapture` to see the graph. Inside `weights/` the test goes down to files: no file imports
//! one that imports it, however far round (`no_circle_among_the_weights_files`).

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
    // What a pass is asked (rows in, logits out): the one surface every backend implements.
    &["backend::rows"],
    &["backend::cpu", "backend::gpu"],
    &["backend"],
    &["budget"],
    // Multi-token prediction heads: a model's own drafter, built from its weights file.
    &["mtp"],
    &["model"],
    &["speculate"],
    &["generate"],
    // The one driver every front end pumps: requests over models, one model step at a time.
    &["scheduler"],
    // OpenAI's completions API over the scheduler's jobs and answers (`gpt2 serve`).
    &["bench", "openai"],
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
        | "TokenEvent" | "Move" | "NextLogits" | "Beam" | "EarlyStopping" | "generate" => {
            "generate"
        }
        _ => "",
    };
    if !reexport.is_empty() {
        return reexport.to_string();
    }
    match (first.as_str(), it.next()) {
        ("backend", Some(sub @ ("cpu" | "gpu" | "rows"))) => format!("backend::{sub}"),
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

/// The code without comments, on one line (a `use` list may span several).
fn code(src: &str) -> String {
    let lines = src
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default());
    lines.collect::<Vec<_>>().join(" ")
}

/// The paths that start at `root` (`crate`, `super`, a child module, …) in the code, a `use`
/// list expanded: `use super::{a::{B, C}, d}` gives `super::a::B`, `super::a::C`, `super::d`.
fn paths_from(code: &str, root: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let start = format!("{root}::");
    let mut at = 0;
    while let Some(i) = code[at..].find(&start) {
        let i = at + i;
        at = i + start.len();
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // a longer name, or a path that does not start here
        }
        let mut rest = &code[i..];
        tree(&mut rest, Vec::new(), &mut out);
    }
    out
}

/// One use tree from the start of `s` (a path, then maybe `::{…}`), appended to `prefix`.
fn tree(s: &mut &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        *s = s.trim_start();
        if let Some(list) = s.strip_prefix('{') {
            *s = list;
            loop {
                *s = s.trim_start();
                if let Some(r) = s.strip_prefix('}') {
                    *s = r;
                    return;
                }
                if let Some(r) = s.strip_prefix(',') {
                    *s = r;
                    continue;
                }
                let before = s.len();
                tree(s, path.clone(), out);
                if s.len() == before {
                    return; // not a use list after all
                }
            }
        }
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let (name, r) = s.split_at(end);
        *s = r;
        match name {
            "" if s.starts_with('*') => *s = &s[1..],
            "" => {}
            "self" if !path.is_empty() => {}
            _ => path.push(name.to_string()),
        }
        match s.strip_prefix("::") {
            Some(r) => *s = r,
            None => {
                // `x as y` names x.
                if let Some(r) = s.trim_start().strip_prefix("as ") {
                    let r = r.trim_start();
                    let end =
                        (r.find(|c: char| !(c.is_alphanumeric() || c == '_'))).unwrap_or(r.len());
                    *s = &r[end..];
                }
                if !path.is_empty() {
                    out.push(path);
                }
                return;
            }
        }
    }
}

/// `crate::a::b` paths in the code (comments left out), including `use crate::{a, b}` lists.
fn crate_paths(src: &str) -> BTreeSet<String> {
    (paths_from(&code(src), "crate").into_iter())
        .map(|p| p[1..].join("::"))
        .filter(|p| !p.is_empty())
        .collect()
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

/// A source file's module path: `weights/gguf/parse.rs` → `weights::gguf::parse`,
/// `weights/mod.rs` → `weights`, `lib.rs` → the crate's root.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = (rel.with_extension("").components())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The modules a file declares in files of their own (`mod x;`, `pub mod x;`): the roots of its
/// paths besides `crate`, `super` and `self`.
fn children(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("mod ") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| !(c.is_whitespace() || c == ')' || c == ';' || c == '}')) {
            continue;
        }
        let rest = code[i + 4..].trim_start();
        let end = (rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))).unwrap_or(rest.len());
        if end > 0 && rest[end..].trim_start().starts_with(';') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// Which source file imports which (`use super::…`, `crate::weights::…`, a child's `x::…`),
/// each path resolved to the file that defines the longest module prefix of it. Test modules
/// (`mod tests {` at a file's end) are left out: their `super` is the file itself.
fn file_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let files: Vec<(Vec<String>, String, String)> = (files.iter())
        .map(|f| f.strip_prefix(src).unwrap().to_path_buf())
        .filter(|rel| !rel.starts_with("bin")) // the binary is a crate of its own
        .map(|rel| {
            let text = std::fs::read_to_string(src.join(&rel)).unwrap();
            let name = rel.to_string_lossy().replace('\\', "/");
            (module_path(&rel), name, code(&text))
        })
        .collect();
    let by_module: BTreeMap<&[String], &str> = (files.iter())
        .map(|(m, name, _)| (m.as_slice(), name.as_str()))
        .collect();
    let mut graph = BTreeMap::new();
    for (module, name, code) in &files {
        let code = code.split("mod tests {").next().unwrap_or_default();
        let kids = children(code);
        let roots = ["crate", "super", "self"]
            .into_iter()
            .chain(kids.iter().map(String::as_str));
        let mut to = BTreeSet::new();
        for root in roots {
            for path in paths_from(code, root) {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let absolute: Vec<String> = match root {
                    "crate" => path[1..].to_vec(),
                    "super" if supers <= module.len() => {
                        let base = &module[..module.len() - supers];
                        base.iter().chain(&path[supers..]).cloned().collect()
                    }
                    "super" => continue,
                    "self" => module.iter().chain(&path[1..]).cloned().collect(),
                    _ => module.iter().chain(&path).cloned().collect(),
                };
                let target = (0..=absolute.len())
                    .rev()
                    .find_map(|n| by_module.get(&absolute[..n]))
                    .expect("the crate's root is a file");
                if target != name {
                    to.insert(target.to_string());
                }
            }
        }
        graph.insert(name.clone(), to);
    }
    graph
}

/// A circle among the files under `dir` (`weights/`), as the files along it, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>, dir: &str) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        dir: &str,
        at: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut circle = path[i..].to_vec();
            circle.push(at.to_string());
            return Some(circle);
        }
        if !done.insert(at.to_string()) {
            return None;
        }
        path.push(at.to_string());
        for next in graph.get(at).into_iter().flatten() {
            if next.starts_with(dir) {
                if let Some(c) = visit(graph, dir, next, path, done) {
                    return Some(c);
                }
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    (graph.keys())
        .filter(|f| f.starts_with(dir))
        .find_map(|f| visit(graph, dir, f, &mut Vec::new(), &mut done))
}

/// Inside `weights/` no file imports one that imports it, however far round: the front
/// (stream.rs) above one reader per format, what they share below them (docs/architecture.md).
#[test]
fn no_circle_among_the_weights_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = file_graph(&src);
    for (from, to) in graph.iter().filter(|(f, _)| f.starts_with("weights/")) {
        let to: Vec<&str> = (to.iter())
            .filter(|t| t.starts_with("weights/"))
            .map(|t| &t["weights/".len()..])
            .collect();
        eprintln!("{:>20} → {}", &from["weights/".len()..], to.join(", "));
    }
    if let Some(c) = circle(&graph, "weights/") {
        panic!("a circle of imports: {}", c.join(" → "));
    }
    // The test can fail: the readers' old circle (the streamer using the GGUF and torch readers,
    // which used its header types) is found, and paths resolve to the files that define them.
    let mut old = graph.clone();
    for (from, to) in [
        ("weights/stream.rs", "weights/gguf/mod.rs"),
        ("weights/gguf/mod.rs", "weights/stream.rs"),
    ] {
        old.entry(from.into()).or_default().insert(to.into());
    }
    assert!(circle(&old, "weights/").is_some());
    let layout = &graph["weights/torch/layout.rs"];
    for f in [
        "weights/header.rs",
        "weights/table.rs",
        "weights/torch/zip.rs",
        "error.rs",
    ] {
        assert!(layout.contains(f), "torch/layout.rs uses {f}: {layout:?}");
    }
    assert!(graph["weights/gguf/mod.rs"].contains("weights/gguf/streaming.rs"));
}

/// The browser code's folders, bottom first (docs/architecture.md, Layout): a module may import
/// modules of its own folder or of a folder below. The worker's parts import only each other (they
/// are joined into one script); the public URLs at the top of www/ (gpt2.js, widget.js) re-export
/// whatever they stand for.
const WWW_LAYERS: &[&str] = &["api", "widget", "page"];

/// Every relative module a JS source imports or re-exports (`… from './x.js'`, `import('../y.js')`
/// is not used for code of ours), as written.
fn js_imports(src: &str) -> Vec<String> {
    src.lines()
        .map(str::trim_start)
        .filter(|l| {
            l.starts_with("import ") || l.starts_with("export ") || l.starts_with("} from ")
        })
        .filter_map(|l| {
            let from = l.rfind(" from '")?;
            let rest = &l[from + 7..];
            let spec = &rest[..rest.find('\'')?];
            spec.starts_with('.').then(|| spec.to_string())
        })
        .collect()
}

#[test]
fn the_browser_code_imports_point_down() {
    let www = Path::new(env!("CARGO_MANIFEST_DIR")).join("www");
    let mut seen = 0;
    let mut wrong = Vec::new();
    for folder in WWW_LAYERS.iter().chain(&["worker", "."]) {
        let dir = www.join(folder);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "js"))
        {
            let name = file.file_name().unwrap().to_string_lossy();
            if *folder == "." && name == "worker.js" {
                continue; // built from worker/ by tools/join_worker.mjs
            }
            let rel = Path::new(folder).join(&*name);
            for spec in js_imports(&std::fs::read_to_string(file).unwrap()) {
                seen += 1;
                let target = normalize(&Path::new(folder).join(&spec));
                let to = target
                    .parent()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let layer = |f: &str| WWW_LAYERS.iter().position(|l| *l == f);
                let ok = www.join(&target).is_file()
                    && match *folder {
                        "." => true,
                        "worker" => to == "worker",
                        from => matches!((layer(from), layer(&to)), (Some(a), Some(b)) if b <= a),
                    };
                if !ok {
                    wrong.push(format!(
                        "www/{} imports {spec} (www/{})",
                        rel.display(),
                        target.display()
                    ));
                }
            }
        }
    }
    assert!(
        seen > 40,
        "found only {seen} imports: is www/ where it was?"
    );
    assert!(
        wrong.is_empty(),
        "imports that point up, sideways or nowhere:\n{}",
        wrong.join("\n")
    );
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Files that docs/architecture.md names but that no checkout holds: OpenAI's tokenizer files, and
/// www/worker.js, which ./build.sh joins from www/worker/ (tools/join_worker.mjs).
const NOT_OURS: &[&str] = &["encoder.json", "vocab.bpe", "worker.js"];

#[test]
fn every_file_the_architecture_page_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    // Every file of the project, by its path and by its name.
    let mut files = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !["node_modules", ".git", "target", "out"].contains(&name.as_str()) {
                    stack.push(p);
                }
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            files.insert(rel);
            files.insert(name);
        }
    }
    let mut named = 0;
    for word in page.split(|c: char| c.is_whitespace() || "`()[],;:|".contains(c)) {
        let word = word.trim_start_matches("../").trim_start_matches("./");
        let ext = word.rsplit('.').next().unwrap_or("");
        let is_file = ["rs", "js", "mjs", "wgsl", "md", "sh", "py", "json", "html"].contains(&ext)
            && word.len() > ext.len() + 1
            && !word.contains('*');
        if !is_file || NOT_OURS.contains(&word) {
            continue;
        }
        named += 1;
        let found = files.contains(word) || files.iter().any(|f| f.ends_with(&format!("/{word}")));
        assert!(
            found,
            "docs/architecture.md names {word}, which does not exist"
        );
    }
    assert!(
        named >= 40,
        "only {named} file names found in docs/architecture.md"
    );
}

/// The SIMD kernels, whose bodies are one loop of intrinsics each: exempt from the length rule.
const KERNEL_FILES: &[&str] = &["avx2.rs", "simd128.rs", "portable.rs"];

#[test]
fn no_function_runs_over_80_lines_and_none_takes_too_many_arguments() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut long = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let rel = p.strip_prefix(&root).unwrap().display().to_string();
            assert!(
                !text.contains("clippy::too_many_arguments"),
                "src/{rel} allows too_many_arguments: group the arguments"
            );
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if KERNEL_FILES.contains(&name.as_str()) {
                continue;
            }
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let trimmed = line.trim_start();
                let indent = &line[..line.len() - trimmed.len()];
                let words: Vec<&str> = trimmed.split_whitespace().collect();
                let Some(at) = words.iter().position(|w| *w == "fn") else {
                    continue;
                };
                let before_ok = words[..at].iter().all(|w| {
                    ["pub", "async", "unsafe", "const"].contains(w) || w.starts_with("pub(")
                });
                if !before_ok || trimmed.ends_with(';') {
                    continue;
                }
                let close = format!("{indent}}}");
                if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
                    let n = end + 2;
                    if n > 80 {
                        long.push(format!("src/{rel}:{} ({n} lines)", i + 1));
                    }
                }
            }
        }
    }
    assert!(long.is_empty(), "functions over 80 lines: {long:?}");
}
