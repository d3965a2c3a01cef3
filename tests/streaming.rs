//! Loading while the weights stream in (`model::Loader`): the same model whatever the chunks
//! (one byte at a time, odd sizes, the whole file), on the CPU in both formats and on the GPU; a
//! stream that ends early or goes wrong is a sentence and no model; a fall-back from a lost GPU
//! reads the weights again from a `Source` instead of a kept copy.

mod common;
mod gpu_common;

use common::{fixture, root, DEMO, TINY};
use gpt2_web::backend::cpu::CpuDtype;
use gpt2_web::model::{Loader, Reload};
use gpt2_web::weights::stream::{NextChunk, Piece, Source};
use gpt2_web::{Backend, BackendChoice, Model};
use pollster::block_on;

struct Files {
    config: Vec<u8>,
    weights: Vec<u8>,
    tokenizer: Vec<u8>,
}

fn files(dir: &str) -> Files {
    let read = |f: &str| std::fs::read(root().join(dir).join(f)).unwrap();
    Files {
        config: read("config.json"),
        weights: read("model.safetensors"),
        tokenizer: read("tokenizer.json"),
    }
}

/// The model from `f` with the weights pushed in chunks of the sizes `sizes` cycles through.
fn streamed(
    f: &Files,
    choice: BackendChoice,
    dtype: CpuDtype,
    sizes: &[usize],
) -> gpt2_web::Result<Model> {
    let mut loader = block_on(Loader::new(
        &f.config,
        &f.tokenizer,
        "model.safetensors",
        choice,
        dtype,
    ))?;
    let mut rest = &f.weights[..];
    for &n in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        loader.push(chunk)?;
        rest = tail;
    }
    block_on(loader.finish(None))
}

fn logits(model: &mut Model, ids: &[u32]) -> Vec<f32> {
    block_on(model.predict(ids, 0)).unwrap().to_vec()
}

#[test]
fn any_chunking_gives_the_model_of_the_whole_file() {
    for (name, dir) in [("tiny-random", TINY), ("gpt2-shakespeare", DEMO)] {
        let f = files(dir);
        let ids = &fixture(name).cases[1].ids;
        for dtype in [CpuDtype::F32, CpuDtype::Q8] {
            let whole = block_on(Model::from_bytes(
                &f.config,
                "model.safetensors",
                f.weights.clone(),
                &f.tokenizer,
                BackendChoice::Cpu,
                dtype,
            ));
            let want = logits(&mut whole.unwrap(), ids);
            for sizes in [&[1usize][..], &[7, 4093, 1], &[65536], &[f.weights.len()]] {
                if sizes == [1] && dir == DEMO {
                    continue; // 33 MB a byte at a time: tiny-random covers it
                }
                let mut m = streamed(&f, BackendChoice::Cpu, dtype, sizes).unwrap();
                assert!(
                    logits(&mut m, ids) == want,
                    "{name} {dtype:?} in chunks of {sizes:?}"
                );
            }
        }
    }
}

#[test]
fn a_stream_that_ends_early_or_is_corrupt_is_a_sentence() {
    let f = files(TINY);
    let cut = |n: usize| Files {
        config: f.config.clone(),
        weights: f.weights[..n].to_vec(),
        tokenizer: f.tokenizer.clone(),
    };
    let err = |f: &Files| {
        streamed(f, BackendChoice::Cpu, CpuDtype::Q8, &[1000])
            .err()
            .expect("no model")
            .to_string()
    };
    let e = err(&cut(5));
    assert!(e.contains("before its header was complete"), "{e}");
    let e = err(&cut(f.weights.len() / 2));
    assert!(
        e.contains("the weights file ended after")
            && e.contains("in tensor \"")
            && e.contains("truncated, or the transfer broke off"),
        "{e}"
    );
    let mut bad = cut(f.weights.len());
    bad.weights[0] = 0xff; // a header length of gigabytes
    assert!(
        err(&bad).contains("not a valid safetensors file"),
        "{}",
        err(&bad)
    );
    let mut bad = cut(f.weights.len());
    bad.weights[9] = b'!'; // the header's JSON broken
    assert!(err(&bad).contains("not a valid safetensors file"));
}

