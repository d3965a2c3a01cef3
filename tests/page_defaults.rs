//! The page's first Generate shows text: with the defaults www/index.html ships (prompt, max
//! tokens, temperature, top-k, top-p, min-p, repetition penalty), the demo model's output has at
//! least 100 visible (non-whitespace) characters on average over 20 seeds, and greedy too. The
//! defaults are read from the page itself, so a change there is measured here.

mod common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Model};

/// The text between `start` and the next `end` after it in the page.
fn between<'a>(page: &'a str, start: &str, end: &str) -> &'a str {
    let i = page
        .find(start)
        .unwrap_or_else(|| panic!("index.html has no {start}"))
        + start.len();
    &page[i..i + page[i..].find(end).unwrap()]
}

/// The `value` of the input `id`.
fn value(page: &str, id: &str) -> f64 {
    let tag = between(page, &format!("id=\"{id}\""), ">");
    let v = between(tag, "value=\"", "\"");
    v.parse()
        .unwrap_or_else(|_| panic!("#{id}: value {v:?} is not a number"))
}

fn visible(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

#[test]
fn the_pages_defaults_give_visible_text_for_every_seed_and_greedy() {
    let page = std::fs::read_to_string(root().join("www/index.html")).unwrap();
    let prompt = between(&page, "<textarea id=\"prompt\" rows=\"3\">", "</textarea>")
        .replace("&#10;", "\n")
        .replace("&amp;", "&");
    let defaults = GenerateParams {
        max_tokens: value(&page, "max-tokens") as usize,
        temperature: value(&page, "temperature") as f32,
        top_k: value(&page, "top-k") as usize,
        top_p: value(&page, "top-p") as f32,
        min_p: value(&page, "min-p") as f32,
        repetition_penalty: value(&page, "repetition-penalty") as f32,
        ..Default::default()
    };
    assert!(defaults.temperature > 0.0, "the page samples by default");
    // As the page loads it: the demo model in 8 bits.
    let dir = root().join(DEMO);
    let mut m = Model::load_dir(&dir, BackendChoice::Cpu, CpuDtype::Q8).unwrap();
    let mut run = |p: GenerateParams| generate(&mut m, &prompt, p, &mut |_| {}, &|| false).unwrap();
    let texts: Vec<String> = (0..20)
        .map(|seed| {
            run(GenerateParams {
                seed,
                ..defaults.clone()
            })
            .text
        })
        .collect();
    let mean = texts.iter().map(|t| visible(t)).sum::<usize>() as f64 / 20.0;
    assert!(
        mean >= 100.0,
        "{mean} visible characters on average: {texts:?}"
    );
    let distinct: std::collections::BTreeSet<&String> = texts.iter().collect();
    assert!(distinct.len() >= 18, "sampling repeats itself: {texts:?}");
    let greedy = run(GenerateParams {
        temperature: 0.0,
        ..defaults.clone()
    })
    .text;
    assert!(visible(&greedy) >= 100, "greedy: {greedy:?}");
}
