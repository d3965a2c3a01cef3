// embedding: x[t, :] = wte[ids[t], :] + wpe[pos_t, :] for the T new rows, each at its own
// position pos_t (the row table: rows of several sequences may share a pass).
//
// wte may be split over several buffers (vocab chunks) when V·C·4 bytes exceed the device's
// storage-binding limit; this kernel sees one chunk, rows chunk_start .. chunk_start+chunk_rows,
// and writes only the rows of x whose id falls in it. One dispatch per chunk covers every id.
//
// Bindings (group 0):
//   0 run: Step   uniform   T (new rows)
//   1 dims: Dims  uniform   C, chunk_start, chunk_rows
//   2 ids         storage, read        (n_ctx,) u32, first T used
//   3 wte         storage, read        (chunk_rows, C)
//   4 wpe         storage, read        (n_ctx, C)
//   5 rows        storage, read        (n_ctx, 2) u32: each row's position, its slot's first
//                                      cache row (kernels.rs `row_table`); first T used
//   6 x           storage, read_write  (n_ctx, C), first T rows written
// Workgroup: 256 threads, one per element of x.  Grid: (ceil(T·C / 256), 1, 1).

struct Step {
    T: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    C: u32,
    chunk_start: u32,
    chunk_rows: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read> wte: array<f32>;
@group(0) @binding(4) var<storage, read> wpe: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<u32>;
@group(0) @binding(6) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let C = dims.C;
    let i = gid.x;
    if (i >= run.T * C) {
        return;
    }
    let t = i / C;
    let c = i % C;
    let id = ids[t];
    if (id < dims.chunk_start || id >= dims.chunk_start + dims.chunk_rows) {
        return; // another chunk's dispatch writes this row
    }
    x[i] = wte[(id - dims.chunk_start) * C + c] + wpe[rows[2u * t] * C + c];
}
