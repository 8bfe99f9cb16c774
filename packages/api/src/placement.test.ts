import { describe, expect, it } from 'vitest';
import { Partial, Replicate, Shard, formatPlacements, normalizePlacements, placementFromCode } from './placement.js';

describe('placements', () => {
  it('are frozen values that compare by value', () => {
    expect(Shard(0).equals(Shard(0))).toBe(true);
    expect(Shard(0).equals(Shard(1))).toBe(false);
    expect(Replicate().equals(Replicate())).toBe(true);
    expect(Partial().equals(Partial('sum'))).toBe(true);
    expect(Partial('max').equals(Partial('sum'))).toBe(false);
    expect(Object.isFrozen(Shard(2))).toBe(true);
    expect(() => {
      (Shard(0) as { dim: number }).dim = 3;
    }).toThrow();
  });

  it('print short and long', () => {
    expect(formatPlacements([Shard(0), Replicate(), Partial()])).toBe('[S(0), R, P(sum)]');
    expect(Shard(1).describe()).toBe('Shard(dim=1)');
    expect(Replicate().describe()).toBe('Replicate()');
    expect(Partial('avg').describe()).toBe('Partial(reduce=avg)');
  });

  it('round-trip through their wire codes', () => {
    for (const p of [Shard(0), Shard(3), Replicate(), Partial('sum'), Partial('avg'), Partial('max'), Partial('min')]) {
      expect(placementFromCode(p.code()).equals(p)).toBe(true);
    }
  });

  it('reject bad arguments', () => {
    expect(() => Shard(0.5)).toThrow('Expected integer in [-2147483648, 2147483647] for Shard dim but received 0.5 of type number');
    // placements cross to native as int32 codes
    expect(() => Shard(2 ** 31)).toThrow('for Shard dim but received 2147483648');
    // a Symbol is described, not converted (a template string would throw a TypeError)
    const symbol = Symbol('x');
    expect(() => normalizePlacements([symbol], 1, 1, 'zeros')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('for zeros placements but received [Symbol(x)] of type array') }),
    );
    expect(() => Partial('prod' as never)).toThrow('Expected one of sum, avg, max, min for Partial reduce');
  });
});
