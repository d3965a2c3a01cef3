//! The Hub's other layouts of a GPT-2 folder: `vocab.json` + `merges.txt` where there is no
//! `tokenizer.json` (as many fine-tuned repositories have), and a folder that holds no model at all.

mod common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, Model, Tokenizer};

#[test]
fn vocab_json_and_merges_txt_stand_in_for_tokenizer_json() {
    let tiny = root().join(TINY);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tiny.join("tokenizer.json")).unwrap()).unwrap();
    // GPT-2's older files: vocab.json ({token: id}, <|endoftext|> among them) and merges.txt.
    let mut vocab = json["model"]["vocab"].as_object().unwrap().clone();
    vocab.insert("<|endoftext|>".into(), serde_json::json!(50256));
    let merges: Vec<String> = (json["model"]["merges"].as_array().unwrap().iter())
        .map(|m| {
            m.as_str().map(str::to_string).unwrap_or_else(|| {
                let p = m.as_array().unwrap();
                format!("{} {}", p[0].as_str().unwrap(), p[1].as_str().unwrap())
            })
        })
        .collect();
    let dir = tempdir("vocab-merges");
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(tiny.join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("vocab.json"), serde_json::to_vec(&vocab).unwrap()).unwrap();
    std::fs::write(
        dir.join("merges.txt"),
        format!("#version: 0.2\n{}\n", merges.join("\n")),
    )
    .unwrap();

    let model = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32).unwrap();
    let want = Tokenizer::from_bytes(&std::fs::read(tiny.join("tokenizer.json")).unwrap()).unwrap();
    let cases: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(fixtures().join("tokenizer_cases.json")).unwrap())
            .unwrap();
    for case in &cases {
        let text = case["text"].as_str().unwrap();
        let ids = model.tokenizer.encode(text).unwrap();
        assert_eq!(ids, want.encode(text).unwrap(), "ids of {text:?}");
        assert_eq!(model.tokenizer.decode(&ids), text);
    }

    // A broken merges.txt is a sentence.
    std::fs::write(dir.join("merges.txt"), "#version: 0.2\nĠ t h\n").unwrap();
    let err = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("merges.txt: the line \"Ġ t h\""), "{err}");
    // Neither: the error names what was looked for.
    std::fs::remove_file(dir.join("vocab.json")).unwrap();
    let err = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("tokenizer.json (nor vocab.json and merges.txt"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_folder_without_a_model_says_what_was_looked_for() {
    let dir = tempdir("empty");
    std::fs::write(dir.join("README.md"), "no model here").unwrap();
    let err = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("holds no model: looked for model.safetensors, model.safetensors.index.json (shards), pytorch_model.bin and a .gguf file"),
        "{err}"
    );
    // Two GGUF files and no safetensors: name the one to load.
    for f in ["a.gguf", "b.gguf"] {
        std::fs::copy(
            root().join("tests/fixtures/gguf/tiny-random-F32.gguf"),
            dir.join(f),
        )
        .unwrap();
    }
    let err = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(
            "holds 2 .gguf files and no model.safetensors: name the file to load (a.gguf, b.gguf)"
        ),
        "{err}"
    );
    std::fs::remove_file(dir.join("b.gguf")).unwrap();
    assert!(
        Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32).is_ok(),
        "the one .gguf of a folder"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
