//! GGUF (llama.cpp's format): the dequantizers bit for bit against the `gguf` package's
//! `dequantize`, a GGUF file alone as a model (its config and tokenizer from the metadata), the
//! exact types against transformers and against the same model's safetensors, the tied head read
//! from the finer of `token_embd` and `output`, streaming in any chunks, and broken files as
//! sentences. Fixtures: `python3 tools/make_gguf.py` (tests/fixtures/README.md).

mod common;
use common::*;
use gpt2_web::weights::ggml::GgmlType;
use gpt2_web::weights::gguf::Gguf;
use gpt2_web::weights::stream::Stream;
use gpt2_web::{BackendChoice, Config, CpuDtype, GenerateParams, Model};

const F32_FILE: &str = "tests/fixtures/gguf/tiny-random-F32.gguf";
/// Q8_0 matrices, `output.weight` in F16.
const Q8_FILE: &str = "tests/fixtures/gguf/tiny-random-Q8_0.gguf";

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn load_gguf(path: &str, dtype: CpuDtype) -> Model {
    Model::load_dir(&root().join(path), BackendChoice::Cpu, dtype)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn dequantizers_match_the_gguf_package_bit_for_bit() {
    for (name, ty) in [
        ("Q8_0", GgmlType::Q8_0),
        ("Q4_0", GgmlType::Q4_0),
        ("Q5_0", GgmlType::Q5_0),
        ("Q4_K", GgmlType::Q4K),
        ("Q5_K", GgmlType::Q5K),
        ("Q6_K", GgmlType::Q6K),
    ] {
        let raw = bytes(&format!("tests/fixtures/gguf/{name}.bin"));
        let want = read_f32(&fixtures().join(format!("gguf/{name}.f32")));
        assert_eq!(ty.name(), name);
        assert_eq!(
            ty.bytes_for(want.len() as u64),
            Some(raw.len() as u64),
            "{name}: block size"
        );
        let mut got = vec![0f32; want.len()];
        ty.dequantize(&raw, &mut got);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{name}: value {i} (block {}) is {g}, the gguf package's {w}",
                i / ty.block_len()
            );
            assert_eq!(
                ty.value(&raw, i).to_bits(),
                w.to_bits(),
                "{name}: value({i})"
            );
        }
    }
}

#[test]
fn a_gguf_file_is_a_whole_model_config_and_tokenizer_included() {
    let g = Gguf::parse_complete("tiny-random-F32.gguf", &bytes(F32_FILE)).unwrap();
    let config = Config::from_json(&g.config_json().unwrap()).unwrap();
    let want = Config::from_json(&bytes(&format!("{TINY}/config.json"))).unwrap();
    assert_eq!(config, want);

    // The tokenizer from tokenizer.ggml.* gives tokenizer.json's ids on the tokenizer corpus, both
    // built from the lists directly (what a load does) and through the tokenizer.json they make.
    let from_json =
        gpt2_web::Tokenizer::from_bytes(&bytes(&format!("{TINY}/tokenizer.json"))).unwrap();
    let written = gpt2_web::Tokenizer::from_bytes(&g.tokenizer_json().unwrap()).unwrap();
    let from_gguf = g.tokenizer().unwrap();
    for id in 0..from_json.vocab_size() as u32 {
        assert_eq!(
            from_gguf.token_bytes(id),
            from_json.token_bytes(id),
            "token {id}'s bytes"
        );
        assert_eq!(
            written.token_bytes(id),
            from_json.token_bytes(id),
            "token {id}'s bytes"
        );
    }
    let cases: Vec<serde_json::Value> =
        serde_json::from_slice(&bytes("tests/fixtures/tokenizer_cases.json")).unwrap();
    assert!(cases.len() > 40);
    for case in &cases {
        let text = case["text"].as_str().unwrap();
        let ids = from_gguf.encode(text).unwrap();
        assert_eq!(ids, from_json.encode(text).unwrap(), "ids of {text:?}");
        assert_eq!(ids, written.encode(text).unwrap(), "ids of {text:?}");
        let want: Vec<u32> = (case["ids"].as_array().unwrap().iter())
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(ids, want, "tiktoken's ids of {text:?}");
        assert_eq!(from_gguf.decode(&ids), text);
    }
    assert_eq!(from_gguf.vocab_size(), from_json.vocab_size());

    // Beyond the corpus: the project's own prose, line by line, and seeded random strings over
    // letters, digits, spaces, punctuation, accents, CJK, emoji and the special token, each given
    // the same ids by the lists' BPE (src/tokenizer/bpe.rs) as by the tokenizers crate's.
    let mut texts: Vec<String> = ["README.md", "docs/performance.md", "docs/architecture.md"]
        .iter()
        .flat_map(|f| {
            let text = String::from_utf8(bytes(f)).unwrap();
            text.lines().map(str::to_string).collect::<Vec<_>>()
        })
        .collect();
    let pieces = [
        "a",
        "e",
        "th",
        "ing",
        " ",
        "  ",
        "\n",
        "\t",
        "0",
        "7",
        "42",
        ".",
        ",",
        "'s",
        "'ll",
        "!",
        "?",
        "é",
        "ñ",
        "ß",
        "中",
        "文",
        "😀",
        "👍🏽",
        "\u{200b}",
        "<|endoftext|>",
        "Hello",
        " world",
        "'",
        "\"",
        "-",
        "_",
        "ǅ",
        "Ⅻ",
        "²",
        "\u{301}",
        "\r\n",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let mut t = String::new();
        for _ in 0..(seed % 24) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            t.push_str(pieces[(seed % pieces.len() as u64) as usize]);
        }
        texts.push(t);
    }
    assert!(texts.len() > 2500);
    for text in &texts {
        assert_eq!(
            from_gguf.encode(text).unwrap(),
            from_json.encode(text).unwrap(),
            "ids of {text:?}"
        );
    }
}

