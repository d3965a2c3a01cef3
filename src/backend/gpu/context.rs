//! The WebGPU device: adapter, device and queue with the limits the model needs; wgpu errors and
//! device loss turned into `Error::Gpu` results; buffer creation and readback.
//!
//! This is the one GPU file that knows which platform it runs on: natively a readback polls the
//! device until the copy is done; in the browser the map callback arrives from the event loop and
//! is awaited. Everything else (kernels, the model) is the same code on both.

use crate::error::{Error, Result};
use std::sync::{Arc, Mutex};
use wgpu::util::DeviceExt;

/// How to set up the device. `Default` asks for the adapter's own storage limits.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Ask only for WebGPU's default limits (128 MiB per storage binding, 256 MiB per buffer), as
    /// the most limited browsers grant; tests use it to exercise the split embedding.
    pub default_limits: bool,
    /// Lower the storage-binding size the model may use to this many bytes (tests force several
    /// vocab chunks of wte on a tiny model with it).
    pub max_binding_bytes: Option<u64>,
    /// Refuse software adapters (lavapipe, SwiftShader, WARP): `Auto` sets it, because the CPU
    /// backend is faster than a rasteriser emulating a GPU on the same cores.
    pub hardware_only: bool,
    /// Weight matrices in f16 (`shader-f16`; the arithmetic stays f32): half the bytes each
    /// decode step reads. An adapter without the feature is an error that says so.
    pub f16: bool,
    /// Weight matrices in q8 (8-bit values in blocks of 32 along each output's inputs, an f32
    /// scale each: the CPU's q8 weights, dequantized in the kernels; the arithmetic stays f32).
    /// `f16` wins when both are set.
    pub q8: bool,
    /// With q8, take every product a weight at a time even where the adapter's WGSL has
    /// dot4I8Packed (`Context::q8_packed`): the fallback, which tests run beside the packed
    /// kernels (`set_gpu_q8_bytes`).
    pub q8_bytes: bool,
    /// Take every stride of the kernels' trees through workgroup memory even where the device
    /// has subgroups (`Context::subgroup`): the fallback, which tests run beside them
    /// (`set_gpu_subgroups`).
    pub no_subgroups: bool,
}

/// How the GPU holds its weight matrices (wte and the blocks' Conv1D weights); biases, LayerNorm
/// parameters, wpe, the activations and the KV cache are f32 in every format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    F32,
    F16,
    /// Blocks of 32 values along each output's inputs, rounded to -63..=63 with an f32 scale each,
    /// as the CPU's q8 rounds them: four values to a word, then the scales.
    Q8,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::F16 => "f16",
            Format::Q8 => "q8",
        }
    }

    /// Bytes per weight of a matrix, its scales counted (q8: one byte, and four per 32).
    pub fn bytes_per_weight(self) -> f64 {
        match self {
            Format::F32 => 4.0,
            Format::F16 => 2.0,
            Format::Q8 => 1.125,
        }
    }
}

/// A device and queue, the limits granted, and the first error the device reported.
pub struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// How weight matrices are held (`GpuOptions::f16`, `GpuOptions::q8`).
    pub format: Format,
    /// The adapter in words: `llvmpipe (LLVM 19.1.7, 256 bits) (Vulkan, Cpu)`.
    pub adapter: String,
    /// Largest storage binding the model may use, in bytes (after `max_binding_bytes`).
    pub max_binding: u64,
    /// Largest buffer the device allows, in bytes.
    pub max_buffer: u64,
    /// Most workgroups one dispatch may have in each dimension.
    pub max_workgroups: u32,
    /// Whether the q8 kernels with a packed part take four weights at a time with WGSL's
    /// dot4I8Packed: q8 weights, the adapter's WGSL has it (natively naga always does: one
    /// instruction where the device has integer dot products, else a few), and not
    /// `GpuOptions::q8_bytes`. `GpuParts::new` turns it off for widths it does not serve.
    pub q8_packed: bool,
    /// The subgroup size the kernels' trees count on (lanes.wgsl): strides below it are taken by
    /// shuffles. The adapter's smallest subgroup size where it has wgpu's `SUBGROUP` (natively;
    /// wgpu passes no subgroups in the browser yet) and its lanes are numbered as the kernels
    /// need (`subgroup_lanes`); 1 (none) elsewhere and with `GpuOptions::no_subgroups`.
    pub subgroup: u32,
    /// First uncaptured error or device loss, kept until the next call can report it.
    fault: Arc<Mutex<Option<String>>>,
}

