//! Loading: both naming schemes, f16/bf16, the shapes of the real GPT-2 family, and every kind
//! of bad checkpoint giving its own error rather than a panic.

mod common;
use common::*;
use gpt2_web::{BackendChoice, Config, CpuDtype, Error, Model};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;

struct Files {
    config: Vec<u8>,
    weights: Vec<u8>,
    tokenizer: Vec<u8>,
}

fn tiny_files() -> Files {
    let read = |f: &str| std::fs::read(root().join(TINY).join(f)).unwrap();
    Files {
        config: read("config.json"),
        weights: read("model.safetensors"),
        tokenizer: read("tokenizer.json"),
    }
}

fn try_load(f: &Files) -> Result<Model, Error> {
    pollster::block_on(Model::from_bytes(
        &f.config,
        "model.safetensors",
        f.weights.clone(),
        &f.tokenizer,
        BackendChoice::Cpu,
        CpuDtype::F32,
    ))
}

fn err(f: &Files) -> String {
    match try_load(f) {
        Ok(_) => panic!("loaded a bad checkpoint"),
        Err(e) => e.to_string(),
    }
}

/// Rewrites the tiny checkpoint: `edit` gets (name, dtype, shape, data) and returns the
/// tensors to write.
fn rewrite(
    edit: impl Fn(String, Dtype, Vec<usize>, Vec<u8>) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)>,
) -> Vec<u8> {
    let bytes = tiny_files().weights;
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut out: BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> = BTreeMap::new();
    for (name, view) in st.tensors() {
        for (n, d, s, b) in edit(
            name,
            view.dtype(),
            view.shape().to_vec(),
            view.data().to_vec(),
        ) {
            out.insert(n, (d, s, b));
        }
    }
    let views: Vec<(String, TensorView)> = out
        .iter()
        .map(|(n, (d, s, b))| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, None).unwrap()
}

fn logits(f: &Files, ids: &[u32]) -> Vec<f32> {
    let mut m = try_load(f).unwrap();
    forward_at(&mut m, ids, 0).unwrap().to_vec()
}

const IDS: [u32; 5] = [15, 300, 1000, 7, 1998];

#[test]
fn transformer_prefix_loads_the_same_model() {
    let mut f = tiny_files();
    let want = logits(&f, &IDS);
    f.weights = rewrite(|n, d, s, b| vec![(format!("transformer.{n}"), d, s, b)]);
    assert_eq!(logits(&f, &IDS), want);
}

#[test]
fn lm_head_and_attention_mask_buffers_are_ignored() {
    let mut f = tiny_files();
    let want = logits(&f, &IDS);
    f.weights = rewrite(|n, d, s, b| {
        let mut v = vec![(n.clone(), d, s.clone(), b.clone())];
        if n == "wte.weight" {
            v.push(("lm_head.weight".into(), d, s, b));
        }
        if n == "h.0.ln_1.weight" {
            v.push((
                "h.0.attn.bias".into(),
                Dtype::U8,
                vec![1, 1, 4, 4],
                vec![1; 16],
            ));
        }
        v
    });
    assert_eq!(logits(&f, &IDS), want);
}

fn convert(b: &[u8], to: Dtype) -> Vec<u8> {
    b.chunks_exact(4)
        .flat_map(|c| {
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            match to {
                Dtype::F16 => half::f16::from_f32(x).to_bits().to_le_bytes(),
                _ => half::bf16::from_f32(x).to_bits().to_le_bytes(),
            }
        })
        .collect()
}

#[test]
fn f16_and_bf16_checkpoints_load_and_stay_close() {
    let mut f = tiny_files();
    let want = logits(&f, &IDS);
    let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    for (dtype, tol) in [(Dtype::F16, 0.01), (Dtype::BF16, 0.08)] {
        f.weights = rewrite(|n, _, s, b| vec![(n, dtype, s, convert(&b, dtype))]);
        assert_close(
            &logits(&f, &IDS),
            &want,
            tol * scale,
            0.0,
            &format!("{dtype:?}"),
        );
    }
}

#[test]
fn a_missing_tensor_is_named() {
    let mut f = tiny_files();
    f.weights = rewrite(|n, d, s, b| {
        if n == "h.1.mlp.c_fc.bias" {
            vec![]
        } else {
            vec![(n, d, s, b)]
        }
    });
    assert_eq!(
        err(&f),
        "model.safetensors: missing tensor \"h.1.mlp.c_fc.bias\""
    );
}

#[test]
fn a_wrong_shape_is_named() {
    let mut f = tiny_files();
    f.weights = rewrite(|n, d, s, b| {
        if n == "h.0.attn.c_attn.weight" {
            vec![(n, d, vec![s[1], s[0]], b)] // stored (out, in) like nn.Linear, not Conv1D
        } else {
            vec![(n, d, s, b)]
        }
    });
    let e = err(&f);
    assert!(
        e.contains("\"h.0.attn.c_attn.weight\" has shape [288, 96], expected [96, 288]"),
        "{e}"
    );
}

