//! A checkpoint in shards (`model.safetensors.index.json` and the files it names), as
//! `save_pretrained` writes a big model: the same logits as the one file, loaded from a folder
//! and streamed in small chunks, and every broken index or shard a sentence.

mod common;
mod gpu_common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, Model};
use std::collections::BTreeMap;

/// Splits a safetensors file into `n` files by tensor (in the order of their names, with the
/// `transformer.` prefix `save_pretrained` writes), plus the index; returns the folder's files.
fn split(bytes: &[u8], n: usize) -> (Vec<(String, Vec<u8>)>, serde_json::Value) {
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let data = &bytes[8 + len..];
    let names: Vec<&String> = header.keys().filter(|k| *k != "__metadata__").collect();
    let per = names.len().div_ceil(n);
    let mut files = Vec::new();
    let mut map = serde_json::Map::new();
    for (i, group) in names.chunks(per).enumerate() {
        let file = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
        let mut head = serde_json::Map::new();
        let mut body = Vec::new();
        for name in group {
            let e = &header[*name];
            let [a, b] = [0, 1].map(|j| e["data_offsets"][j].as_u64().unwrap() as usize);
            let start = body.len();
            body.extend_from_slice(&data[a..b]);
            let stored = format!("transformer.{name}");
            head.insert(
                stored.clone(),
                serde_json::json!({"dtype": e["dtype"], "shape": e["shape"],
                    "data_offsets": [start, body.len()]}),
            );
            map.insert(stored, file.clone().into());
        }
        let head = serde_json::to_vec(&head).unwrap();
        let mut out = (head.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&head);
        out.extend_from_slice(&body);
        files.push((file, out));
    }
    // save_pretrained also maps the tied head, which lives in no shard of its own.
    map.insert("lm_head.weight".into(), files[0].0.clone().into());
    let index = serde_json::json!({"metadata": {"total_size": data.len()}, "weight_map": map});
    (files, index)
}

fn sharded_folder(tag: &str, n: usize) -> std::path::PathBuf {
    let tiny = root().join(TINY);
    let dir = tempdir(&format!("shards-{tag}"));
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(tiny.join(f), dir.join(f)).unwrap();
    }
    let (files, index) = split(&std::fs::read(tiny.join("model.safetensors")).unwrap(), n);
    for (name, bytes) in &files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    dir
}

#[test]
fn shards_give_the_logits_of_the_one_file() {
    let dir = sharded_folder("same", 3);
    let mut sharded = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32).unwrap();
    let mut one = load(TINY);
    let fx = fixture("tiny-random");
    for case in &fx.cases {
        assert_eq!(logits(&mut sharded, &case.ids), logits(&mut one, &case.ids));
        let want = case.logits();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let got = logits(&mut sharded, &case.ids);
        assert_close(
            &got,
            &want,
            1e-4 * scale,
            1e-3,
            "sharded logits vs transformers",
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_stream_in_small_chunks() {
    let dir = sharded_folder("stream", 2);
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let index = read("model.safetensors.index.json");
    let mut one = load(TINY);
    let ids = &fixture("tiny-random").cases[0].ids;
    let want = logits(&mut one, ids);
    let model = pollster::block_on(async {
        let mut loader = gpt2_web::model::Loader::new(
            &read("config.json"),
            &read("tokenizer.json"),
            "model.safetensors.index.json",
            BackendChoice::Cpu,
            CpuDtype::F32,
        )
        .await
        .unwrap();
        let names = loader.sharded(&index).unwrap();
        assert_eq!(
            names,
            [
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors"
            ]
        );
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                loader.next_file().unwrap();
            }
            for chunk in read(name).chunks(777) {
                loader.push(chunk).unwrap();
            }
        }
        loader.finish(None).await.unwrap()
    });
    let mut model = model;
    assert_eq!(logits(&mut model, ids), want);
    let _ = std::fs::remove_dir_all(&dir);
}