#[test]
fn f32_gguf_matches_transformers_and_the_safetensors() {
    let fx = fixture("tiny-random");
    let mut model = load_gguf(F32_FILE, CpuDtype::F32);
    let mut reference = load(TINY);
    for case in &fx.cases {
        let logits = forward_at(&mut model, &case.ids, 0).unwrap().to_vec();
        let want = case.logits();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert_close(&logits, &want, 1e-4 * scale, 1e-3, "GGUF F32 logits");
        let same = forward_at(&mut reference, &case.ids, 0).unwrap().to_vec();
        assert_eq!(
            logits, same,
            "the GGUF and the safetensors of one model differ"
        );
        let params = GenerateParams {
            max_tokens: case.greedy_ids.len(),
            ignore_eos: true,
            ..Default::default()
        };
        let (r, _) = run_ids(&mut model, &case.ids, params);
        assert_eq!(r.tokens, case.greedy_ids, "greedy from the GGUF");
    }
}

#[test]
fn q8_0_gguf_reads_the_finer_head_and_stays_close() {
    let file = bytes(Q8_FILE);
    let g = Gguf::parse_complete("tiny-random-Q8_0.gguf", &file).unwrap();
    let config = Config::from_json(&g.config_json().unwrap()).unwrap();
    let header = g.header(&config).unwrap();
    let wte = header
        .tensors
        .iter()
        .find(|t| t.name == "wte.weight")
        .unwrap();
    assert_eq!(
        wte.stored, "output.weight",
        "the F16 copy is finer than Q8_0"
    );
    assert_eq!(wte.dtype, GgmlType::F16);
    let qkv = (header.tensors.iter())
        .find(|t| t.name == "h.0.attn.c_attn.weight")
        .unwrap();
    assert_eq!(
        (qkv.dtype, qkv.transposed, qkv.shape),
        (GgmlType::Q8_0, true, [96, 288])
    );

    // Q8_0 read exactly (f32 on the CPU) is within 2.5% of the largest logit here; re-quantized to
    // the CPU's 7-bit q8 within 8% (the safetensors through q8: 4.3%).
    let fx = fixture("tiny-random");
    for (dtype, bound) in [(CpuDtype::F32, 0.025), (CpuDtype::Q8, 0.08)] {
        let mut model = load_gguf(Q8_FILE, dtype);
        for case in &fx.cases {
            let logits = forward_at(&mut model, &case.ids, 0).unwrap().to_vec();
            let want = case.logits();
            let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            assert_close(
                &logits,
                &want,
                bound * scale,
                0.0,
                &format!("Q8_0 as {dtype:?}"),
            );
        }
    }
}

