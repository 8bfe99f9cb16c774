import { describe, expect, it } from 'vitest';
import { DTorchError, ErrorCode, isDTorchError } from './errors.js';
import { checkInteger, checkShape, invalidParameter } from './check.js';

describe('DTorchError', () => {
  it('carries a code and a message and is an Error', () => {
    const err = new DTorchError(ErrorCode.ShapeMismatch, 'shapes [2, 3] and [4]');
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('DTorchError');
    expect(err.code).toBe('SHAPE_MISMATCH');
    expect(isDTorchError(err, ErrorCode.ShapeMismatch)).toBe(true);
    expect(isDTorchError(err, ErrorCode.Disposed)).toBe(false);
    expect(isDTorchError(new Error('x'))).toBe(false);
  });
});

describe('argument checks', () => {
  it('use one message format naming the parameter, the expectation and the value', () => {
    expect(invalidParameter('width', 'positive integer', 'spoons').message).toBe(
      'Expected positive integer for width but received "spoons" of type string',
    );
    expect(() => checkInteger('dim', 1.5)).toThrow('Expected integer for dim but received 1.5 of type number');
    expect(() => checkShape('shape', [2, -1])).toThrow('Expected shape (array of non-negative integers) for shape but received [2, -1] of type array');
    expect(checkShape('shape', [2, 0])).toEqual([2, 0]);
  });
});