/// The weights file read again in chunks, counting how often it was opened.
struct Chunks {
    bytes: Vec<u8>,
    at: usize,
    opened: std::rc::Rc<std::cell::Cell<usize>>,
}

impl Source for Chunks {
    fn next_chunk(&mut self) -> NextChunk<'_> {
        Box::pin(async move {
            if self.at == 0 {
                self.opened.set(self.opened.get() + 1);
            }
            if self.at >= self.bytes.len() {
                self.at = 0;
                return Ok(Piece::End);
            }
            let n = 10_000.min(self.bytes.len() - self.at);
            self.at += n;
            Ok(Piece::Bytes(self.bytes[self.at - n..self.at].to_vec()))
        })
    }
}

#[test]
fn streamed_onto_the_gpu_and_back_to_the_cpu_from_a_source() {
    if gpu_common::gpu().is_none() {
        return;
    }
    let f = files(DEMO);
    let fx = fixture("gpt2-shakespeare");
    let case = &fx.cases[1];
    let mut cpu = streamed(&f, BackendChoice::Cpu, CpuDtype::F32, &[65536]).unwrap();
    let mut loader = block_on(Loader::new(
        &f.config,
        &f.tokenizer,
        "model.safetensors",
        BackendChoice::WebGpu,
        CpuDtype::F32,
    ))
    .unwrap();
    for chunk in f.weights.chunks(100_003) {
        loader.push(chunk).unwrap();
    }
    let opened = std::rc::Rc::new(std::cell::Cell::new(0));
    let source = Chunks {
        bytes: f.weights.clone(),
        at: 0,
        opened: opened.clone(),
    };
    let mut gpu = block_on(loader.finish(Some(Reload::Source(Box::new(source))))).unwrap();
    assert_eq!(gpu.backend().name(), "webgpu");
    let (a, b) = (logits(&mut gpu, &case.ids), logits(&mut cpu, &case.ids));
    common::assert_close(&a, &b, 1e-3, 1e-3, "streamed onto the GPU vs the CPU");
    // Lose the device mid-generation: the model is rebuilt from the source, read once more.
    let params = gpt2_web::GenerateParams {
        max_tokens: 24,
        ignore_eos: true,
        ..Default::default()
    };
    let lose = |m: &Model| match &m.backend() {
        Backend::WebGpu(b) => b.lose_device(),
        Backend::Cpu(_) => unreachable!(),
    };
    let (r, _) = common::generate_midway(&mut gpu, &case.ids, params, 8, &lose);
    assert_eq!(gpu.backend().name(), "cpu");
    assert_eq!(opened.get(), 1, "the weights were read again once");
    assert_eq!(r.tokens, case.greedy_ids);
}

/// A native load reports each tensor as it is converted (the CLI's progress bar): every tensor of
/// the file once, the bytes taken in growing to the tensors' sum, out of the file's size.
#[test]
fn a_native_load_reports_each_tensor_as_it_is_converted() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<(String, u64, u64)>>> = Arc::default();
    let hook = {
        let seen = seen.clone();
        Arc::new(move |tensor: &str, done, total| {
            seen.lock().unwrap().push((tensor.to_string(), done, total));
        })
    };
    let dir = root().join(TINY);
    Model::load_dir_reporting(&dir, BackendChoice::Cpu, CpuDtype::F32, false, Some(hook)).unwrap();
    let seen = seen.lock().unwrap();
    let file = std::fs::metadata(dir.join("model.safetensors"))
        .unwrap()
        .len();
    let config = gpt2_web::Config::from_json(&files(TINY).config).unwrap();
    assert_eq!(
        seen.len(),
        4 + 12 * config.n_layer,
        "wte, wpe, ln_f's two and 12 per block"
    );
    let names: std::collections::HashSet<_> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names.len(), seen.len(), "each tensor once");
    assert!(seen.iter().all(|s| s.2 == file), "out of the file's size");
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "growing");
    let last = seen.last().unwrap().1;
    assert_eq!(
        last,
        4 * config.n_params() as u64,
        "every tensor's f32 bytes"
    );
}