thread_local! {
    /// One instance per thread, as a browser has one `navigator.gpu`: the devices come and go
    /// (each model, each race, each lost device), the instance stays. A fresh Vulkan instance per
    /// device once left NVIDIA's driver unable to load after a dozen (an H200 under gVisor).
    static INSTANCE: wgpu::Instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
}

fn instance() -> wgpu::Instance {
    INSTANCE.with(wgpu::Instance::clone)
}

/// Whether this WGSL has the packed 4×8-bit integer dot product (`dot4I8Packed`, `pack4xI8`): a
/// browser says so in `navigator.gpu.wgslLanguageFeatures`, naga has it.
fn packed_dot() -> bool {
    // A browser without the list has none of the features in it (wgpu would throw on it).
    #[cfg(target_arch = "wasm32")]
    if !language_features_listed() {
        return false;
    }
    (instance().wgsl_language_features())
        .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct)
}

/// Whether `navigator.gpu.wgslLanguageFeatures` is there (in a page or a worker).
#[cfg(target_arch = "wasm32")]
fn language_features_listed() -> bool {
    let get = |o: &wasm_bindgen::JsValue, k: &str| {
        js_sys::Reflect::get(o, &k.into()).unwrap_or(wasm_bindgen::JsValue::UNDEFINED)
    };
    let gpu = get(&get(&js_sys::global(), "navigator"), "gpu");
    !gpu.is_falsy() && !get(&gpu, "wgslLanguageFeatures").is_falsy()
}

impl Context {
    /// Finds an adapter and opens a device on it, or says why not.
    pub async fn new(opts: &GpuOptions) -> Result<Context> {
        let adapter = instance()
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(no_adapter)?;
        let info = adapter.get_info();
        // Browsers often leave the description empty (wgpu maps it to the name).
        let name = format!(
            "{} ({:?}, {:?})",
            match info.name.trim() {
                "" => "unnamed adapter",
                n => n,
            },
            info.backend,
            info.device_type
        );
        if opts.hardware_only && info.device_type == wgpu::DeviceType::Cpu {
            return Err(Error::Gpu(format!(
                "the adapter is a software renderer ({name}), slower than the CPU backend"
            )));
        }

        let limits = limits_for(&adapter, opts);
        let mut features = wgpu::Features::empty();
        if opts.f16 {
            if !adapter.features().contains(wgpu::Features::SHADER_F16) {
                return Err(Error::Gpu(format!(
                    "{name} has no shader-f16, so it cannot hold f16 weights; use dtype f32"
                )));
            }
            features |= wgpu::Features::SHADER_F16;
        }
        let subgroups = !opts.no_subgroups && adapter.features().contains(wgpu::Features::SUBGROUP);
        if subgroups {
            features |= wgpu::Features::SUBGROUP;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("gpt2"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("cannot open a device on {name}: {e}")))?;

        let fault = faults_of(&device);

        let max_binding = match opts.max_binding_bytes {
            Some(b) => b.min(limits.max_storage_buffer_binding_size),
            None => limits.max_storage_buffer_binding_size,
        };
        let mut ctx = Context {
            device,
            queue,
            format: match (opts.f16, opts.q8) {
                (true, _) => Format::F16,
                (false, true) => Format::Q8,
                (false, false) => Format::F32,
            },
            adapter: name,
            max_binding,
            max_buffer: limits.max_buffer_size,
            max_workgroups: limits.max_compute_workgroups_per_dimension,
            q8_packed: opts.q8 && !opts.f16 && !opts.q8_bytes && packed_dot(),
            subgroup: 1,
            fault,
        };
        if subgroups {
            ctx.subgroup = ctx.subgroup_lanes(info.subgroup_min_size).await?;
        }
        Ok(ctx)
    }

