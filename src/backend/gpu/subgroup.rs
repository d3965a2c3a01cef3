//! Subgroups for the kernels' trees: whether a device's serve them, found once per device.
//!
//! The kernels whose reductions are trees (lanes.wgsl) take their strides below the device's
//! smallest subgroup size by shuffles between lanes, which relies on the lanes of a subgroup
//! being consecutive in `local_invocation_index` and its size a power of two: WGSL promises
//! neither, so `lanes` asks the device (subgroup_probe.wgsl) before the kernels are compiled.

use super::Context;
use crate::error::Result;

/// The subgroup size the kernels may count on: `min`, the adapter's smallest, if every lane of
/// subgroup_probe.wgsl's workgroup found its partners where lanes_subgroup.wgsl looks for them;
/// else 1 (no subgroups: every stride through workgroup memory).
pub async fn lanes(ctx: &Context, min: u32) -> Result<u32> {
    if !min.is_power_of_two() || min < 2 {
        return Ok(1);
    }
    let device = &ctx.device;
    // Errors here (a compiler that refuses the probe) mean no subgroups, not a failed device.
    let scopes = ctx.scopes();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("subgroup_probe"),
        source: wgpu::ShaderSource::Wgsl(include_str!("shaders/subgroup_probe.wgsl").into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("subgroup_probe"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &[("SUBGROUP", min as f64)],
            ..Default::default()
        },
        cache: None,
    });
    let ok = ctx.storage("subgroup_probe", 256 * 4);
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("subgroup_probe"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: ok.as_entire_binding(),
        }],
    });
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    ctx.queue.submit([enc.finish()]);
    let refused = scopes.close("the subgroup probe").await.is_err();
    let lanes = ctx.download(&ok).await?;
    Ok(if !refused && lanes.iter().all(|&v| v == 1.0) {
        min
    } else {
        1
    })
}