/// A tensor as a stream hands it out: (name, type, shape, transposed, bytes).
type Streamed = (String, String, [usize; 2], bool, Vec<u8>);

/// Every tensor a stream hands out, in order.
fn streamed(file: &[u8], config: &Config, chunk: usize) -> Vec<Streamed> {
    let mut out = Vec::new();
    let mut stream = Stream::new("tiny-random-Q8_0.gguf", config);
    for piece in file.chunks(chunk) {
        stream
            .push(piece, &mut |name, t| {
                out.push((
                    name.to_string(),
                    t.dtype.name().to_string(),
                    t.shape,
                    t.transposed,
                    t.data.to_vec(),
                ));
                Ok(())
            })
            .unwrap();
    }
    stream.finish().unwrap();
    assert_eq!(stream.total(), Some(file.len() as u64));
    out
}

#[test]
fn streams_in_any_chunks() {
    let file = bytes(Q8_FILE);
    let g = Gguf::parse_complete("tiny-random-Q8_0.gguf", &file).unwrap();
    let config = Config::from_json(&g.config_json().unwrap()).unwrap();
    let whole = streamed(&file, &config, file.len());
    assert_eq!(whole.len(), 4 + 12 * config.n_layer);
    for chunk in [1 << 16, 4093, 7] {
        assert!(
            streamed(&file, &config, chunk) == whole,
            "chunks of {chunk} bytes"
        );
    }
}

/// The weights' stream reads the tensor table and the scalars alone: the same table, offsets and
/// scalar metadata as a full parse, every array left empty, and the same count of bytes asked
/// for while the header is still arriving.
#[test]
fn the_streams_parse_keeps_the_tables_and_leaves_the_arrays() {
    use gpt2_web::weights::gguf::{Parsed, Value};
    let file = bytes(Q8_FILE);
    let full = Gguf::parse_complete("tiny-random-Q8_0.gguf", &file).unwrap();
    let Ok(Parsed::Header(tables)) = Gguf::parse_tables("tiny-random-Q8_0.gguf", &file) else {
        panic!("the whole file is a whole header");
    };
    assert_eq!(
        format!("{:?}", tables.tensors),
        format!("{:?}", full.tensors)
    );
    assert_eq!(
        (tables.data_start, tables.file_len),
        (full.data_start, full.file_len)
    );
    let mut arrays = 0;
    for (key, v) in &full.metadata {
        match (v, &tables.metadata[key]) {
            (Value::Array(_), Value::Array(a)) => {
                arrays += 1;
                assert!(a.is_empty(), "{key}");
            }
            (Value::Strs(_), Value::Strs(a)) => {
                arrays += 1;
                assert_eq!(a.iter().count(), 0, "{key}");
            }
            (v, t) => assert_eq!(v, t, "{key}"),
        }
    }
    assert!(arrays >= 3, "tokens, token types and merges");
    for end in [
        10,
        100,
        full.data_start as usize / 2,
        full.data_start as usize - 40,
    ] {
        let need = |p: Parsed| match p {
            Parsed::Need(n) => n,
            Parsed::Header(_) => panic!("{end} bytes are not the whole header"),
        };
        let a = need(Gguf::parse("f", &file[..end]).unwrap());
        assert_eq!(
            need(Gguf::parse_tables("f", &file[..end]).unwrap()),
            a,
            "after {end} bytes"
        );
    }
}