fn load_error(dir: &std::path::Path) -> String {
    match Model::load_dir(dir, BackendChoice::Cpu, CpuDtype::F32) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broken_indexes_and_shards_are_sentences() {
    let dir = sharded_folder("broken", 2);
    let index_path = dir.join("model.safetensors.index.json");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    let with = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = index.clone();
        edit(&mut v);
        std::fs::write(&index_path, serde_json::to_vec(&v).unwrap()).unwrap();
    };
    let first = "model-00001-of-00002.safetensors";
    let second = "model-00002-of-00002.safetensors";

    with(&|v| {
        v["weight_map"]
            .as_object_mut()
            .unwrap()
            .remove("transformer.h.1.mlp.c_fc.bias");
    });
    let err = load_error(&dir);
    assert!(
        err.contains("model.safetensors.index.json: it does not say which file holds \"transformer.h.1.mlp.c_fc.bias\""),
        "{err}"
    );
    with(&|v| v["weight_map"]["transformer.wpe.weight"] = "../elsewhere.safetensors".into());
    let err = load_error(&dir);
    assert!(
        err.contains("which is not a .safetensors file beside the index"),
        "{err}"
    );
    with(&|v| v["weight_map"]["transformer.h.7.ln_1.weight"] = first.into());
    let err = load_error(&dir);
    assert!(err.contains("belongs to a layer beyond n_layer"), "{err}");
    std::fs::write(&index_path, b"{\"weight_map\": {").unwrap();
    let err = load_error(&dir);
    assert!(
        err.contains("model.safetensors.index.json: not valid JSON"),
        "{err}"
    );

    // The index says a tensor is in the other file: the shard names itself and the tensor.
    with(&|v| {
        let map = v["weight_map"].as_object_mut().unwrap();
        let (name, _) = map
            .iter()
            .find(|(k, f)| *f == first && k.ends_with(".weight") && *k != "lm_head.weight")
            .map(|(k, f)| (k.clone(), f.clone()))
            .unwrap();
        map.insert(name, second.into());
    });
    let err = load_error(&dir);
    assert!(
        err.starts_with("model-00002-of-00002.safetensors: missing tensor"),
        "{err}"
    );

    // A shard missing or cut short.
    with(&|_| {});
    let bytes = std::fs::read(dir.join(second)).unwrap();
    std::fs::write(dir.join(second), &bytes[..bytes.len() - 100]).unwrap();
    let err = load_error(&dir);
    assert!(
        err.starts_with("model-00002-of-00002.safetensors: the weights file ended after"),
        "{err}"
    );
    std::fs::remove_file(dir.join(second)).unwrap();
    let err = load_error(&dir);
    assert!(
        err.contains("model-00002-of-00002.safetensors: No such file"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A broken shard's error names that shard, `model-00002-of-00003.safetensors`: its header
/// corrupt, or the file cut short.
#[test]
fn a_broken_shard_names_itself() {
    let dir = sharded_folder("named", 3);
    let second = "model-00002-of-00003.safetensors";
    let bytes = std::fs::read(dir.join(second)).unwrap();
    let mut corrupt = bytes.clone();
    corrupt[8] = b'['; // the header's JSON opens an array instead of an object
    for broken in [&corrupt[..], &bytes[..bytes.len() - 1], &bytes[..20]] {
        std::fs::write(dir.join(second), broken).unwrap();
        let e = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32)
            .err()
            .expect("a broken shard must not load");
        assert!(e.to_string().starts_with(&format!("{second}: ")), "{e}");
        assert_eq!(e.code(), "weights");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lost_gpu_reads_the_shards_again() {
    if gpu_common::gpu().is_none() {
        return;
    }
    let dir = sharded_folder("gpu", 3);
    let mut gpu = Model::load_dir(&dir, BackendChoice::WebGpu, CpuDtype::F32).unwrap();
    assert_eq!(gpu.backend().name(), "webgpu");
    let case = &fixture("tiny-random").cases[0];
    let params = gpt2_web::GenerateParams {
        max_tokens: case.greedy_ids.len(),
        ignore_eos: true,
        ..Default::default()
    };
    let lose = |m: &Model| match &m.backend() {
        gpt2_web::Backend::WebGpu(b) => b.lose_device(),
        gpt2_web::Backend::Cpu(_) => unreachable!(),
    };
    let (r, _) = generate_midway(&mut gpu, &case.ids, params, 3, &lose);
    assert_eq!(
        gpu.backend().name(),
        "cpu",
        "rebuilt on the CPU from the three shards"
    );
    assert_eq!(r.tokens, case.greedy_ids);
    let _ = std::fs::remove_dir_all(&dir);
}
