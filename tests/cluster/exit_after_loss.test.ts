// A main program that loses a worker (SIGKILL) while collectives over a mesh spanning it are in
// flight, and then ends at once, without awaiting dt.sync(): by process.exit(), or by the event
// loop ending once the cluster is shut down. It exits with its own code: no abort. The engine stops
// on 'exit', and what its ranks still deliver then (reads failing as their collectives end) may
// reach the binding's thread-safe functions while Node tears the environment down, when no JS can
// run: a Napi::Error thrown there was std::terminate ("terminate called after throwing an instance
// of 'Napi::Error'", SIGABRT). The third case makes that happen every time: a read made on 'exit',
// before the engine's stop, whose result comes in during the teardown; it is dropped with a line.
import { afterEach, describe, expect, it } from 'vitest';
import { startNode, stopAll, within } from './cluster_processes.js';

afterEach(() => stopAll());

// collectives that wait on the killed worker give up within 2 s
const env = { DTORCH_COLLECTIVE_TIMEOUT_MS: '2000' };

async function run(how: 'exit' | 'end' | 'read-at-exit') {
  const child = startNode(['tests/cluster/exit_after_loss_program.mjs', how], env);
  const { code, signal } = await within(`the program (${how})`, 40_000, child.exited, [child]);
  return { code, signal, output: `${how}: ${child.output()}` };
}

describe('a main program that loses a worker mid-collective and ends at once', () => {
  it('exits with its own code, by process.exit(), by the event loop ending, and with a read coming in at teardown', async () => {
    const runs = await Promise.all([run('exit'), run('end'), run('read-at-exit')]);
    for (const r of runs) {
      expect(r.signal, r.output).toBe(null);
      expect(r.code, r.output).toBe(0);
      expect(r.output).toContain('killed');
      expect(r.output).not.toMatch(/terminate called|Aborted/);
    }
    expect(runs[2]!.output).toMatch(/\[dtorch native warn\] a read's result was dropped/);
  }, 60_000);
});
