// What the run so far captured and replayed as CUDA graphs (dt.graph.stats), as the bench/hf
// rows report it: one shape for diffusion_models, pipelines and text_encoders.
import * as dt from '@dtorch/api';

const GIB = 1024 ** 3;

export function graphCounters() {
  const g = dt.graph.stats();
  return {
    captured: g.captured, replays: g.replays, replayed_kernels: g.replayedKernels, fallbacks: g.fallbacks, live: g.liveGraphs,
    gib: +(g.graphBytes / GIB).toFixed(3), segments: g.segments, repeats: g.repeats,
  };
}
