//! What the GPU tests share: finding an adapter (failing in CI when there is none, never
//! skipping silently), seeded inputs, and the closeness check.
#![allow(dead_code)]

use gpt2_web::backend::gpu::{Context, GpuOptions};
use std::io::Write;

/// Whether a missing adapter must fail the test run.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Handles "no GPU": in CI (CI=true) the test fails; elsewhere it prints a loud note and the
/// caller returns. `what` is the error that showed the GPU is missing.
pub fn no_gpu(what: &str) {
    if in_ci() {
        panic!(
            "CI=true but the GPU tests found no adapter: {what}\n\
             (CI needs Mesa's software Vulkan: apt-get install mesa-vulkan-drivers)"
        );
    }
    // Straight to stderr: the test harness captures eprintln! of passing tests, and this note
    // must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "\n########################################################################\n\
         ## GPU TEST NOT RUN: {what}\n\
         ## Install mesa-vulkan-drivers (lavapipe) to run it; in CI this fails.\n\
         ########################################################################\n"
    );
}

/// A device with the adapter's own limits, or `None` after `no_gpu`.
pub fn gpu() -> Option<Context> {
    match pollster::block_on(Context::new(&GpuOptions::default())) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            no_gpu(&e.to_string());
            None
        }
    }
}

/// Seeded inputs from the sampler's portable generator, the same on every machine.
pub struct Rng(gpt2_web::sampling::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(gpt2_web::sampling::Rng::new(seed))
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `n` values uniform in [-scale, scale).
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32() * scale).collect()
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next_u64() % n as u64) as u32
    }
}

/// Asserts |got - want| <= atol + rtol·|want| elementwise, naming the worst element.
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f64], atol: f64, rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let excess = (g as f64 - w).abs() - (atol + rtol * w.abs());
        if !g.is_finite() || excess > worst.map_or(0.0, |(_, e)| e) {
            worst = Some((i, if g.is_finite() { excess } else { f64::INFINITY }));
        }
    }
    if let Some((i, _)) = worst {
        panic!(
            "{what}: element {i} is {} but the reference is {} (atol {atol}, rtol {rtol})",
            got[i], want[i]
        );
    }
}