    /// The subgroup size the kernels' trees may count on (`subgroup`): `min`, the adapter's
    /// smallest, if every lane of subgroup_probe.wgsl's workgroup found its partners where
    /// lanes_subgroup.wgsl looks for them; else 1 (every stride through workgroup memory). The
    /// trees' shuffles rely on a subgroup's lanes being consecutive in `local_invocation_index`
    /// and its size a power of two: WGSL promises neither, so each device is asked once.
    async fn subgroup_lanes(&self, min: u32) -> Result<u32> {
        if !min.is_power_of_two() || min < 2 {
            return Ok(1);
        }
        let device = &self.device;
        // Errors here (a compiler that refuses the probe) mean no subgroups, not a failed device.
        let scopes = self.scopes();
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
        let ok = self.storage("subgroup_probe", 256 * 4);
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("subgroup_probe"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: ok.as_entire_binding(),
            }],
        });
        let mut enc =
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        self.queue.submit([enc.finish()]);
        let refused = scopes.close("the subgroup probe").await.is_err();
        let lanes = self.download(&ok).await?;
        Ok(if !refused && lanes.iter().all(|&v| v == 1.0) {
            min
        } else {
            1
        })
    }

    /// The first error or loss the device reported since it was created, as an `Error::Gpu`.
    pub fn check(&self) -> Result<()> {
        match self.fault.lock().ok().and_then(|f| f.clone()) {
            Some(msg) => Err(Error::Gpu(msg)),
            None => Ok(()),
        }
    }

    /// Opens error scopes for out-of-memory and validation errors; `ErrorScopes::close` reports
    /// what the GPU work issued in between got wrong.
    pub fn scopes(&self) -> ErrorScopes {
        ErrorScopes {
            oom: self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory),
            validation: self.device.push_error_scope(wgpu::ErrorFilter::Validation),
        }
    }

    /// A storage buffer of `bytes` (zeroed), usable as a kernel input or output and as a copy source.
    pub fn storage(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A storage buffer holding `data`.
    pub fn upload<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> wgpu::Buffer {
        let contents: &[u8] = bytemuck::cast_slice(data);
        if contents.is_empty() {
            return self.storage(label, 4);
        }
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A uniform buffer holding `value` (a `#[repr(C)]` struct matching the WGSL one).
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A buffer the CPU can map to read `bytes` copied into it.
    pub fn staging(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Waits for the submitted work, then reads `out.len()` values (f32 logits, u32 ids) from
    /// the start of `staging` (already copied there by that work).
    pub async fn read<T: bytemuck::Pod>(
        &self,
        staging: &wgpu::Buffer,
        out: &mut [T],
    ) -> Result<()> {
        let mapping = self.begin_read(staging, std::mem::size_of_val(out));
        self.finish_read(staging, out, mapping, None).await
    }

    /// Asks for the first `bytes` of `staging`, once the work submitted so far is done; work
    /// submitted after this call (which must not use `staging`) is not waited for, in the
    /// browser as natively. `finish_read` takes the values.
    pub fn begin_read(&self, staging: &wgpu::Buffer, bytes: usize) -> Mapping {
        let (tx, rx) = futures_channel::oneshot::channel();
        staging
            .slice(..bytes as u64)
            .map_async(wgpu::MapMode::Read, move |r| {
                // The receiver outlives the callback unless the whole read was abandoned.
                let _ = tx.send(r);
            });
        Mapping(rx)
    }

    /// Waits for `mapping` (natively: polling for the work up to submission `upto`, all of it
    /// when `None`), then reads `out.len()` values from the start of `staging`.
    pub async fn finish_read<T: bytemuck::Pod>(
        &self,
        staging: &wgpu::Buffer,
        out: &mut [T],
        mapping: Mapping,
        upto: Option<wgpu::SubmissionIndex>,
    ) -> Result<()> {
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        // Natively nothing moves until the device is polled; in the browser the callback is
        // queued on the event loop when the GPU finishes, and polling does nothing.
        #[cfg(target_arch = "wasm32")]
        let _ = upto;
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: upto,
                timeout: None,
            })
            .map_err(|e| {
                // A submission to a lost device does not count: waiting for all of them is what
                // runs its loss callback.
                let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
                self.fault_or(format!("waiting for the GPU failed: {e}"))
            })?;
        let mapped = (mapping.0)
            .await
            .map_err(|_| self.fault_or("the GPU dropped a readback".into()))?;
        mapped.map_err(|e| self.fault_or(format!("reading back from the GPU failed: {e}")))?;
        {
            let view = (staging.slice(..out.len() as u64))
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("reading back from the GPU failed: {e:?}")))?;
            out.copy_from_slice(&view); // little-endian, as every WebGPU host is
        }
        staging.unmap();
        self.check()
    }

    /// Reads a whole f32 storage buffer back (tests and debugging; allocates).
    pub async fn download(&self, src: &wgpu::Buffer) -> Result<Vec<f32>> {
        let bytes = src.size();
        let staging = self.staging("download", bytes);
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        enc.copy_buffer_to_buffer(src, 0, &staging, 0, bytes);
        self.queue.submit([enc.finish()]);
        let mut out = vec![0.0f32; (bytes / 4) as usize];
        self.read(&staging, &mut out).await?;
        Ok(out)
    }

    /// Destroys the device as a driver reset or a GPU process crash would: later calls fail with
    /// `Error::Gpu` (how the fallback to the CPU is tested).
    pub fn lose_device(&self) {
        self.device.destroy();
    }

    /// The recorded fault (device loss explains most failures) or else `msg`.
    fn fault_or(&self, msg: String) -> Error {
        match self.check() {
            Err(e) => e,
            Ok(()) => Error::Gpu(msg),
        }
    }
}

