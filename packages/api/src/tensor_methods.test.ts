// Tensor's op methods are written from the op functions (scripts/gen-tensor-methods.mjs): a
// function whose doc says `@see {@link Tensor.<name>}` is also that method.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../../../scripts/gen-tensor-methods.mjs', import.meta.url));

describe('Tensor op methods', () => {
  it('are in step with the op functions (tensor.ts as the generator writes it)', () => {
    expect(execFileSync(process.execPath, [script, '--check'], { encoding: 'utf8' })).toMatch(/up to date/);
  });
});
