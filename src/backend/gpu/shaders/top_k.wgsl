// top_k: sampling's candidates chosen on the device. For each row r of the logits, its k largest
// values and their indices (ties at the k-th value broken by the smaller index, as the sampler's
// sort breaks them), so a sampled step reads back 8·k bytes per sequence instead of its
// vocabulary's logits; the sampler sorts and draws from them exactly as from the whole row.
//
// Values are compared as keys: the f32 bits turned so that unsigned order is `f32::total_cmp`'s
// (NaN, which the sampler drops, as the smallest key). The k-th largest key is found by a radix
// select, 8 bits a pass from the top: each pass counts, in workgroup atomics, the keys that
// share the bits found so far by their next 8 bits, and one thread walks the 256 counts down to
// the bucket holding the k-th. Then every key above it is written (in any order: the sampler
// sorts), and of the keys equal to it the ones of the smallest indices, each thread owning one
// contiguous run of the row so that a scan of the threads' counts puts them in index order.
//
// Bindings (group 0):
//   0 dims: Dims  uniform   V, k (1 ..= MAX_K, at most V)
//   1 logits      storage, read        (MAX_VERIFY, V), the first grid.x rows read
//   2 top         storage, read_write  (MAX_VERIFY, MAX_K, 2) u32: each row's k (value bits,
//                                      index) pairs, the first k of its MAX_K
// Workgroup: 256 threads over one row.  Grid: (rows, 1, 1).

struct Dims {
    V: u32,
    k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> top: array<u32>;

const THREADS: u32 = 256u;
const MAX_K: u32 = 256u;
var<workgroup> counts: array<atomic<u32>, 256>;
var<workgroup> found: vec3<u32>; // the key's bits found so far, their mask, how many still wanted
var<workgroup> above: atomic<u32>; // keys above the k-th written so far
var<workgroup> ties: array<u32, THREADS>; // each thread's keys equal to the k-th, then their scan

// The order-preserving key of a value: larger value (by total order), larger key; NaN smallest.
// NaN is told by its bits: a compiler may take `x != x` to be false.
fn key(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return 0u;
    }
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

fn put(row: u32, j: u32, x: f32, i: u32) {
    let at = (row * MAX_K + j) * 2u;
    top[at] = bitcast<u32>(x);
    top[at + 1u] = i;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let V = dims.V;
    let k = dims.k;
    let base = wid.x * V;
    let t = lid.x;
    if (t == 0u) {
        found = vec3<u32>(0u, 0u, k);
        atomicStore(&above, 0u);
    }
    for (var shift = 24u; ; shift = shift - 8u) {
        atomicStore(&counts[t], 0u);
        workgroupBarrier();
        let f = found;
        for (var c = t; c < V; c = c + THREADS) {
            let q = key(logits[base + c]);
            if ((q & f.y) == f.x) {
                atomicAdd(&counts[(q >> shift) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if (t == 0u) {
            var wanted = f.z;
            var b = 255u;
            loop {
                let n = atomicLoad(&counts[b]);
                if (n >= wanted || b == 0u) {
                    break;
                }
                wanted = wanted - n;
                b = b - 1u;
            }
            found = vec3<u32>(f.x | (b << shift), f.y | (255u << shift), wanted);
        }
        workgroupBarrier();
        if (shift == 0u) {
            break;
        }
    }
    // found.x is the k-th largest key; found.z of the keys equal to it are wanted.
    let f = found;
    let run = (V + THREADS - 1u) / THREADS;
    let start = t * run;
    let end = min(start + run, V);
    var equal = 0u;
    for (var c = start; c < end; c = c + 1u) {
        let x = logits[base + c];
        let q = key(x);
        if (q > f.x) {
            put(wid.x, atomicAdd(&above, 1u), x, c);
        } else if (q == f.x) {
            equal = equal + 1u;
        }
    }
    ties[t] = equal;
    workgroupBarrier();
    if (t == 0u) {
        var sum = 0u;
        for (var i = 0u; i < THREADS; i = i + 1u) {
            let n = ties[i];
            ties[i] = sum;
            sum = sum + n;
        }
    }
    workgroupBarrier();
    var j = ties[t]; // ties before this thread's run
    let first = k - f.z; // where the ties go: after every key above
    for (var c = start; c < end && j < f.z; c = c + 1u) {
        let x = logits[base + c];
        if (key(x) == f.x) {
            put(wid.x, first + j, x, c);
            j = j + 1u;
        }
    }
}
