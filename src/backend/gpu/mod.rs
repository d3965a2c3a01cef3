//! The WebGPU backend on wgpu: WGSL kernels (`shaders/`), the device and its limits
//! (`context`), the kernels' pipelines and grids (`kernels`) and GPT-2's forward pass (`model`).

pub mod context;
pub mod kernels;
pub mod model;

pub use context::{Context, GpuOptions};
pub use model::GpuBackend;
