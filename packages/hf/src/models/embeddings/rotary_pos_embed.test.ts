// Flux's rotary tables against diffusers' FluxPosEmbed as FluxTransformer2DModel builds it (theta
// 10000, FLUX.1-dev's axes [16, 56, 56]) at position ids in the hundreds to thousands
// (tools/reference/make_flux_fixtures.py, flux_rotary.safetensors): within 1e-6, where the tiny
// models' small positions cannot tell a wrong rotary base.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { readSafetensorsHeader, readTensorBytes } from '@dtorch/external';
import { FluxTransformer2DConfig } from '../flux/flux_transformer_config.js';
import { rotaryFromIds } from './rotary_pos_embed.js';

const fixture = readSafetensorsHeader(fileURLToPath(new URL('../../../../../tests/fixtures/hf/models/flux_rotary.safetensors', import.meta.url)));
const read = (name: string) => new Float32Array(readTensorBytes(fixture, name).buffer);

describe('rotaryFromIds', () => {
  it("gives diffusers' FluxPosEmbed tables at large positions", async () => {
    const [rows] = fixture.tensors.get('ids')!.shape;
    const ids = dt.fromBuffer(readTensorBytes(fixture, 'ids'), 'float32', [rows!, 3]);
    expect(Math.max(...read('ids')), 'positions in the thousands').toBeGreaterThan(4000);
    // the axes as FluxTransformer2DModel reads them, the base rotaryFromIds' own (as the model calls it)
    const [cos, sin] = rotaryFromIds(ids, FluxTransformer2DConfig.fromDict({}).axesDimsRope);
    for (const [name, got] of [['cos', cos], ['sin', sin]] as const) {
      const [g, want] = [(await got.data()) as Float32Array, read(name)];
      expect(g.length, name).toBe(want.length);
      let worst = 0;
      want.forEach((w, i) => void (worst = Math.max(worst, Math.abs(g[i]! - w))));
      expect(worst, `${name}: largest difference`).toBeLessThanOrEqual(1e-6);
    }
    dt.dispose([ids, cos, sin]);
  });
});
