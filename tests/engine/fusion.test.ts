// The controller's producer-consumer fusion (native/core/runner/fusion.h), seen from outside:
// linear -> gelu(tanh) and mul -> add run as one kernel when the intermediate dies at its one
// reader in the same segment, and not otherwise; fused results equal the unfused ones
// (bit-identical on CPU workers, within bfloat16 rounding on GPUs), on every mesh kind.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { meshCases } from '../conformance/meshes.js';
import { groupNormReference, relativeL2 } from './float_reference.js';

const one = new dt.DeviceMesh('cpu', [0]);
const kernelsRun = () => dt.workers().reduce((n, w) => n + w.kernelsRun, 0);

// Kernels run and the value of `f`, recorded in one segment (one JS task) inside tidy.
async function run(f: () => dt.Tensor): Promise<{ kernels: number; value: Float32Array }> {
  await dt.sync();
  const start = kernelsRun();
  const out = dt.tidy(f);
  await dt.sync();
  const kernels = kernelsRun() - start;
  const value = (await out.to('float32').data()) as Float32Array;
  out.dispose();
  return { kernels, value };
}

describe('producer-consumer fusion', () => {
  const x = dt.randn([5, 8], { seed: 1, mesh: one });
  const w = dt.randn([6, 8], { seed: 2, mesh: one });
  const b = dt.randn([6], { seed: 3, mesh: one });
  const c = dt.randn([5, 6], { seed: 4, mesh: one });

  it('runs linear then gelu(tanh) as one kernel when the product dies there', async () => {
    const fused = await run(() => dt.F.gelu(dt.F.linear(x, w, b), { approximate: 'tanh' }));
    expect(fused.kernels).toBe(1);
    // the same ops with the product kept by the program: two kernels, the same bits
    let kept: dt.Tensor | undefined;
    const unfused = await run(() => {
      kept = dt.keep(dt.F.linear(x, w, b));
      return dt.F.gelu(kept, { approximate: 'tanh' });
    });
    expect(unfused.kernels).toBe(2);
    expect(fused.value).toEqual(unfused.value);
    kept!.dispose();
  });

  it('runs mul then add as one kernel, with the product on either side', async () => {
    const left = await run(() => c.add(x.narrow(1, 0, 6).mul(c)));
    const right = await run(() => x.narrow(1, 0, 6).mul(c).add(c));
    let kept: dt.Tensor | undefined;
    const unfused = await run(() => {
      kept = dt.keep(x.narrow(1, 0, 6).mul(c));
      return c.add(kept);
    });
    expect([left.kernels, right.kernels, unfused.kernels]).toEqual([2, 2, 3]); // narrow, then 1 or 2
    expect(left.value).toEqual(unfused.value);
    expect(right.value).toEqual(unfused.value);
    kept!.dispose();
    // broadcasting and a dtype promotion (the product is float32, c float64): still the same bits
    const c64 = c.to('float64');
    const promoted = await run(() => c64.add(x.narrow(1, 0, 6).mul(b)));
    const reference = (await dt
      .tidy(() => c64.add(x.narrow(1, 0, 6).mul(b).to('float64')))
      .to('float32')
      .data()) as Float32Array;
    expect(promoted.value).toEqual(reference);
    c64.dispose();
  });

  it('runs a bias-free linear then add as one kernel, in the buffer of an addend that dies there', async () => {
    const x2 = dt.randn([5, 6], { seed: 5, mesh: one });
    const w2 = dt.randn([6, 6], { seed: 6, mesh: one });
    const fused = await run(() => dt.F.linear(x, w, b).add(dt.F.linear(x2, w2)).add(dt.F.linear(x2, w2.mul(2))));
    let kept: dt.Tensor[] = [];
    const unfused = await run(() => {
      kept = [dt.keep(dt.F.linear(x, w, b)), dt.keep(dt.F.linear(x2, w2)), dt.keep(w2.mul(2))];
      const partial = dt.keep(kept[0]!.add(kept[1]!));
      const last = dt.keep(dt.F.linear(x2, kept[2]!));
      kept.push(partial, last);
      return partial.add(last);
    });
    expect([fused.kernels, unfused.kernels]).toEqual([4, 6]); // linear, mul, and two linear_adds
    expect(fused.value).toEqual(unfused.value);
    dt.dispose([x2, w2, ...kept]);
  });

  it('runs layer_norm, mul and add as one kernel (adaLN modulation), the norm on either side of the product', async () => {
    const h = dt.randn([2, 5, 8], { seed: 7, mesh: one });
    const [scale, shift] = [dt.randn([2, 1, 8], { seed: 8, mesh: one }), dt.randn([2, 1, 8], { seed: 9, mesh: one })];
    const weight = dt.randn([8], { seed: 10, mesh: one });
    const norm = (affine: boolean) => dt.F.layerNorm(h, [8], affine ? { weight } : {});
    const left = await run(() => norm(false).mul(scale).add(shift));
    const right = await run(() => shift.add(scale.mul(norm(true)))); // with a weight, the product on the other side
    // the norm kept by the program: layer_norm, then mul and add fused (2 kernels), the same bits
    const kept: dt.Tensor[] = [];
    const leftUnfused = await run(() => dt.keep(kept[kept.push(norm(false)) - 1]!).mul(scale).add(shift));
    const rightUnfused = await run(() => shift.add(scale.mul(dt.keep(kept[kept.push(norm(true)) - 1]!))));
    expect([left.kernels, right.kernels, leftUnfused.kernels, rightUnfused.kernels]).toEqual([1, 1, 2, 2]);
    expect(left.value).toEqual(leftUnfused.value);
    expect(right.value).toEqual(rightUnfused.value);
    dt.dispose([h, scale, shift, weight, ...kept]);
  });

  it('folds 1 + scale into the modulated norm (layer_norm_modulate), and no other scalar', async () => {
    const h = dt.randn([2, 5, 8], { seed: 11, mesh: one });
    const [scale, shift] = [dt.randn([2, 1, 8], { seed: 12, mesh: one }), dt.randn([2, 1, 8], { seed: 13, mesh: one })];
    const modulated = (plus: (s: dt.Tensor) => dt.Tensor) => () => dt.F.layerNorm(h, [8]).mul(plus(scale)).add(shift);
    const whole = await run(modulated((s) => s.add(1)));
    // the sum kept by the program: add, then the fused norm (2 kernels), the same bits
    const kept: dt.Tensor[] = [];
    const unfused = await run(modulated((s) => dt.keep(kept[kept.push(s.add(1)) - 1]!)));
    expect([whole.kernels, unfused.kernels]).toEqual([1, 2]);
    expect(whole.value).toEqual(unfused.value);
    // 2 + scale and 1 + scale with alpha 2 stay an add of their own; 1 + (-scale) folds the add
    const others = [(s: dt.Tensor) => s.add(2), (s: dt.Tensor) => s.add(1, { alpha: 2 }), (s: dt.Tensor) => s.mul(-1).add(1)];
    const counts = [];
    for (const plus of others) counts.push((await run(modulated(plus))).kernels);
    expect(counts).toEqual([2, 2, 2]);
    dt.dispose([h, scale, shift, ...kept]);
  });

  it("runs a LoRA adapter's join, cat([x, linear(x, A)], -1), as one kernel (lora_join)", async () => {
    const a = dt.randn([3, 8], { seed: 14, mesh: one });
    const x3 = dt.randn([2, 5, 8], { seed: 15, mesh: one });
    for (const input of [x, x3]) {
      const fused = await run(() => dt.cat([input, dt.F.linear(input, a)], -1));
      let kept: dt.Tensor | undefined;
      const unfused = await run(() => dt.cat([input, (kept = dt.keep(dt.F.linear(input, a)))], -1));
      expect([fused.kernels, unfused.kernels]).toEqual([1, 2]);
      expect(fused.value).toEqual(unfused.value);
      kept!.dispose();
    }
    // not the join: another dim, the product first, a bias, another input
    const b3 = dt.randn([3], { seed: 16, mesh: one });
    const square = dt.randn([8, 8], { seed: 22, mesh: one });
    const y = dt.randn([5, 8], { seed: 17, mesh: one });
    const counts = [];
    for (const f of [
      () => dt.cat([x, dt.F.linear(x, square)], 0),
      () => dt.cat([dt.F.linear(x, a), x], -1),
      () => dt.cat([x, dt.F.linear(x, a, b3)], -1),
      () => dt.cat([y, dt.F.linear(x, a)], -1),
    ]) {
      counts.push((await run(f)).kernels);
    }
    expect(counts).toEqual([2, 2, 2, 2]);
    dt.dispose([a, x3, b3, square, y]);
  });

  it("writes a modulated norm straight into the adapter's join (layer_norm_modulate_join)", async () => {
    const h = dt.randn([2, 5, 8], { seed: 18, mesh: one });
    const [scale, shift] = [dt.randn([2, 1, 8], { seed: 19, mesh: one }), dt.randn([2, 1, 8], { seed: 20, mesh: one })];
    const a = dt.randn([4, 8], { seed: 21, mesh: one });
    const modulated = () => dt.F.layerNorm(h, [8]).mul(scale.add(1)).add(shift);
    const joined = (n: dt.Tensor) => dt.cat([n, dt.F.linear(n, a)], -1);
    const whole = await run(() => joined(modulated()));
    // the norm kept by the program: the modulated norm, then the join (2 kernels), the same bits
    const kept: dt.Tensor[] = [];
    const unfused = await run(() => joined(dt.keep(kept[kept.push(modulated()) - 1]!)));
    // the norm read once more after the join: the norm stays apart (norm, lora_join, sum, add)
    const readAgain = await run(() =>
      dt.tidy(() => {
        const n = modulated();
        return joined(n).add(n.sum());
      })
    );
    expect([whole.kernels, unfused.kernels, readAgain.kernels]).toEqual([1, 2, 4]);
    expect(whole.value).toEqual(unfused.value);
    dt.dispose([h, scale, shift, a, ...kept]);
  });

  it('leaves pairs alone where fusing would change the program', async () => {
    const linearGelu = (approximate: 'tanh' | 'none', bias?: dt.Tensor) => dt.F.gelu(dt.F.linear(x, w, bias), { approximate });
    expect((await run(() => linearGelu('none', b))).kernels).toBe(2); // exact GELU: no epilogue for it
    expect((await run(() => linearGelu('tanh'))).kernels).toBe(2); // no bias
    expect((await run(() => c.add(c.mul(c), { alpha: 2 }))).kernels).toBe(2); // alpha
    const m = () => c.mul(x.narrow(1, 0, 6));
    expect(
      (
        await run(() =>
          dt.tidy(() => {
            const p = m();
            return p.add(p);
          })
        )
      ).kernels
    ).toBe(3); // read twice (narrow, mul, add)
    // the product read again later in the segment
    expect(
      (
        await run(() =>
          dt.tidy(() => {
            const p = m();
            return c.add(p).add(p.sum());
          })
        )
      ).kernels
    ).toBe(5);
  });

  for (const mc of meshCases) {
    it.skipIf(mc.skip !== false)(`quantizes an FP8 linear's input where its GELU or modulated norm makes it (gelu_fp8_linear, layer_norm_modulate_fp8_linear): ${mc.name}`, async () => {
      const mesh = mc.make();
      const tp = mesh.ndim - 1;
      const on = (p: dt.Placement) => mesh.shape.map((_, d) => (d === tp ? p : dt.Replicate()));
      const gpu = mesh.deviceType === 'cuda';
      const dtype = gpu ? 'bfloat16' : 'float32'; // GPUs: the FP8 matmul takes bfloat16 inputs
      const h = dt.randn([2, 24, 64], { seed: 31, mesh, dtype }).mul(2); // an MLP's hidden layer before its GELU
      // column parallel: the FP8 rows, their scales and the bias split alike
      const { weight, scale } = nn.quantizeWeightFp8(dt.randn([64, 64], { seed: 32, mesh, dtype }));
      const [w, s] = [dt.keep(weight.redistribute(on(dt.Shard(0)))), dt.keep(scale.redistribute(on(dt.Shard(0))))];
      const b = dt.randn([64], { seed: 33, mesh, dtype, placements: on(dt.Shard(0)) });
      const mlpOut = (g: (t: dt.Tensor) => dt.Tensor) => () => dt.F.fp8Linear(g(dt.F.gelu(h, { approximate: 'tanh' })), w, s, b);
      const fused = await run(mlpOut((t) => t));
      const kept: dt.Tensor[] = [];
      const unfused = await run(mlpOut((t) => dt.keep(kept[kept.push(t) - 1]!)));
      expect(unfused.kernels - fused.kernels).toBe(mesh.size); // the GELU and the FP8 linear: one kernel on every rank
      if (gpu) {
        // the row kernel's GELU is LibTorch's CUDA GELU, value for value: the same quantized bytes
        expect(relativeL2(fused.value, unfused.value)).toBeLessThanOrEqual(1e-3);
      } else {
        expect(fused.value).toEqual(unfused.value);
      }
      // adaLN's modulated norm into the FP8 linear after it (layer_norm_modulate_fp8_linear)
      const [scale1, shift1] = [dt.randn([2, 1, 64], { seed: 34, mesh, dtype }), dt.randn([2, 1, 64], { seed: 35, mesh, dtype })];
      const modulated = () => dt.F.layerNorm(h, [64]).mul(scale1.add(1)).add(shift1);
      const normFused = await run(() => dt.F.fp8Linear(modulated(), w, s, b));
      const normKept = await run(() => dt.F.fp8Linear(dt.keep(kept[kept.push(modulated()) - 1]!), w, s, b));
      expect(normKept.kernels - normFused.kernels).toBe(mesh.size);
      if (gpu) {
        // the norm's row kernel rounds its rows as it writes them unfused: the same quantized bytes
        expect(relativeL2(normFused.value, normKept.value)).toBeLessThanOrEqual(1e-3);
      } else {
        expect(normFused.value).toEqual(normKept.value);
      }
      // not fused: the exact GELU, or an input quantized with another amax (row parallel's)
      const exact = await run(() => dt.F.fp8Linear(dt.F.gelu(h, { approximate: 'none' }), w, s, b));
      const amax = dt.keep(nn.rowAmax([dt.F.gelu(h, { approximate: 'tanh' })]));
      const withAmax = await run(() => dt.F.fp8Linear(dt.F.gelu(h, { approximate: 'tanh' }), w, s, b, amax));
      expect([exact.kernels, withAmax.kernels]).toEqual([unfused.kernels, unfused.kernels]);
      dt.dispose([h, weight, scale, w, s, b, amax, scale1, shift1, ...kept]);
    });

    it.skipIf(mc.skip !== false)(`runs a per-head RMS norm and the rotary after it as one kernel (rms_norm_rotary_emb): ${mc.name}`, async () => {
      const mesh = mc.make();
      const split = mesh.ndim - 1;
      const on = (p: dt.Placement) => mesh.shape.map((_, d) => (d === split ? p : dt.Replicate()));
      const dtype = mesh.deviceType === 'cuda' ? 'bfloat16' : 'float32';
      const w = dt.randn([16], { seed: 42, mesh, dtype });
      // q or k of Flux's single blocks: [B, S, heads, headDim], heads split (tp) or tokens split
      // (sequence parallel, the float32 tables split alike), rotated where it lies (sequenceDim 1)
      for (const [xOn, tablesOn] of [
        [dt.Shard(2), dt.Replicate()],
        [dt.Shard(1), dt.Shard(0)],
      ] as const) {
        const x = dt.randn([2, 6, 4, 16], { seed: 41, mesh, dtype, placements: on(xOn) });
        const [cos, sin] = [dt.randn([6, 16], { seed: 43, mesh, placements: on(tablesOn) }), dt.randn([6, 16], { seed: 44, mesh, placements: on(tablesOn) })];
        const rotated = (g: (t: dt.Tensor) => dt.Tensor) => () => dt.F.applyRotaryEmb(g(dt.F.rmsNorm(x, [16], { weight: w, eps: 1e-6 })), [cos, sin], { sequenceDim: 1 });
        const fused = await run(rotated((t) => t));
        const kept: dt.Tensor[] = [];
        const unfused = await run(rotated((t) => dt.keep(kept[kept.push(t) - 1]!)));
        expect(unfused.kernels - fused.kernels).toBe(mesh.size); // the norm and the rotary: one kernel on every rank
        // bit for bit on GPUs too: the kernel rounds each value as the norm writes it, then rotates it as rotary_emb does
        expect(fused.value).toEqual(unfused.value);
        // the halves' pairing fuses too (the two ops run in turn there): the same bits
        const halves = (g: (t: dt.Tensor) => dt.Tensor) => () =>
          dt.F.applyRotaryEmb(g(dt.F.rmsNorm(x, [16], { weight: w })), [cos, sin], { sequenceDim: 1, useRealUnbindDim: -2 });
        expect((await run(halves((t) => t))).value).toEqual((await run(halves((t) => dt.keep(kept[kept.push(t) - 1]!)))).value);
        dt.dispose([x, cos, sin, ...kept]);
      }
      w.dispose();
    });

    it.skipIf(mc.skip !== false)(`runs a group norm and the SiLU after it as one kernel (group_norm_silu): ${mc.name}`, async () => {
      const mesh = mc.make();
      const split = mesh.ndim - 1;
      const on = (p: dt.Placement) => mesh.shape.map((_, d) => (d === split ? p : dt.Replicate()));
      const gpu = mesh.deviceType === 'cuda';
      const dtype = gpu ? 'bfloat16' : 'float32';
      const [weight, bias] = [dt.randn([8], { seed: 52, mesh, dtype }), dt.randn([8], { seed: 53, mesh, dtype })];
      // a VAE resnet block's activations [N, C, H, W], the batch split over the last mesh dim, their
      // mean well off zero (the statistics must not cancel); 4 x 8 = 32 values a channel (the GPU
      // kernel's 16-byte loads stay in a channel), then 3 x 5 (the GPU falls back to the two ops)
      for (const hw of [[4, 8], [3, 5]]) {
        const x = dt.randn([4, 8, ...hw], { seed: 51, mesh, dtype, placements: on(dt.Shard(0)) }).mul(2).add(3);
        for (const affine of [{ weight, bias, eps: 1e-6 }, {}]) {
          const activated = (g: (t: dt.Tensor) => dt.Tensor) => () => dt.F.silu(g(dt.F.groupNorm(x, 4, affine)));
          const fused = await run(activated((t) => t));
          const kept: dt.Tensor[] = [];
          const unfused = await run(activated((t) => dt.keep(kept[kept.push(t) - 1]!)));
          expect(unfused.kernels - fused.kernels).toBe(mesh.size); // the norm and the SiLU: one kernel on every rank
          if (gpu) {
            // LibTorch's group_norm rounds its mean and 1/std to bfloat16 before normalising
            // (native_group_norm keeps them in the parameters' dtype): the unfused result is that
            // far from the fused kernel's, whose statistics stay float32, as float64's are
            expect(relativeL2(fused.value, unfused.value)).toBeLessThanOrEqual(1e-2);
            const [xs, ws, bs] = (await Promise.all([x, weight, bias].map((t) => t.to('float32').data()))) as Float32Array[];
            const hasAffine = 'weight' in affine;
            const reference = groupNormReference(xs!, [4, 8, hw[0]! * hw[1]!], 4, hasAffine ? 1e-6 : 1e-5, hasAffine ? ws : undefined, hasAffine ? bs : undefined, true);
            expect(relativeL2(fused.value, reference)).toBeLessThanOrEqual(hw[1] === 8 ? 4e-3 : 2e-2);
          } else {
            expect(fused.value).toEqual(unfused.value);
          }
          dt.dispose(kept);
        }
        x.dispose();
      }
      dt.dispose([weight, bias]);
    });

    it.skipIf(mc.skip !== false)(`normalises long group-norm rows over many blocks, with and without the SiLU, as float64 does: ${mc.name}`, async () => {
      const mesh = mc.make();
      const gpu = mesh.deviceType === 'cuda';
      const dtype = gpu ? 'bfloat16' : 'float32';
      // rows of 65,536 values (GPUs: DTorch's kernel, many blocks a row): 2 groups of 4 channels of
      // 128 x 128, then 4 groups of 16 channels of 64 x 64 (channels last: conv_channels_last.test.ts)
      for (const [n, c, groups, side] of [
        [2, 8, 2, 128],
        [1, 64, 4, 64],
      ] as const) {
        const x = dt.randn([n, c, side, side], { seed: 61, mesh, dtype }).mul(3).add(5);
        const [weight, bias] = [dt.randn([c], { seed: 62, mesh, dtype }), dt.randn([c], { seed: 63, mesh, dtype })];
        const [xs, ws, bs] = (await Promise.all([x, weight, bias].map((t) => t.to('float32').data()))) as Float32Array[];
        const reference = (silu: boolean) => groupNormReference(xs!, [n, c, side * side], groups, 1e-6, ws, bs, silu);
        const bound = gpu ? 4e-3 : 1e-5; // bfloat16 rounding of the output on GPUs
        const normed = (await run(() => dt.F.groupNorm(x, groups, { weight, bias, eps: 1e-6 }))).value;
        expect(relativeL2(normed, reference(false))).toBeLessThanOrEqual(bound);
        const activated = (await run(() => dt.F.silu(dt.F.groupNorm(x, groups, { weight, bias, eps: 1e-6 })))).value;
        expect(relativeL2(activated, reference(true))).toBeLessThanOrEqual(bound);
        dt.dispose([x, weight, bias]);
      }
    });

    it.skipIf(mc.skip !== false)(`equals the unfused ops on a sharded mesh: ${mc.name}`, async () => {
      const mesh = mc.make();
      const tp = mesh.ndim - 1;
      const on = (p: dt.Placement) => mesh.shape.map((_, d) => (d === tp ? p : dt.Replicate()));
      const gpu = mesh.deviceType === 'cuda';
      const dtype = gpu ? 'bfloat16' : 'float32'; // GPUs fuse 16-bit floats; their epilogue rounds once
      const make = (shape: number[], seed: number, placements?: dt.Placement[]) => dt.randn(shape, { seed, mesh, placements, dtype });
      const xs = make([2, 7, 16], 1);
      const [ws, bs] = [make([12, 16], 2, on(dt.Shard(0))), make([12], 3, on(dt.Shard(0)))]; // column parallel
      const [scale, shift] = [make([2, 1, 12], 4), make([2, 7, 12], 5, on(dt.Shard(2)))];
      const [xr, wr] = [make([2, 7, 8], 6), make([12, 8], 7, on(dt.Shard(0)))]; // a second, bias-free column-parallel linear
      const block = () => dt.F.gelu(dt.F.linear(xs, ws, bs), { approximate: 'tanh' }).mul(scale).add(shift).add(dt.F.linear(xr, wr));
      const fused = await run(block);
      const keep: dt.Tensor[] = [];
      const unfused = await run(() => {
        const h = dt.keep(dt.F.linear(xs, ws, bs));
        const m = dt.keep(dt.F.gelu(h, { approximate: 'tanh' }).mul(scale));
        const sum = dt.keep(m.add(shift));
        const r = dt.keep(dt.F.linear(xr, wr));
        keep.push(h, m, sum, r);
        return sum.add(r);
      });
      // three pairs fused on every rank (the local slice of the replicated scale runs either way)
      expect(unfused.kernels - fused.kernels).toBe(3 * mesh.size);
      const tolerance = gpu ? 4 * 2 ** -7 : 0; // four bfloat16 ulps: each of the four fused steps rounds once less
      const worst = Math.max(...Array.from(fused.value, (v, i) => Math.abs(v - unfused.value[i]!) / Math.max(1, Math.abs(unfused.value[i]!))));
      expect(worst).toBeLessThanOrEqual(tolerance);
      dt.dispose([xs, ws, bs, scale, shift, xr, wr, ...keep]);
    });

    it.skipIf(mc.skip !== false)(`joins a modulated norm and an adapter's A x on a sharded mesh as one device does: ${mc.name}`, async () => {
      const mesh = mc.make();
      const tokens = mesh.shape.map((_, d) => (d === mesh.ndim - 1 ? dt.Shard(1) : dt.Replicate()));
      const gpu = mesh.deviceType === 'cuda';
      const dtype = gpu ? 'bfloat16' : 'float32';
      const make = (shape: number[], seed: number, placements?: dt.Placement[]) => dt.randn(shape, { seed, mesh, placements, dtype });
      const h = make([2, 8, 64], 1, tokens); // tokens split over the last mesh dim
      const [scale, shift, a] = [make([2, 1, 64], 2), make([2, 1, 64], 3), make([16, 64], 4)];
      // the norm's output dies at the join (fused), or the program keeps it (`keep`: two kernels)
      const joined = (t: dt.Tensor[], keep = (n: dt.Tensor) => n) => () => {
        const n = keep(dt.F.layerNorm(t[0]!, [64]).mul(t[1]!.add(1)).add(t[2]!));
        return dt.cat([n, dt.F.linear(n, t[3]!)], -1);
      };
      const fused = await run(joined([h, scale, shift, a]));
      const kept: dt.Tensor[] = [];
      const unfused = await run(joined([h, scale, shift, a], (n) => dt.keep(kept[kept.push(n) - 1]!)));
      expect(unfused.kernels - fused.kernels).toBe(mesh.size); // the norm and the join: one kernel on every rank
      // the same ops on one device, fused the same way
      const device = new dt.DeviceMesh(mesh.deviceType, [mesh.devices[0]!]);
      const local = [h, scale, shift, a].map((t) => dt.keep(t.redistribute(device, [dt.Replicate()])));
      const single = await run(joined(local));
      // unfused: the same bits on CPUs, one bfloat16 ulp on GPUs (A x may run another cuBLAS kernel
      // in place); one device: its gemm may sum in another order for another number of rows
      for (const [other, tolerance] of [
        [unfused, gpu ? 2 ** -7 : 0],
        [single, gpu ? 2 ** -7 : 1e-5],
      ] as const) {
        const worst = Math.max(...Array.from(fused.value, (v, i) => Math.abs(v - other.value[i]!) / Math.max(1, Math.abs(other.value[i]!))));
        expect(worst).toBeLessThanOrEqual(tolerance);
      }
      dt.dispose([h, scale, shift, a, ...kept, ...local]);
    });
  }
});