/// Why there is no adapter. In the browser wgpu's reason is a list of the native backends it
/// was built without, so the sentence is short; natively that list helps, so it is kept.
#[cfg(target_arch = "wasm32")]
fn no_adapter(_: wgpu::RequestAdapterError) -> Error {
    Error::Gpu("not available in this browser (no adapter)".into())
}

#[cfg(not(target_arch = "wasm32"))]
fn no_adapter(e: wgpu::RequestAdapterError) -> Error {
    Error::Gpu(format!(
        "no adapter found, so the GPU backend is not available ({e})"
    ))
}

fn record(slot: &Mutex<Option<String>>, msg: String) {
    if let Ok(mut f) = slot.lock() {
        f.get_or_insert(msg);
    }
}

/// Out-of-memory and validation error scopes around some GPU work.
pub struct ErrorScopes {
    oom: wgpu::ErrorScopeGuard,
    validation: wgpu::ErrorScopeGuard,
}

impl ErrorScopes {
    /// Closes the scopes at once, so later work falls outside them, and returns their verdict to
    /// await (in the browser it arrives after the GPU has run the work); `what` names the work.
    pub fn close(self, what: &str) -> impl std::future::Future<Output = Result<()>> {
        let validation = self.validation.pop();
        let oom = self.oom.pop();
        let what = what.to_string();
        async move {
            if let Some(e) = oom.await {
                return Err(Error::Gpu(format!(
                    "{what}: out of GPU memory ({e}); try a smaller model or the CPU backend"
                )));
            }
            if let Some(e) = validation.await {
                return Err(Error::Gpu(format!("{what}: {e}")));
            }
            Ok(())
        }
    }
}

/// A readback asked for (`Context::begin_read`), its values not yet taken.
pub struct Mapping(
    futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
);

/// The limits to ask of `adapter`: WebGPU's defaults, which every device grants, with only the two
/// storage limits the embedding needs raised (unless `opts.default_limits`), never past what the
/// adapter has.
fn limits_for(adapter: &wgpu::Adapter, opts: &GpuOptions) -> wgpu::Limits {
    let have = adapter.limits();
    let mut limits = wgpu::Limits::default();
    if !opts.default_limits {
        limits.max_storage_buffer_binding_size = have.max_storage_buffer_binding_size;
        limits.max_buffer_size = have.max_buffer_size;
    }
    limits.max_storage_buffer_binding_size = limits
        .max_storage_buffer_binding_size
        .min(have.max_storage_buffer_binding_size);
    limits.max_buffer_size = limits.max_buffer_size.min(have.max_buffer_size);
    limits
}

/// Where `device`'s first failure is kept: unhandled wgpu errors would otherwise panic natively,
/// so the first one is kept and reported from the next call; device loss goes to the same place.
fn faults_of(device: &wgpu::Device) -> Arc<Mutex<Option<String>>> {
    let fault = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&fault);
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        record(&slot, format!("{e}"));
    }));
    let slot = Arc::clone(&fault);
    device.set_device_lost_callback(move |reason, msg| {
        record(
            &slot,
            format!("the GPU device was lost ({reason:?}): {msg}"),
        );
    });
    fault
}
