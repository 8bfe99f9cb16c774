// The native code's layers, bottom up: a file includes only from its own layer or one below it
// (DESIGN §3: "no layer includes from a layer above it"), and only the bindings see N-API.
// A layer that needs something of one above takes an interface it implements instead
// (graph/segment_sink.h, which the controller implements; cluster/sub_controller.h's
// StreamTarget, which the engine implements). docs/engine.md ("Native layers") explains each.
import { readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceFiles } from './source_files.ts';

const native = fileURLToPath(new URL('../../native/', import.meta.url));

const layers = [
  'common', // loading, logging, errors, settings
  'external', // LibTorch, CUDA and NCCL adapters, DTorch's own CUDA kernels
  'core/operand', // dtypes, placements, metas, meshes and their table, layouts
  'core/blob', // a worker's device memory (blobs) and the errors that replace them
  'core/membership', // which node of a cluster holds each device
  'core/program', // what the client records: nodes, segments, the completions reads answer through
  'core/communication', // collectives: groups, rendezvous, pulls, redistribute plans
  'core/operators', // op definitions: meta inference, signature rows, kernels
  'core/graph', // the recorder (client side), call traces, segment signatures
  'core/kernel', // a node lowered to one rank's kernel
  'core/kernel_stream', // workers running kernels, CUDA graph replays
  'core/cluster', // the op stream between nodes: codec, sub-controller, remote waits
  'core/runner', // controller, fusion, lowering caches, the engine
  'bindings', // N-API: the one layer JS sees
] as const;

// native/tests are C++ tests of any layer; gloo_shim stands in for Gloo's own headers.
const skipped = ['tests', join('external', 'torch', 'gloo_shim')];
const sources = () => sourceFiles(native, /\.(h|cpp|cu|cuh)$/, (path) => skipped.includes(relative(native, path)));

// The layer of a path under native/ ("core/graph/recorder.h" -> "core/graph"); undefined outside every layer.
function layerOf(path: string): string | undefined {
  const parts = path.split(/[\\/]/);
  const name = parts[0] === 'core' ? parts.slice(0, 2).join('/') : parts[0];
  return (layers as readonly string[]).includes(name!) ? name : undefined;
}

// Every `#include "..."` of `text` that names a native layer, with its line.
function includes(text: string): { line: number; path: string }[] {
  return text.split('\n').flatMap((line, i) => {
    const m = /^\s*#\s*include\s+"([^"]+)"/.exec(line);
    return m && layerOf(m[1]!) ? [{ line: i + 1, path: m[1]! }] : [];
  });
}

describe('native layers', () => {
  const files = sources().map((path) => ({ name: relative(native, path).split(sep).join('/'), text: readFileSync(path, 'utf8') }));

  it('finds the sources, each in a known layer', () => {
    expect(files.length).toBeGreaterThan(100);
    const outside = files.filter((f) => f.name !== 'pch.h' && !layerOf(f.name)).map((f) => f.name);
    expect(outside, 'a new native folder: add it to `layers` where it belongs').toEqual([]);
  });

  it('has no include that points up a layer', () => {
    const rank = (path: string) => layers.indexOf(layerOf(path) as (typeof layers)[number]);
    const upward = files.flatMap((f) =>
      includes(f.text)
        .filter((inc) => rank(inc.path) > rank(f.name))
        .map((inc) => `${f.name}:${inc.line} includes ${inc.path} (${layerOf(f.name)} is below ${layerOf(inc.path)})`),
    );
    expect(upward).toEqual([]);
  });

  it('keeps N-API in the bindings', () => {
    const napi = files.filter((f) => layerOf(f.name) !== 'bindings' && /#\s*include\s*[<"]napi\.h[>"]/.test(f.text)).map((f) => f.name);
    expect(napi).toEqual([]);
  });

  it('reads includes and layers as the check above needs', () => {
    expect(layerOf('core/graph/recorder.h')).toBe('core/graph');
    expect(layerOf('external/cuda/kernels/cat_rows.h')).toBe('external');
    expect(layerOf('gloo/context.h')).toBeUndefined();
    expect(includes('#include "core/runner/controller.h"\n#include <vector>\n  # include "common/log.h"\n#include "gloo/x.h"')).toEqual([
      { line: 1, path: 'core/runner/controller.h' },
      { line: 3, path: 'common/log.h' },
    ]);
  });
});
