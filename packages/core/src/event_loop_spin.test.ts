import { describe, expect, it } from 'vitest';
import { EventLoopSpin } from './event_loop_spin.js';

// Resolves after `n` turns of the event loop (setImmediate callbacks).
const turns = (n: number) => new Promise<void>((done) => (n <= 0 ? done() : setImmediate(() => void turns(n - 1).then(done))));
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

describe('EventLoopSpin', () => {
  it('turns the loop while a wait is pending, and stops once it is answered', async () => {
    const spin = new EventLoopSpin(10_000_000); // 10 s: only the answer stops it here
    let answer!: (v: number) => void;
    const pending = new Promise<number>((done) => (answer = done));
    expect(spin.around(pending)).toBe(pending);
    expect(spin.turning).toBe(true);
    await turns(5);
    expect(spin.turning).toBe(true); // still waiting: still turning
    answer(7);
    expect(await pending).toBe(7);
    await turns(2);
    expect(spin.turning).toBe(false);
  });

  it('turns one loop for several waits, until the last is answered', async () => {
    const spin = new EventLoopSpin(10_000_000); // 10 s: only the answers stop it (10 ms ran out under CI's load)
    const answers: (() => void)[] = [];
    const waits = [0, 1, 2].map(() => spin.around(new Promise<void>((done) => answers.push(done))));
    answers[0]!();
    answers[1]!();
    await Promise.all(waits.slice(0, 2));
    await turns(2);
    expect(spin.turning).toBe(true); // the third is pending
    answers[2]!();
    await waits[2];
    await turns(2);
    expect(spin.turning).toBe(false);
  });

  it('stops after its spin when no answer comes, and passes a rejection on as it is', async () => {
    const spin = new EventLoopSpin(1000); // 1 ms
    void spin.around(new Promise<void>(() => {})); // never answered
    expect(spin.turning).toBe(true);
    await sleep(50);
    expect(spin.turning).toBe(false); // no hang: the loop may sleep again
    const failure = new Error('kernel failed');
    await expect(spin.around(Promise.reject(failure))).rejects.toBe(failure);
  });

  it('never turns the loop with a spin of 0', () => {
    const spin = new EventLoopSpin(0);
    const pending = new Promise<void>(() => {});
    expect(spin.around(pending)).toBe(pending);
    expect(spin.turning).toBe(false);
  });
});
