// Steps applied one after another with each intermediate freed as soon as it has been read.
/**
 * x through each step in turn, each intermediate freed as soon as the next step has read it (x is
 * left as it is): the decoder's activations at 1024² are 256-512 MiB each, and a scope's tidy
 * would hold them all to its end. `x`: a tensor, or anything that frees itself (a row split).
 */
export function through<T extends { dispose(): void }>(x: T, steps: Iterable<(t: T) => T>): T {
  let h = x;
  for (const step of steps) {
    const next = step(h);
    if (h !== x) h.dispose();
    h = next;
  }
  return h;
}
