//! The CPU backend built tensor by tensor: each tensor is converted to its runtime form (q8 or
//! f32) the moment it arrives, in any order, and its bytes can go; `finish` assembles the layers
//! once every tensor is in. Loading from a stream (`weights::stream`) and from bytes in memory
//! both come through here.

use super::matrix::{Block, LayerNorm, Linear, Matrix};
use super::{CpuBackend, CpuDtype};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::table::{self, Pair, Role};
use crate::weights::TensorRef;
use std::collections::HashMap;

enum Part {
    Matrix(Matrix),
    Values(Vec<f32>),
}

/// Converted tensors by their unprefixed name.
pub struct CpuParts {
    config: Config,
    dtype: CpuDtype,
    roles: HashMap<String, Role>,
    parts: HashMap<String, Part>,
}

impl CpuParts {
    pub fn new(config: &Config, dtype: CpuDtype) -> Self {
        CpuParts {
            config: config.clone(),
            dtype,
            roles: table::roles(config),
            parts: HashMap::new(),
        }
    }

    /// Converts one tensor (checked by `weights`): a linear layer's weight and `wte` to a
    /// matrix in the runtime format, everything else to f32.
    pub fn add(&mut self, name: &str, t: TensorRef) -> Result<()> {
        let part = match self.roles.get(name) {
            Some(Role::Embedding) => Part::Matrix(Matrix::new(&t, self.dtype, false)?),
            Some(Role::Matrix) => Part::Matrix(Matrix::new(&t, self.dtype, true)?), // (in, out)
            Some(Role::Positions | Role::Vector) => Part::Values(t.try_to_f32()?),
            None => {
                let why = format!("the CPU backend was given tensor \"{name}\", not GPT-2's");
                return Err(Error::State(why));
            }
        };
        self.parts.insert(name.to_string(), part);
        Ok(())
    }

    /// The backend, once every tensor has been added.
    pub fn finish(mut self) -> Result<CpuBackend> {
        let blocks = (0..self.config.n_layer)
            .map(|i| {
                let n = table::block(i);
                Ok(Block {
                    ln_1: self.layer_norm(&n.ln_1)?,
                    c_attn: self.linear(&n.c_attn)?,
                    attn_c_proj: self.linear(&n.attn_c_proj)?,
                    ln_2: self.layer_norm(&n.ln_2)?,
                    c_fc: self.linear(&n.c_fc)?,
                    mlp_c_proj: self.linear(&n.mlp_c_proj)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let wte = self.matrix(table::WTE)?;
        let wpe = self.values(table::WPE)?;
        let ln_f = self.layer_norm(&table::ln_f())?;
        CpuBackend::assemble(&self.config, self.dtype, wte, wpe, blocks, ln_f)
    }

    fn take(&mut self, name: &str) -> Result<Part> {
        self.parts
            .remove(name)
            .ok_or_else(|| Error::State(format!("the CPU backend has no tensor \"{name}\"")))
    }

    fn matrix(&mut self, name: &str) -> Result<Matrix> {
        match self.take(name)? {
            Part::Matrix(m) => Ok(m),
            Part::Values(_) => Err(Error::State(format!("tensor \"{name}\" is not a matrix"))),
        }
    }

    fn values(&mut self, name: &str) -> Result<Vec<f32>> {
        match self.take(name)? {
            Part::Values(v) => Ok(v),
            Part::Matrix(_) => Err(Error::State(format!("tensor \"{name}\" is a matrix"))),
        }
    }

    fn layer_norm(&mut self, p: &Pair) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: self.values(&p.weight)?,
            bias: self.values(&p.bias)?,
        })
    }

    fn linear(&mut self, p: &Pair) -> Result<Linear> {
        Ok(Linear {
            weight: self.matrix(&p.weight)?,
            bias: self.values(&p.bias)?,
        })
    }
}
