//! `--model NAME` for a model already in the local Hugging Face cache, as `huggingface-cli
//! download NAME` (or transformers) left it: `HF_HUB_CACHE`, else `HF_HOME/hub`, else
//! `~/.cache/huggingface/hub`, then `models--OWNER--NAME/refs/main` names the snapshot folder
//! under `snapshots/`. The network is never used.

use std::path::{Path, PathBuf};

/// The hub cache folder the environment names, as huggingface_hub reads it.
fn hub_cache() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("HF_HUB_CACHE")
        .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|h| h.join("huggingface/hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// Whether `name` reads as a repository id (`gpt2`, `openai-community/gpt2`) rather than a path.
fn is_repo_id(name: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && (part.chars()).all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() <= 2 && parts.iter().all(|p| ok(p))
}

/// A model folder or GGUF file at `path`, as given; else, for a repository id, its snapshot in the
/// Hugging Face cache (the one `refs/main` names, or the only one there is). Anything else is
/// returned as given, for the loader to say what is wrong with it. `Err`: a repository id the
/// cache does not hold, in a sentence saying where it looked.
pub fn resolve(path: &Path) -> Result<PathBuf, String> {
    let name = path.to_string_lossy();
    let usable = path.is_dir() || gpt2_web::weights::gguf::is_gguf_file(path);
    if usable || !is_repo_id(&name) {
        return Ok(path.to_path_buf());
    }
    let Some(hub) = hub_cache() else {
        return match path.exists() {
            true => Ok(path.to_path_buf()),
            false => Err(format!(
                "{name}: no such file or folder, and no Hugging Face cache to look in \
                 (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME are unset)"
            )),
        };
    };
    let repo = hub.join(format!("models--{}", name.replace('/', "--")));
    let refs = repo.join("refs/main");
    let named =
        (std::fs::read_to_string(&refs).ok()).map(|rev| repo.join("snapshots").join(rev.trim()));
    let only = || {
        let mut dirs = std::fs::read_dir(repo.join("snapshots")).ok()?.flatten();
        let first = dirs.next()?.path();
        dirs.next().is_none().then_some(first)
    };
    match named.filter(|d| d.is_dir()).or_else(only) {
        Some(snapshot) => Ok(snapshot),
        None if path.exists() => Ok(path.to_path_buf()),
        None => Err(format!(
            "{name}: no such file or folder, and the Hugging Face cache has no snapshot of \
             \"{name}\" (looked for {}; models are never downloaded: fetch it with \
             `huggingface-cli download {name}`)",
            refs.display()
        )),
    }
}
