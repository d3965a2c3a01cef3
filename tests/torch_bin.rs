//! `pytorch_model.bin` (the zip archive `torch.save` writes), read without running anything: the
//! files in tests/fixtures/torch/ were written by torch itself (tools/make_pytorch_bin.py
//! --fixtures) from the tiny model, f32 and f16 with column-major (transposed) matrices, and a
//! file in the format before torch 1.6.

mod common;
use common::*;
use gpt2_web::{BackendChoice, Config, CpuDtype, Model};

fn bin(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("torch").join(name)).unwrap()
}

/// A folder with the tiny model's config.json and tokenizer.json and `weights` as
/// pytorch_model.bin.
fn folder(tag: &str, weights: &[u8]) -> std::path::PathBuf {
    let dir = tempdir(&format!("bin-{tag}"));
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(root().join(TINY).join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("pytorch_model.bin"), weights).unwrap();
    dir
}

#[test]
fn f32_bin_gives_the_logits_of_the_safetensors() {
    let dir = folder("f32", &bin("tiny-random-f32.bin"));
    let mut model = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32).unwrap();
    let mut reference = load(TINY);
    for case in &fixture("tiny-random").cases {
        let got = logits(&mut model, &case.ids);
        assert_eq!(got, logits(&mut reference, &case.ids), "{:?}", case.prompt);
        let want = case.logits();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert_close(
            &got,
            &want,
            1e-4 * scale,
            1e-3,
            "pytorch_model.bin vs transformers",
        );
        let params = gpt2_web::GenerateParams {
            max_tokens: case.greedy_ids.len(),
            ignore_eos: true,
            ..Default::default()
        };
        let (r, _) = run_ids(&mut model, &case.ids, params);
        assert_eq!(r.tokens, case.greedy_ids, "greedy from the .bin");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn f16_bin_with_transposed_matrices_stays_close() {
    let dir = folder("f16", &bin("tiny-random-f16-transposed.bin"));
    let mut model = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32).unwrap();
    for case in &fixture("tiny-random").cases {
        let got = logits(&mut model, &case.ids);
        let want = case.logits();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        // f16 weights: about 3 decimal digits.
        assert_close(
            &got,
            &want,
            5e-3 * scale,
            1e-2,
            "f16 pytorch_model.bin vs transformers",
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every tensor the stream hands out, by name, as f32 in transformers' layout.
fn streamed(file: &[u8], chunk: usize) -> Vec<(String, Vec<f32>)> {
    let config =
        Config::from_json(&std::fs::read(root().join(TINY).join("config.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut stream = gpt2_web::weights::stream::Stream::new("pytorch_model.bin", &config);
    let mut sink = |name: &str, t: gpt2_web::weights::TensorRef| {
        out.push((name.to_string(), t.try_to_f32()?));
        Ok(())
    };
    for c in file.chunks(chunk) {
        stream.push(c, &mut sink).unwrap();
    }
    stream.finish().unwrap();
    assert_eq!(stream.bytes(), file.len() as u64);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn streams_in_any_chunks() {
    for name in ["tiny-random-f32.bin", "tiny-random-f16-transposed.bin"] {
        let file = bin(name);
        let whole = streamed(&file, file.len());
        assert_eq!(
            whole.len(),
            4 + 2 * 12,
            "every tensor GPT-2 needs, none else"
        );
        for chunk in [1, 3, 64, 777, 65_536] {
            assert!(
                streamed(&file, chunk) == whole,
                "{name} in chunks of {chunk}"
            );
        }
    }
    // The f16 file holds the f32 one's values rounded, transposed back into place.
    let (a, b) = (
        streamed(&bin("tiny-random-f32.bin"), 1 << 20),
        streamed(&bin("tiny-random-f16-transposed.bin"), 1 << 20),
    );
    for ((na, va), (nb, vb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        let rounded: Vec<f32> = va
            .iter()
            .map(|&x| half::f16::from_f32(x).to_f32())
            .collect();
        assert_eq!(&rounded, vb, "{na}");
    }
}

fn load_error(weights: &[u8]) -> String {
    let dir = folder("broken", weights);
    let err = match Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32) {
        Ok(_) => "loaded".to_string(),
        Err(e) => e.to_string(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    err
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn broken_files_are_sentences() {
    let file = bin("tiny-random-f32.bin");
    // Cut anywhere: in the pickle, in a record, in a storage, in a descriptor, in the directory.
    let config =
        Config::from_json(&std::fs::read(root().join(TINY).join("config.json")).unwrap()).unwrap();
    for cut in (4..file.len())
        .step_by(997)
        .chain([30, 64, 700, file.len() - 1])
    {
        let mut stream = gpt2_web::weights::stream::Stream::new("pytorch_model.bin", &config);
        let ended = stream
            .push(&file[..cut], &mut |_, _| Ok(()))
            .and_then(|()| stream.finish());
        let err = ended
            .expect_err(&format!("cut at {cut} of {}", file.len()))
            .to_string();
        assert!(
            err.starts_with("pytorch_model.bin: "),
            "cut at {cut}: {err}"
        );
    }
    let err = load_error(&file[..file.len() / 2]);
    assert!(
        err.starts_with("pytorch_model.bin: it ended after") && err.contains("truncated"),
        "{err}"
    );

    // A global that is not a state dict's is refused, not called.
    let mut evil = file.clone();
    let at = find(&evil, b"collections\nOrderedDict");
    evil[at..at + 23].copy_from_slice(b"subprocess\nPopenXXXXXXX");
    let err = load_error(&evil);
    assert!(
        err.contains("data.pkl calls subprocess.PopenXXXXXXX, which a state dict never does"),
        "{err}"
    );

    // A compressed entry (a re-packed archive).
    let mut packed = file.clone();
    packed[8] = 8; // the first local header's method: deflate
    let err = load_error(&packed);
    assert!(err.contains("is compressed (method 8)"), "{err}");

    // Torch's format before 1.6.
    let err = load_error(&bin("legacy.bin"));
    assert!(
        err.starts_with("pytorch_model.bin: it is in torch's format from before version 1.6"),
        "{err}"
    );

    // A tensor of the wrong shape: the pickle says (2, 96) where config.json means (64, 96).
    let mut shaped = file.clone();
    let at = find(&shaped, b"transformer.wpe.weight");
    // After the name: the storage tuple, the offset, then the size tuple as BININT1 64 BININT1 96.
    let size = at + find(&shaped[at..], b"K\x40K\x60");
    shaped[size + 1] = 2;
    let err = load_error(&shaped);
    assert!(
        err.contains("tensor \"transformer.wpe.weight\" has shape [2, 96], expected [64, 96]"),
        "{err}"
    );
}

/// A broken `torch.save` archive's error names the file as it was loaded: `pytorch_model.bin` in
/// a folder, or any name given as the file itself.
#[test]
fn a_broken_bin_names_itself() {
    let file = bin("tiny-random-f32.bin");
    for cut in [100, file.len() / 2, file.len() - 1] {
        let dir = folder("named", &file[..cut]);
        let e = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::F32)
            .err()
            .expect("a broken file must not load");
        assert!(
            e.to_string().starts_with("pytorch_model.bin: "),
            "cut at {cut}: {e}"
        );
        assert_eq!(e.code(), "weights");
        // The same file by another name, given itself.
        std::fs::rename(dir.join("pytorch_model.bin"), dir.join("gpt2-tiny.bin")).unwrap();
        let e = Model::load_dir(
            &dir.join("gpt2-tiny.bin"),
            BackendChoice::Cpu,
            CpuDtype::F32,
        )
        .err()
        .expect("a broken file must not load");
        assert!(
            e.to_string().starts_with("gpt2-tiny.bin: "),
            "cut at {cut}: {e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_pickle_reader_runs_nothing_and_waits_for_stop() {
    use gpt2_web::weights::torch::pickle::state_dict;
    // `os.system("ls")`: refused by name, never called; the error names the file.
    let p = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85R.";
    let e = state_dict("pytorch_model.bin", p).unwrap_err().to_string();
    assert!(
        e.starts_with("pytorch_model.bin: ") && e.contains("calls os.system"),
        "{e}"
    );
    // An empty dict: more bytes wanted until its STOP, then its length.
    let p = b"\x80\x02}q\x00.";
    assert!(state_dict("f.bin", &p[..3]).unwrap().is_none());
    let (t, n) = state_dict("f.bin", p).unwrap().unwrap();
    assert!(t.is_empty());
    assert_eq!(n, p.len());
}

#[test]
fn the_fuzzers_bin_seed_is_a_model() {
    // tools/fuzz/seeds/load_model/tiny-bin: a seed that fails to load would fuzz only the error
    // paths.
    let seed = std::fs::read(root().join("tools/fuzz/seeds/load_model/tiny-bin")).unwrap();
    let n = u16::from_le_bytes([seed[0], seed[1]]) as usize;
    let (config, weights) = (&seed[2..2 + n], &seed[2 + n..]);
    let built = Model::from_bytes(
        config,
        "pytorch_model.bin",
        weights.to_vec(),
        gpt2_web::fuzzing::TOKENIZER_JSON,
        BackendChoice::Cpu,
        CpuDtype::F32,
    );
    let mut model = pollster::block_on(built).unwrap();
    assert!(logits(&mut model, &[0, 1]).iter().all(|x| x.is_finite()));
    gpt2_web::fuzzing::load_model(&seed);
}

#[test]
fn a_storage_entry_of_another_size_is_refused_before_memory_is_taken() {
    // Found by the weights_stream fuzzer: a size field of 4 GB on a storage the pickle gives 512
    // bytes made the reader reserve 4 GB for it as it arrived. The entry's size must be its
    // storage's, in both directions.
    let input = std::fs::read(fixtures().join("fuzz/weights_stream/storage-size-4gb")).unwrap();
    let (config, weights) = gpt2_web::fuzzing::two_files(&input).unwrap();
    let config = Config::from_json(config).unwrap();
    let mut stream = gpt2_web::weights::stream::Stream::new("pytorch_model.bin", &config);
    let err = stream
        .push(weights, &mut |_, _| Ok(()))
        .and_then(|()| stream.finish())
        .expect_err("a storage of 4 GB in a 10 kB file")
        .to_string();
    eprintln!("{err}");
    assert!(
        err.starts_with("pytorch_model.bin: ") && err.contains("bytes, more than its storage's"),
        "{err}"
    );
    // And a storage's local header saying fewer bytes than the pickle gives it (torch writes
    // 0 there, the size following in a descriptor).
    let mut short = bin("tiny-random-f32.bin");
    let at = find(&short, b"tiny-random-f32/data/0") - 30 + 18; // the compressed size
    short[at..at + 4].copy_from_slice(&92u32.to_le_bytes());
    let err = load_error(&short);
    assert!(
        err.contains("holds 92 bytes, less than its storage's 1152"),
        "{err}"
    );
}
