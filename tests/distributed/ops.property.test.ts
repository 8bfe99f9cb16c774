// Property suite: every op on random shapes and random input placements over meshes of 1, 2, 3,
// 4, 2x2 and 2x3 CPU devices either matches a signature row and then equals the same op on one
// device (bit-exact for arithmetic elementwise ops and casts, Partial results included: the
// inputs are small integers, so parts and sums are exact; <= 1e-6 relative for exp, sigmoid and
// tanh, whose LibTorch kernels take a vector or a scalar path depending on the length of the
// piece; <= 1e-5 relative for sum, mean, matmul), or
// throws PLACEMENT_MISMATCH naming the op, the inputs' placements, the legal rows and a fix.
// A refusal is not taken on trust: for the ops the placement oracle models (placement_oracle.ts:
// elementwise unary and binary, scalar arithmetic, matmul, sum, mean, linear) with Partial(sum)
// or no Partial, the oracle must find the combination illegal, or list why it is refused.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { drawCase, expectCaseLikeOneDevice, type OpCase } from './op_cases.js';
import { Gen, propertyMeshes, propertySeed } from './random.js';
import * as o from './placement_oracle.js';

const meshes = propertyMeshes();
const one = meshes[0]!;

// The oracle's reason to call a refused combination legal, or undefined when it agrees with the
// refusal (or cannot judge: Partial(avg) inputs, ops it does not model).
function legalButRefused(op: OpCase, placements: dt.Placement[][], mesh: dt.DeviceMesh, seed: number): string | undefined {
  if (!op.host || placements.some((ps) => ps.some((p) => p.isPartial() && p.reduce !== 'sum'))) return undefined;
  const pl = placements.map((ps) => ps.map((p): o.Pl => (p.isShard() ? o.S(p.dim) : p.isReplicate() ? o.R : o.P)));
  const judged = o.judge(op.host.f, o.drawInputs(new Gen(seed), op.shapes, seed, op.host.nonzero), pl, mesh.shape);
  if (judged.legal.size === 0 || judged.degenerate || o.listedRefusal(op.host.family, pl, mesh.shape)) return undefined;
  return `the oracle finds it legal: ${judged.slicings.join('; ')}`;
}

describe('ops on distributed tensors (property)', () => {
  it('equal the single-device result on every legal row and refuse every other: 400 cases', async () => {
    const g = new Gen(propertySeed + 3);
    let legal = 0;
    let illegal = 0;
    for (let i = 0; i < 400; i++) {
      const mesh = g.pick(meshes);
      const c = drawCase(g, mesh, i, propertySeed + 3);
      const { op, placements, what } = c;
      const e = await expectCaseLikeOneDevice(c, mesh, one);
      if (!e) {
        legal++;
        continue;
      }
      expect(e.code, `${what}: ${e.message}`).toBe('PLACEMENT_MISMATCH');
      expect(e.message, what).toMatch(/match no signature row on mesh dim \d+ .*Legal rows on one mesh dim/s);
      if (!op.composite) for (const p of placements) expect(e.message, what).toContain(dt.formatPlacements(p));
      expect(e.message, what).toMatch(/Fix: input #\d\.redistribute\(mesh, \[/);
      expect(legalButRefused(op, placements, mesh, propertySeed * 1000 + i), `${what}: refused`).toBeUndefined();
      illegal++;
    }
    // the generator must exercise both sides
    expect(legal).toBeGreaterThan(150);
    expect(illegal).toBeGreaterThan(30);
  });
});
