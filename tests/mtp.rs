//! Multi-token prediction heads: found beside a model's weights, refused in sentences when the
//! file is missing parts, of the wrong shape or corrupt, and `draft: mtp` refused for a model
//! without them. That their drafts leave the output exact is tests/speculative.rs's; that the
//! recipe's heads load, `recipe_heads_load` (it runs tools/train_mtp_heads.py for a few steps).

mod common;
use common::*;
use gpt2_web::mtp::{MtpParts, HEADS_FILE};
use gpt2_web::{BackendChoice, CpuDtype, Draft, GenerateParams, Model};

/// The tiny model's folder copied to a fresh one, with `heads` (bytes) as its heads file.
fn tiny_with(tag: &str, heads: Option<&[u8]>) -> std::path::PathBuf {
    let dir = tempdir(tag);
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(root().join(TINY).join(f), dir.join(f)).unwrap();
    }
    if let Some(h) = heads {
        std::fs::write(dir.join(HEADS_FILE), h).unwrap();
    }
    dir
}

fn params(draft: Draft) -> GenerateParams {
    GenerateParams {
        max_tokens: 12,
        ignore_eos: true,
        draft,
        ..Default::default()
    }
}

#[test]
fn heads_beside_the_weights_are_found_and_draft() {
    let dir = tiny_with("mtp-found", Some(&synthetic_heads(TINY, 3, 500, 3)));
    let mut model = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::Q8).unwrap();
    let heads = model.mtp.as_ref().expect("the heads beside the weights");
    assert_eq!((heads.len(), heads.draft_vocab()), (3, 500));
    let (plain, _) = run_ids(&mut model, &[5, 17, 99], params(Draft::None));
    let (mtp, _) = run_ids(&mut model, &[5, 17, 99], params(Draft::Mtp));
    assert_eq!(mtp.tokens, plain.tokens);
    assert!(mtp.metrics.drafted_tokens > 0, "{:?}", mtp.metrics);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_without_heads_refuses_draft_mtp_in_a_sentence() {
    let model = load(TINY);
    assert!(model.mtp.is_none());
    let e = gpt2_web::Generation::from_ids(&model, vec![1, 2], params(Draft::Mtp))
        .err()
        .expect("refused");
    let s = e.to_string();
    assert!(
        s.contains("\"mtp\" needs multi-token prediction heads") && s.contains(HEADS_FILE),
        "{s}"
    );
}

