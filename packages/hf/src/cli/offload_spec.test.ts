// --offload's parser: model, group, group:N; anything else one clear error.
import { describe, expect, it } from 'vitest';
import { parseOffload } from './offload_spec.js';

describe('parseOffload', () => {
  it('reads model, group and group:N', () => {
    expect(parseOffload('model')).toEqual({ kind: 'model' });
    expect(parseOffload('group')).toEqual({ kind: 'group', numBlocksPerGroup: 1 });
    expect(parseOffload('group:4')).toEqual({ kind: 'group', numBlocksPerGroup: 4 });
  });

  it('refuses other kinds, N that is not a positive integer, and extra parts', () => {
    for (const bad of ['', 'sequential', 'group:0', 'group:-1', 'group:1.5', 'group:x', 'group:', 'model:2', 'group:2:3', 'Group']) {
      expect(() => parseOffload(bad), bad).toThrow(`Expected model, group or group:N (N blocks to a group, a positive integer) for --offload, but received ${JSON.stringify(bad)}.`);
    }
  });
});
