//! `gpt2 generate`'s flags for the generate options, made from their one definition
//! (src/generate/options.rs `OPTIONS`): each option's flag, help and default come from the table,
//! so an option added there is a flag here. A value reads as JSON (`0.8`, `true`) or, when it is
//! not JSON, as a string (`never`); the table's `set` checks it. An on-off option that is on by
//! default is turned off by `--no-NAME`, one that is off turned on by `--NAME`. `--draft` also
//! takes a draft model's folder (the CLI loads it). `-n` (`--max-tokens`) and `-s` (`--seed`) are
//! llama.cpp's short flags; `--n` is the number of choices.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use gpt2_web::{GenerateParams, Kind, OptionSpec, Scope, OPTIONS};
use serde_json::Value;

/// The generate options as given on the command line.
pub struct OptionFlags {
    /// Every option but `draft`, over the defaults.
    pub params: GenerateParams,
    /// `--draft` as given: a drafter's name or a draft model's folder.
    pub draft: Option<String>,
}

fn flag(name: &str) -> String {
    name.replace('_', "-")
}

/// The options with a flag: all but the JS API's own.
fn cli_options() -> impl Iterator<Item = &'static OptionSpec> {
    OPTIONS.iter().filter(|o| o.scope == Scope::All)
}

/// An on-off option's default.
fn on_by_default(o: &OptionSpec) -> bool {
    GenerateParams::default().get(o.name) == Some(Value::Bool(true))
}

impl Args for OptionFlags {
    fn augment_args(cmd: Command) -> Command {
        let d = GenerateParams::default();
        cli_options().fold(cmd, |cmd, o| {
            let arg = Arg::new(o.name).help(o.doc);
            let arg = match o.kind {
                Kind::Flag if on_by_default(o) => arg.long(format!("no-{}", flag(o.name))),
                Kind::Flag => arg.long(flag(o.name)),
                Kind::Texts => arg.long(flag(o.name)).value_name("TEXT"),
                Kind::Value => {
                    let default = match d.get(o.name) {
                        Some(Value::String(s)) => s,
                        Some(v) => v.to_string(),
                        None => String::new(),
                    };
                    let arg = arg.long(flag(o.name)).default_value(default);
                    match o.name {
                        "draft" => arg.value_name("prompt-lookup|DIR"),
                        // llama.cpp's short flags: -n its n_predict, -s its seed.
                        "max_tokens" => arg.short('n').allow_negative_numbers(true),
                        "seed" => arg.short('s').allow_negative_numbers(true),
                        _ => arg.allow_negative_numbers(true),
                    }
                }
            };
            cmd.arg(arg.action(match o.kind {
                Kind::Flag => ArgAction::SetTrue,
                Kind::Texts => ArgAction::Append,
                Kind::Value => ArgAction::Set,
            }))
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for OptionFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut params = GenerateParams::default();
        let mut draft = None;
        for o in cli_options() {
            let texts = || m.get_many::<String>(o.name).into_iter().flatten();
            let value = match o.kind {
                Kind::Flag if m.get_flag(o.name) => Value::Bool(!on_by_default(o)),
                Kind::Flag => continue,
                Kind::Texts => Value::from(texts().map(|s| s.as_str()).collect::<Vec<_>>()),
                Kind::Value if o.name == "draft" => {
                    draft = texts().next().cloned();
                    continue;
                }
                Kind::Value => match texts().next() {
                    Some(s) => serde_json::from_str(s).unwrap_or(Value::from(s.as_str())),
                    None => continue,
                },
            };
            params.set(o.name, &value).map_err(|e| {
                let msg = match e {
                    gpt2_web::Error::Param { msg, .. } => msg,
                    other => other.to_string(),
                };
                let msg = format!("--{}: {msg}", flag(o.name));
                clap::Error::raw(clap::error::ErrorKind::InvalidValue, msg)
            })?;
        }
        Ok(OptionFlags { params, draft })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