#[test]
fn broken_heads_files_are_sentences_naming_the_file_and_what_is_wrong() {
    let config = load(TINY).config.clone();
    let good = synthetic_heads(TINY, 2, 100, 4);
    let st = safetensors::SafeTensors::deserialize(&good).unwrap();
    // The good file's tensors with one replaced (an f32 one added if new), or dropped (None).
    let remake = |name: &str, with: Option<(Vec<usize>, Vec<u8>)>| -> Vec<u8> {
        let mut out: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        if let (false, Some((shape, data))) = (st.names().contains(&name), &with) {
            out.push((
                name.to_string(),
                safetensors::Dtype::F32,
                shape.clone(),
                data.clone(),
            ));
        }
        for (n, v) in st.tensors() {
            if n == name {
                if let Some((shape, data)) = &with {
                    out.push((n.clone(), v.dtype(), shape.clone(), data.clone()));
                }
            } else {
                out.push((n.clone(), v.dtype(), v.shape().to_vec(), v.data().to_vec()));
            }
        }
        let views = out.iter().map(|(n, dt, shape, data)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*dt, shape.clone(), data).unwrap(),
            )
        });
        safetensors::serialize(views.collect::<Vec<_>>(), None).unwrap()
    };
    let nan = {
        let mut b = (0..96 * 96)
            .flat_map(|_| 0f32.to_le_bytes())
            .collect::<Vec<u8>>();
        b[40..44].copy_from_slice(&f32::NAN.to_le_bytes());
        b
    };
    let bad_id: Vec<u8> = (0..100i32)
        .map(|i| if i == 7 { 5000 } else { i })
        .flat_map(|i| i.to_le_bytes())
        .collect();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "not safetensors",
            b"{\"this is\": not a header".to_vec(),
            "it is not a safetensors file",
        ),
        (
            "cut short",
            good[..good.len() / 2].to_vec(),
            "it is not a safetensors file",
        ),
        (
            "a bias missing",
            remake("mtp.1.bias", None),
            "tensor \"mtp.1.bias\" is missing",
        ),
        (
            "no draft vocabulary",
            remake("mtp.draft_ids", None),
            "tensor \"mtp.draft_ids\" is missing",
        ),
        (
            "a wrong shape",
            remake("mtp.0.weight", Some((vec![96, 95], vec![0; 96 * 95 * 4]))),
            "tensor \"mtp.0.weight\" has shape [96, 95], expected [96, 96]",
        ),
        (
            "a NaN",
            remake("mtp.1.weight", Some((vec![96, 96], nan))),
            "tensor \"mtp.1.weight\" holds NaN at 10",
        ),
        (
            "an id past the vocabulary",
            remake("mtp.draft_ids", Some((vec![100], bad_id))),
            "mtp.draft_ids[7] = 5000 is not a token id below 1999",
        ),
        (
            "no draft embedding",
            remake("mtp.draft_embedding", None),
            "tensor \"mtp.draft_embedding\" is missing",
        ),
        (
            "a stray tensor",
            remake("mtp.extra", Some((vec![4], vec![0; 16]))),
            "tensor \"mtp.extra\" is not one of theirs",
        ),
        (
            "a gap in the heads",
            remake("mtp.0.weight", None),
            "0 heads (mtp.0.weight, mtp.1.weight, …)",
        ),
    ];
    for (what, bytes, want) in cases {
        let e = MtpParts::from_safetensors(HEADS_FILE, &bytes, &config)
            .err()
            .unwrap_or_else(|| panic!("{what}: loaded"));
        let s = e.to_string();
        assert!(s.contains(HEADS_FILE) && s.contains(want), "{what}: {s}");
    }
    // Through the folder: the model is not loaded with a broken heads file beside it.
    let dir = tiny_with("mtp-broken", Some(&remake("mtp.0.bias", None)));
    let e = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::Q8)
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("tensor \"mtp.0.bias\" is missing"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recipe_heads_load() {
    // tools/train_mtp_heads.py for a few steps on the tiny checkpoint (its own generated text):
    // its file loads, and its heads draft for an exact greedy generation.
    let dir = tiny_with("mtp-recipe", None);
    let out = std::process::Command::new("python3")
        .arg(root().join("tools/train_mtp_heads.py"))
        .args([
            "--model",
            dir.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .args([
            "--heads",
            "2",
            "--steps",
            "5",
            "--draft-vocab",
            "256",
            "--seed",
            "1",
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the recipe failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut model = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32).unwrap();
    let heads = model.mtp.as_ref().expect("the recipe's heads");
    assert_eq!((heads.len(), heads.draft_vocab()), (2, 256));
    let (plain, _) = run_ids(&mut model, &[5, 17, 99], params(Draft::None));
    let (mtp, _) = run_ids(&mut model, &[5, 17, 99], params(Draft::Mtp));
    assert_eq!(mtp.tokens, plain.tokens);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The heads time themselves on the engine (`mtp::HeadsTrial`): the first greedy `draft: 'mtp'`
/// generations alternate drafted and plain blocks — the plain loop's tokens either way — until a
/// verdict; a verdict of off (measured or remembered) runs the plain loop, in a batch, unless
/// `forceDraft`; each says so in `metrics.mtp`.
#[test]
fn the_heads_measure_whether_they_pay_and_a_verdict_of_off_runs_the_plain_loop() {
    use gpt2_web::mtp::{HeadsVerdict, TRIAL_BLOCK, TRIAL_BLOCKS};
    let mut model = load(DEMO);
    let prompt = model
        .tokenizer
        .encode("ROMEO:\nBut soft, what light")
        .unwrap();
    let long = |draft, force_draft| GenerateParams {
        max_tokens: if draft == Draft::None || force_draft {
            100
        } else {
            40
        },
        ignore_eos: true,
        draft,
        force_draft,
        ..Default::default()
    };
    let (plain, _) = run_ids(&mut model, &prompt, long(Draft::None, false));
    // Four generations of 40 tokens: 156 tokens after their prompts, the trial's 80 passes
    // among them (16 of warm-up, 64 timed).
    for _ in 0..4 {
        let r = run_ids(&mut model, &prompt, long(Draft::Mtp, false)).0;
        assert_eq!(r.tokens, plain.tokens[..40]);
        let m = r.metrics.mtp.as_ref().expect("metrics.mtp");
        if model.heads_trial.verdict.is_none() || m.ran == "measuring" {
            assert_eq!((m.ran, m.forced), ("measuring", false), "{m:?}");
        }
    }
    let v = model
        .heads_trial
        .verdict
        .clone()
        .expect("a verdict after 156 tokens");
    assert_eq!(v.forwards, 2 * TRIAL_BLOCK * TRIAL_BLOCKS);
    assert!(
        v.plain_ms_per_token > 0.0 && v.drafted_ms_per_token > 0.0,
        "{v:?}"
    );

    let json = |on: bool, speedup: f64| {
        let v = HeadsVerdict {
            on,
            speedup,
            ..v.clone()
        };
        serde_json::to_string(&v).unwrap()
    };
    model.heads_trial.remember(&json(false, 0.8)).unwrap();
    let (off, _) = run_ids(&mut model, &prompt, long(Draft::Mtp, false));
    let plain = GenerateParams {
        max_tokens: 40,
        ..long(Draft::None, false)
    };
    let plain = run_ids(&mut model, &prompt, plain).0;
    let m = off.metrics.mtp.as_ref().expect("metrics.mtp");
    assert_eq!(m.ran, "plain");
    assert!(
        m.verdict.as_ref().is_some_and(|v| v.remembered && !v.on),
        "{m:?}"
    );
    assert_eq!(off.tokens, plain.tokens);
    assert_eq!(
        (off.metrics.drafted_tokens, off.metrics.target_forwards),
        (0, 40)
    );
    let (forced, _) = run_ids(&mut model, &prompt, long(Draft::Mtp, true));
    let m = forced.metrics.mtp.as_ref().expect("metrics.mtp");
    assert_eq!((m.ran, m.forced), ("drafted", true));
    assert_eq!(forced.tokens[..40], plain.tokens);
    assert!(forced.metrics.drafted_tokens > 0);

    model.heads_trial.remember(&json(true, 1.5)).unwrap();
    let (on, _) = run_ids(&mut model, &prompt, long(Draft::Mtp, false));
    assert_eq!(on.metrics.mtp.as_ref().map(|m| m.ran), Some("drafted"));
    assert!(on.metrics.drafted_tokens > 0 && on.metrics.target_forwards < 40);
    assert_eq!(on.tokens, plain.tokens);
}
