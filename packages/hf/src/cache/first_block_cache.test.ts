// roundToDtype: the host's rounding of First-Block Cache's statistic to the residual's dtype, as
// a cast on the device rounds (to nearest, ties to even).
import { describe, expect, it } from 'vitest';
import { roundToDtype } from './first_block_cache.js';

describe('roundToDtype', () => {
  it('rounds to bfloat16, float16 and float32 as a cast does', () => {
    // bfloat16 near 0.42: steps of 2^-9
    expect(roundToDtype(0.4215, 'bfloat16')).toBe(0.421875);
    expect(roundToDtype(0.4273, 'bfloat16')).toBe(0.427734375);
    // ties go to the even mantissa: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7
    expect(roundToDtype(1 + 2 ** -8, 'bfloat16')).toBe(1);
    expect(roundToDtype(1 + 3 * 2 ** -8, 'bfloat16')).toBe(1 + 2 ** -6);
    expect(roundToDtype(-0.4215, 'bfloat16')).toBe(-0.421875);
    // float16: steps of 2^-12 near 0.42
    expect(roundToDtype(0.4215, 'float16')).toBe(Math.round(0.4215 * 4096) / 4096);
    expect(roundToDtype(0.1, 'float32')).toBe(Math.fround(0.1));
    expect(roundToDtype(0.1, 'float64')).toBe(0.1);
    expect(roundToDtype(Infinity, 'bfloat16')).toBe(Infinity);
  });
});