fn load_error(file: &[u8]) -> String {
    let dir = tempdir();
    let path = dir.join("model.gguf");
    std::fs::write(&path, file).unwrap();
    let err = Model::load_dir(&path, BackendChoice::Cpu, CpuDtype::Q8)
        .err()
        .expect("a broken file must not load")
        .to_string();
    let _ = std::fs::remove_dir_all(&dir);
    err
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "gpt2-web-gguf-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn broken_files_are_sentences() {
    let file = bytes(Q8_FILE);
    let g = Gguf::parse_complete("tiny-random-Q8_0.gguf", &file).unwrap();
    // Truncated anywhere: in the header, in a tensor, before the last byte.
    for cut in [
        4,
        20,
        1000,
        g.data_start as usize - 1,
        g.data_start as usize + 100,
        file.len() - 1,
    ] {
        let err = load_error(&file[..cut]);
        assert!(
            err.contains("truncated") || err.contains("ended after"),
            "cut at {cut}: {err}"
        );
    }
    // A version from the future.
    let mut v = file.clone();
    v[4] = 9;
    assert!(
        load_error(&v).contains("GGUF version 9"),
        "{}",
        load_error(&v)
    );
    // Another architecture.
    let at = find(&file, b"gpt2").unwrap();
    let mut arch = file.clone();
    arch[at..at + 4].copy_from_slice(b"gptj");
    let err = load_error(&arch);
    assert!(err.contains("architecture is \"gptj\""), "{err}");
    // A type gpt2-web does not read: a matrix's (Q8_0 = 8) set to IQ2_XXS (16).
    let name = find(&file, b"blk.0.attn_qkv.weight").unwrap();
    let type_at = name + "blk.0.attn_qkv.weight".len() + 4 + 2 * 8;
    assert_eq!(file[type_at], 8, "the type field");
    let mut ty = file.clone();
    ty[type_at] = 16;
    let err = load_error(&ty);
    assert!(
        err.contains("\"blk.0.attn_qkv.weight\" has type IQ2_XXS, which gpt2-web does not read"),
        "{err}"
    );
    // A missing tensor: rename one.
    let at = find(&file, b"blk.1.ffn_down.weight").unwrap();
    let mut missing = file.clone();
    missing[at..at + 4].copy_from_slice(b"blk_");
    let err = load_error(&missing);
    assert!(
        err.contains("missing tensor \"blk.1.ffn_down.weight\""),
        "{err}"
    );
}

/// A broken GGUF file's error names the file as it was loaded (here `gpt2.Q8_0.gguf`), never
/// `model.safetensors`: cut in its header, cut in its tensors, with a tokenizer that is not
/// GPT-2's, and streamed in chunks as the browser feeds it.
#[test]
fn a_broken_gguf_file_names_itself() {
    let file = bytes(Q8_FILE);
    let g = Gguf::parse_complete("gpt2.Q8_0.gguf", &file).unwrap();
    let dir = tempdir();
    let path = dir.join("gpt2.Q8_0.gguf");
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let e = Model::load_dir(&path, BackendChoice::Cpu, CpuDtype::Q8).err();
        e.expect("a broken file must not load")
    };
    let named = |e: &gpt2_web::Error, code: &str| {
        let text = e.to_string();
        assert!(text.starts_with("gpt2.Q8_0.gguf: "), "{text}");
        assert_eq!(e.code(), code, "{text}");
    };
    for cut in [1000, g.data_start as usize + 100, file.len() - 1] {
        named(&load(&file[..cut]), "weights");
    }
    // The tokenizer's model, a string after its key, its type (u32) and its length (u64).
    let key = b"tokenizer.ggml.model";
    let at = find(&file, key).unwrap() + key.len() + 4 + 8;
    assert_eq!(&file[at..at + 4], b"gpt2");
    let mut tok = file.clone();
    tok[at..at + 4].copy_from_slice(b"bpe2");
    let e = load(&tok);
    named(&e, "tokenizer");
    assert!(e.to_string().contains("tokenizer is \"bpe2\""), "{e}");
    // As the worker streams it: the header's bytes for the tokenizer, then the file in chunks.
    let config = g.config_json().unwrap();
    let header = &file[..g.data_start as usize];
    let cut = &file[..file.len() - 1];
    let e = pollster::block_on(async {
        let mut loader = gpt2_web::model::Loader::new(
            &config,
            header,
            "gpt2.Q8_0.gguf",
            BackendChoice::Cpu,
            CpuDtype::Q8,
        )
        .await?;
        for chunk in cut.chunks(4093) {
            loader.push(chunk)?;
        }
        loader.finish(None).await
    })
    .err()
    .expect("a truncated stream must not load");
    named(&e, "weights");
    let _ = std::fs::remove_dir_all(&dir);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
