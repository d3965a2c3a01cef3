//! The files generated from the generate options' one definition (src/generate/options.rs):
//! www/api/options.js and the marked block of www/api/gpt2.d.ts must be what the table renders today.
//! `GPT2_BLESS=1 cargo test --test generated` rewrites them after a change to the table.

use gpt2_web::generate::generated::{render_dts, render_js};
use gpt2_web::{GenerateParams, OPTIONS};
use std::path::Path;

const START: &str = "// <generated: src/generate/options.rs>\n";
const END: &str = "// </generated>\n";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `want` with the file's text (or rewrites it under GPT2_BLESS=1).
fn check(file: &str, have: &str, want: &str, write: impl FnOnce() -> String) {
    if std::env::var_os("GPT2_BLESS").is_some() {
        std::fs::write(root().join(file), write()).unwrap();
        return;
    }
    assert!(
        have == want,
        "{file} is stale: the generate options changed; run GPT2_BLESS=1 cargo test --test generated"
    );
}

#[test]
fn www_options_js_is_fresh() {
    let file = "www/api/options.js";
    let have = std::fs::read_to_string(root().join(file)).unwrap_or_default();
    let want = render_js();
    check(file, &have, &want, || want.clone());
}

#[test]
fn gpt2_d_ts_block_is_fresh() {
    let file = "www/api/gpt2.d.ts";
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let (a, b) = (text.find(START), text.find(END));
    let (Some(a), Some(b)) = (a, b) else {
        panic!("{file} has no '{}' … '{}' block", START.trim(), END.trim());
    };
    let have = &text[a + START.len()..b];
    let want = render_dts();
    check(file, have, &want, || {
        format!("{}{START}{want}{}", &text[..a], &text[b..])
    });
}

#[test]
fn every_option_reads_back_its_default_and_names_itself_when_wrong() {
    let d = GenerateParams::default();
    for o in OPTIONS {
        let v = d.get(o.name).expect("each option has a value");
        let mut p = GenerateParams::default();
        p.set(o.js, &v).unwrap();
        assert_eq!(p, d, "{}: its default does not read back", o.name);
        // An object is no option's value: the error names the option as Rust spells it.
        let e = p.set(o.js, &serde_json::json!({ "x": 1 })).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!("invalid {}:", o.name)),
            "{e}"
        );
    }
    assert_eq!(
        GenerateParams::from_json(&serde_json::Value::Null).unwrap(),
        d
    );
}

#[test]
fn the_limits_are_checked_by_validate() {
    for o in OPTIONS.iter().filter(|o| o.limits.is_some()) {
        let l = o.limits.unwrap();
        let mut p = GenerateParams::default();
        let above = serde_json::json!(l.max + 1.0);
        // A whole-number option refuses a fraction before its limits.
        if p.set(o.name, &above).is_ok() {
            let e = p.validate().unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("invalid {}: ", o.name)) && e.contains("is not in"),
                "{e}"
            );
        }
    }
    let e = GenerateParams::from_json(&serde_json::json!({ "topP": 0 })).unwrap_err();
    assert_eq!(e.to_string(), "invalid top_p: 0 is not in (0, 1]");
    let e = GenerateParams::from_json(&serde_json::json!({ "maxTokenz": 3 })).unwrap_err();
    assert!(
        e.to_string()
            .contains("unknown option \"maxTokenz\"; the options are maxTokens"),
        "{e}"
    );
    let p = GenerateParams::from_json(&serde_json::json!({ "stop": "\n", "seed": 5 })).unwrap();
    assert_eq!((p.stop, p.seed), (vec!["\n".to_string()], 5));
}