#[test]
fn a_config_that_does_not_match_the_weights_is_named() {
    let mut f = tiny_files();
    f.config = String::from_utf8(f.config)
        .unwrap()
        .replace("\"vocab_size\": 1999", "\"vocab_size\": 2000")
        .into_bytes();
    let e = err(&f);
    assert!(
        e.contains("\"wte.weight\" has shape [1999, 96], expected [2000, 96]"),
        "{e}"
    );
    let mut f = tiny_files();
    f.config = String::from_utf8(f.config)
        .unwrap()
        .replace("\"n_layer\": 2", "\"n_layer\": 1")
        .into_bytes();
    let e = err(&f);
    assert!(e.contains("beyond n_layer = 1"), "{e}");
}

#[test]
fn truncated_and_corrupt_files_are_errors() {
    let full = tiny_files().weights;
    for cut in [0, 7, 100, full.len() / 2, full.len() - 1] {
        let mut f = tiny_files();
        f.weights = full[..cut].to_vec();
        let e = err(&f);
        // Cut in the header: not a valid file; cut in the data: where it ended, and in what.
        let header = e.starts_with("model.safetensors: not a valid safetensors file");
        let data = e.starts_with(&format!(
            "model.safetensors: the weights file ended after {cut} of its {} bytes, in tensor \"",
            full.len()
        ));
        assert!(header || (cut > 100 && data), "cut at {cut}: {e}");
    }
    let mut f = tiny_files();
    f.weights = b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}".to_vec();
    assert!(err(&f).contains("not a valid safetensors file"));
}

#[test]
fn unsupported_dtypes_are_named() {
    let mut f = tiny_files();
    f.weights = rewrite(|n, d, s, b| {
        if n == "ln_f.weight" {
            let b64: Vec<u8> = b
                .chunks_exact(4)
                .flat_map(|c| (f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).to_le_bytes())
                .collect();
            vec![(n, Dtype::F64, s, b64)]
        } else {
            vec![(n, d, s, b)]
        }
    });
    assert_eq!(
        err(&f),
        "model.safetensors: tensor \"ln_f.weight\" has dtype F64; supported are F32, F16 and BF16"
    );
}

#[test]
fn bad_config_json_is_named() {
    let mut f = tiny_files();
    f.config = b"{\"n_layer\": 2,".to_vec();
    assert!(err(&f).starts_with("config.json: not valid JSON"));
    let mut f = tiny_files();
    f.config = b"{\"model_type\": \"llama\"}".to_vec();
    assert!(err(&f).contains("only GPT-2"));
}

#[test]
fn a_missing_file_names_its_path() {
    let e = Model::load_dir(
        &root().join("tests/fixtures/no-such-model"),
        BackendChoice::Cpu,
        CpuDtype::F32,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("no-such-model/config.json"), "{e}");
}

/// The real checkpoints' config.json files (copied from the Hugging Face hub) parse to the
/// published parameter counts; `tools/make_random_checkpoint.py` makes full-size random
/// checkpoints of each to load end to end.
#[test]
fn the_gpt2_family_configs_parse_with_their_parameter_counts() {
    for (name, params) in [
        ("gpt2", 124_439_808),
        ("distilgpt2", 81_912_576),
        ("gpt2-medium", 354_823_168),
        ("gpt2-large", 774_030_080),
        ("gpt2-xl", 1_557_611_200),
    ] {
        let path = fixtures().join("configs").join(format!("{name}.json"));
        let c = Config::from_json(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(c.n_params(), params, "{name}");
    }
}

/// A config whose dimensions pass one by one but whose KV cache and weights multiply past any
/// memory is refused before anything is allocated, with a sentence.
#[test]
fn a_config_too_big_for_memory_is_refused_before_allocating() {
    let mut f = tiny_files();
    f.config =
        br#"{"n_layer":1000,"n_head":16,"n_embd":262144,"n_positions":1048576,"vocab_size":1999}"#
            .to_vec();
    let e = err(&f);
    assert!(e.contains("past any memory") || e.contains("GiB"), "{e}");
}

/// A tokenizer.json with a vocabulary id of u32::MAX is an error that names it (on wasm32, id + 1
/// used to wrap and index out of range).
#[test]
fn a_tokenizer_id_beyond_any_vocabulary_is_named() {
    let mut f = tiny_files();
    let text = String::from_utf8(f.tokenizer.clone()).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["model"]["vocab"]["zzzz-huge"] = serde_json::json!(4294967295u64);
    f.tokenizer = serde_json::to_vec(&json).unwrap();
    let e = err(&f);
    assert!(
        e.starts_with("tokenizer.json") && e.contains("4294967295"),
        "{e}"
    );
}

/// A model with a context of one position loads, and the benchmark says it needs two instead of
/// panicking on an empty range.
#[test]
fn a_one_position_context_is_refused_by_the_bench_with_a_sentence() {
    let mut f = tiny_files();
    let text = String::from_utf8(f.config.clone()).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["n_positions"] = serde_json::json!(1);
    f.config = serde_json::to_vec(&json).unwrap();
    f.weights = rewrite(|name, d, shape, data| {
        if name.ends_with("wpe.weight") {
            let row = data.len() / shape[0];
            vec![(name, d, vec![1, shape[1]], data[..row].to_vec())]
        } else {
            vec![(name, d, shape, data)]
        }
    });
    let mut model = try_load(&f).unwrap();
    let e = gpt2_web::bench::run(&mut model, &[4], 16, 1, &|_, _, _| {})
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("at least 2 positions"), "{e}");
}
