// What the benchmarks print beside every table: the CPU, and the flags that decide the 8-bit
// kernels' speed.
import fs from 'node:fs';
import os from 'node:os';

/** "2 × Intel(R) Xeon(R) Processor (AVX2, AVX-VNNI, AVX-512 VNNI)". */
export function cpuName() {
  let flags = [];
  try {
    const info = fs.readFileSync('/proc/cpuinfo', 'utf8');
    const have = new Set((info.match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/));
    flags = [['avx2', 'AVX2'], ['avx_vnni', 'AVX-VNNI'], ['avx512_vnni', 'AVX-512 VNNI']]
      .filter(([f]) => have.has(f)).map(([, name]) => name);
  } catch { /* not Linux: the model name only */ }
  return `${os.cpus().length} × ${os.cpus()[0].model.trim()}${flags.length ? ` (${flags.join(', ')})` : ''}`;
}
