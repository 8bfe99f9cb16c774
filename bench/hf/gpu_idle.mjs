// Where a traced run's GPU sat idle (dt.cuda.traceKernels' per-device summary), as the bench/hf
// rows report it beside gpu_busy_ms: in gaps by their length, the
// longest named by the kernels around them (short gaps: kernels issued more slowly than they
// run; long ones: the GPU waited for the program).
const NAME_CHARS = 80;

export function idleFields(busy) {
  if (!busy) return {};
  const ms = (v) => +v.toFixed(3);
  return {
    gpu_idle_ms: { under_20us: ms(busy.idleByGap.shortMs), '20_200us': ms(busy.idleByGap.mediumMs), over_200us: ms(busy.idleByGap.longMs) },
    gpu_longest_gaps: busy.longestGaps.map((g) => ({ ms: ms(g.ms), at_ms: ms(g.atMs), before: g.before.slice(0, NAME_CHARS), after: g.after.slice(0, NAME_CHARS) })),
  };
}
