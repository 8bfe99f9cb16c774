// hf.registry, the one list of what DTorch loads by name: the table of docs/hf.md ("What DTorch
// loads by name") and the built-in models docs/cli.md names equal it; each entry is the class it
// names; each built-in tiny pipeline's spec (assets/tiny-pipelines) names its pipeline and only
// registered parts.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as hf from '@dtorch/hf';

const doc = (name: string) => readFileSync(fileURLToPath(new URL(`../../docs/${name}`, import.meta.url)), 'utf8');

// the table's rows: first cell's words to the names in backticks of the second
function registryTable(): Map<string, string[]> {
  const section = doc('hf.md').split('## What DTorch loads by name')[1]!.split('\n## ')[0]!;
  const rows = new Map<string, string[]>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 4 || cells[1] === 'kind' || cells[1]!.startsWith('---')) continue;
    rows.set(cells[1]!.split(' (')[0]!, [...cells[2]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
  }
  return rows;
}

describe('hf.registry', () => {
  const table = registryTable();

  it("equals docs/hf.md's table", () => {
    const sorted = (names: Iterable<string>) => [...names].sort();
    expect([...table.keys()]).toEqual(['models', 'schedulers', 'tokenizers', 'pipelines', 'built-in tiny pipelines', 'built-in trained pipelines']);
    expect(sorted(table.get('models')!)).toEqual(sorted(Object.keys(hf.registry.models)));
    expect(sorted(table.get('schedulers')!)).toEqual(sorted(Object.keys(hf.registry.schedulers)));
    expect(sorted(table.get('tokenizers')!)).toEqual(sorted(hf.registry.tokenizers));
    expect(sorted(table.get('pipelines')!)).toEqual(sorted(Object.keys(hf.registry.pipelines)));
    // `tiny-flux` (a `FluxPipeline`), ...: the names and the pipelines they are
    const tiny = table.get('built-in tiny pipelines')!;
    const pairs = Object.entries(hf.registry.tinyPipelines).flatMap(([name, t]) => [name, t.pipeline]);
    expect(tiny).toEqual(pairs);
    const trained = Object.entries(hf.registry.trainedPipelines).flatMap(([name, t]) => [name, t.pipeline]);
    expect(table.get('built-in trained pipelines')).toEqual(trained);
  });

  it('names each built-in pipeline in docs/cli.md', () => {
    for (const name of [...Object.keys(hf.registry.tinyPipelines), ...Object.keys(hf.registry.trainedPipelines)]) expect(doc('cli.md')).toContain(`\`${name}\``);
  });

  it('holds each class under its own name', async () => {
    for (const [name, entry] of Object.entries(hf.registry.models)) {
      expect(entry.model.name).toBe(name);
      expect(entry.model.prototype).toBeInstanceOf(hf.PreTrainedModel);
    }
    for (const [name, cls] of Object.entries(hf.registry.schedulers)) expect(cls.name).toBe(name);
    for (const [name, load] of Object.entries(hf.registry.pipelines)) {
      const cls = await load();
      expect(cls.name).toBe(name);
      expect((cls as unknown as { prototype: unknown }).prototype).toBeInstanceOf(hf.DiffusionPipeline);
    }
    expect(hf.registry.models['FluxTransformer2DModel']!.model).toBe(hf.FluxTransformer2DModel);
    expect(hf.registry.pipelines['FluxPipeline']).toBeTypeOf('function');
    expect(await hf.registry.pipelines['StableDiffusion3Pipeline']!()).toBe(hf.StableDiffusion3Pipeline);
  });

  it("makes each tiny pipeline from a spec whose model_index.json names it and only registered parts", () => {
    const known = new Set<string>([...Object.keys(hf.registry.models), ...Object.keys(hf.registry.schedulers), ...hf.registry.tokenizers]);
    for (const [name, tiny] of Object.entries(hf.registry.tinyPipelines)) {
      const spec = hf.tinyPipelineSpec(name);
      expect(spec.model_index['_class_name']).toBe(tiny.pipeline);
      const parts = Object.entries(spec.model_index).filter(([key, v]) => !key.startsWith('_') && Array.isArray(v) && v[1] !== null);
      for (const [part, [, cls]] of parts as [string, [string, string]][]) expect(known.has(cls), `${name}'s ${part} is a ${cls}`).toBe(true);
    }
  });
});
