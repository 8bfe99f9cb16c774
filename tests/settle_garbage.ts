// Before a test that counts live tensors: tensors earlier tests dropped without dispose() are
// collected now (the FinalizationRegistry releases them), not in the middle of the count.
import { setImmediate } from 'node:timers/promises';

export async function settleGarbage(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('settleGarbage needs node --expose-gc (vitest.config.base.ts passes it)');
  for (let i = 0; i < 3; i++) {
    gc();
    await setImmediate(); // finalizers run in a later task
  }
}
