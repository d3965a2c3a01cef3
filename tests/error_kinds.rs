//! Each kind of error carries its stable `code` (what the worker and the JS API's errors carry,
//! `Gpt2ErrorCode` in www/api/gpt2.d.ts): memory refused, the memory budget, the engine used out of
//! turn, bad ids, none of them the catch-all `backend`.

mod common;
use common::*;
use gpt2_web::budget::Footprint;
use gpt2_web::{Config, CpuDtype};

#[test]
fn memory_that_cannot_be_had_is_memory() {
    let e = gpt2_web::platform::try_zeroed::<f32>(usize::MAX / 2, "a test buffer").unwrap_err();
    assert_eq!(e.code(), "memory");
    assert!(
        e.to_string()
            .starts_with("out of memory: a test buffer needs"),
        "{e}"
    );
}

#[test]
fn a_model_past_the_budget_is_budget() {
    let config =
        Config::from_json(&std::fs::read(root().join(TINY).join("config.json")).unwrap()).unwrap();
    let footprint = Footprint::streamed_cpu(&config, CpuDtype::F32).unwrap();
    let e = footprint
        .check(Some((1 << 10, "a test limit")))
        .unwrap_err();
    assert_eq!(e.code(), "budget");
    assert!(e.to_string().contains("more than a test limit"), "{e}");
}

#[test]
fn the_engine_used_out_of_turn_is_state_and_bad_ids_are_param() {
    let mut model = load(TINY);
    let e = pollster::block_on(model.kv_copy(7, 0, 1)).unwrap_err();
    assert_eq!(e.code(), "state", "{e}");
    let e = model.more_logits(0, 1).unwrap_err();
    assert_eq!(e.code(), "state", "{e}");
    let e = forward_at(&mut model, &[], 0).unwrap_err();
    assert_eq!(e.code(), "param", "{e}");
    assert_eq!(e.to_string(), "invalid ids: nothing to run: no token ids");
}
