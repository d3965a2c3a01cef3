//! `gpt2 generate`'s flags for the generate options, made from their one definition
//! (src/generate/options.rs `OPTIONS`): each option's flag, help and default come from the table,
//! so an option added there is a flag here. A flag's text reads as JSON (`0.8`, `true`) or, when
//! it is not JSON, as a string (`never`); the table's `set` checks it. A bool that is on by
//! default is turned off by `--no-NAME`; one that is off is turned on by `--NAME`. `--draft`
//! also takes a draft model's folder (the CLI loads it).

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use gpt2_web::{GenerateParams, Scope, OPTIONS};
use serde_json::Value;

/// The generate options as given on the command line.
pub struct OptionFlags {
    /// Every option but `draft`'s model folder, over the defaults.
    pub params: GenerateParams,
    /// `--draft` as given: a drafter's name or a draft model's folder.
    pub draft: Option<String>,
}

fn flag(name: &str) -> String {
    name.replace('_', "-")
}

/// The options with a flag: all but the JS API's own.
fn cli_options() -> impl Iterator<Item = &'static gpt2_web::OptionSpec> {
    OPTIONS.iter().filter(|o| o.scope == Scope::All)
}

impl Args for OptionFlags {
    fn augment_args(cmd: Command) -> Command {
        let d = GenerateParams::default();
        cli_options().fold(cmd, |cmd, o| {
            let default = d.get(o.name).unwrap_or(Value::Null);
            let arg = Arg::new(o.name).help(o.doc);
            let arg = match &default {
                Value::Bool(true) if o.ts == "boolean" => arg
                    .long(format!("no-{}", flag(o.name)))
                    .action(ArgAction::SetTrue),
                Value::Bool(false) if o.ts == "boolean" => {
                    arg.long(flag(o.name)).action(ArgAction::SetTrue)
                }
                Value::Array(_) => arg
                    .long(flag(o.name))
                    .value_name("TEXT")
                    .action(ArgAction::Append),
                Value::String(s) if o.name == "draft" => arg
                    .long(flag(o.name))
                    .value_name("prompt-lookup|DIR")
                    .default_value(s.clone()),
                other => {
                    let text = match other {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    arg.long(flag(o.name))
                        .allow_negative_numbers(true)
                        .default_value(text)
                }
            };
            cmd.arg(arg)
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for OptionFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let bad = |o: &gpt2_web::OptionSpec, e: gpt2_web::Error| {
            let msg = format!(
                "--{}: {}",
                flag(o.name),
                e.to_string().replace("invalid ", "")
            );
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, msg)
        };
        let mut params = GenerateParams::default();
        let mut draft = None;
        for o in cli_options() {
            let value = if o.ts == "boolean" {
                if !m.get_flag(o.name) {
                    continue;
                }
                Value::Bool(
                    !params
                        .get(o.name)
                        .and_then(|v| v.as_bool())
                        .unwrap_or(false),
                )
            } else {
                let texts: Vec<&String> = m.get_many(o.name).into_iter().flatten().collect();
                if o.name == "draft" {
                    draft = texts.first().map(|s| s.to_string());
                    continue;
                }
                let json = |s: &String| serde_json::from_str(s).unwrap_or(Value::from(s.as_str()));
                match texts.as_slice() {
                    [] => continue,
                    [one] if o.ts != "string[] | string" => json(one),
                    many => Value::from(many.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
                }
            };
            params.set(o.name, &value).map_err(|e| bad(o, e))?;
        }
        Ok(OptionFlags { params, draft })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
