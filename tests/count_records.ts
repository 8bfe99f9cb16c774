// How many ops of one kind a piece of a program records: the engine's record call counted while
// `run` runs (tests that check which ops a model records, e.g. one matmul where three were).
import { engine } from '@dtorch/core';

/** How many ops named `name` `run` records. */
export function countRecords(name: string, run: () => void): number {
  const e = engine() as unknown as { record: (code: number, nIn: number, nAttr: number) => void; ops: Record<string, { code: number }> };
  const code = e.ops[name]!.code;
  const original = e.record;
  let count = 0;
  e.record = function (this: unknown, c: number, nIn: number, nAttr: number) {
    if (c === code) count++;
    return original.call(e, c, nIn, nAttr);
  };
  try {
    run();
  } finally {
    e.record = original;
  }
  return count;
}
