// A kernel that fails on a worker, long after its op was recorded, names the JS line that
// recorded it: with the defaults (capture within a time budget), with 'all', and says so when off.
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { runNode } from './run_node.js';

// 16 PiB of float32: no address space holds it, so the kernel fails whatever the overcommit policy
function recordFailingEmpty(): dt.Tensor {
  return dt.empty([2 ** 52]);
}

async function failure(t: dt.Tensor): Promise<Error> {
  const rejection = await t.sum().data().catch((e: unknown) => e);
  expect(rejection).toBeInstanceOf(dt.DTorchError);
  expect((rejection as dt.DTorchError).code).toBe('KERNEL_FAILED');
  return rejection as Error;
}

// records flat out: more than the capture budget's burst
function busyLoop(steps: number): void {
  let x = dt.zeros([1]);
  for (let i = 0; i < steps; i++) {
    const next = x.add(1);
    x.dispose();
    x = next;
  }
  x.dispose();
}

describe('the call site of a kernel that fails later', () => {
  afterEach(() => dt.setCaptureStacks(true));

  it('is named with the defaults, also right after a loop that recorded flat out', async () => {
    busyLoop(50_000);
    await new Promise((r) => setTimeout(r, 50)); // the program waits (as on a read); the budget refills
    const err = await failure(recordFailingEmpty());
    expect(err.message).toMatch(/^empty failed: /);
    expect(err.message).toMatch(/\n {2}recorded at:\n {4}at recordFailingEmpty \(.*kernel_call_sites\.test\.ts:\d+:\d+\)/);
    expect(err.message).not.toMatch(/packages[\\/](api|core)/);
  });

  it("is named for every op with 'all', in the middle of a busy loop", async () => {
    dt.setCaptureStacks('all');
    busyLoop(5_000);
    const t = recordFailingEmpty();
    busyLoop(2_000); // fewer than the 4,096 newest sites kept
    expect((await failure(t)).message).toMatch(/recorded at:\n {4}at recordFailingEmpty \(.*kernel_call_sites\.test\.ts/);
  });

  it('is not named when capture is off, and the message says how to turn it on', async () => {
    dt.setCaptureStacks(false);
    expect((await failure(recordFailingEmpty())).message).toContain(
      'recorded at:\n    (call sites are not captured: dt.setCaptureStacks(false); DTORCH_CAPTURE_STACKS=1 captures them)',
    );
  });

  it.each([
    [{ NODE_ENV: 'production' }, 'NODE_ENV=production'],
    [{ DTORCH_CAPTURE_STACKS: '0' }, 'DTORCH_CAPTURE_STACKS=0'],
  ])('names the setting that turned capture off (%o)', (env, because) => {
    const script = `
      import * as dt from '@dtorch/api';
      const e = await dt.empty([2 ** 52]).sum().data().catch((e) => e);
      console.log(JSON.stringify(e.message));`;
    const r = runNode(script, { NODE_ENV: undefined, DTORCH_CAPTURE_STACKS: undefined, ...env });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').pop()!)).toContain(`(call sites are not captured: ${because}; DTORCH_CAPTURE_STACKS=1 captures them)`);
  });
});
