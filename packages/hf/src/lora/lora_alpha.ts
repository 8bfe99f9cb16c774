// Each module's alpha (it runs with scale alpha / rank), as diffusers decides it when it loads a
// file into PEFT: from the LoraConfig diffusers' save_lora_weights writes into the header
// (`lora_adapter_metadata`: "<component>.lora_alpha", ".alpha_pattern", ".use_rslora", ...), else
// from the file's own alpha tensors (kohya's ".alpha"), else alpha = rank (scale 1: the
// convention of files that carry neither, B A is the delta as it is).
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { ModuleLora } from './lora_formats.js';

/** A component's LoraConfig fields from the header, those that change what a module adds. */
export interface ComponentLoraConfig {
  /** lora_alpha: every module's alpha unless alpha_pattern names it. */
  readonly loraAlpha: number;
  /** Module-name patterns (PEFT's: a suffix of the path, or a regular expression) -> alpha. */
  readonly alphaPattern: ReadonlyMap<string, number>;
  /** rsLoRA: the scale is alpha / sqrt(rank). */
  readonly useRslora: boolean;
}

/**
 * The LoraConfig of each component in `metadata` (the header's `__metadata__`), by component
 * name; empty when the file has none. Settings DTorch cannot run (DoRA, a bias on B) are errors.
 */
export function componentConfigs(path: string, metadata: Readonly<Record<string, string>>): Map<string, ComponentLoraConfig> {
  const out = new Map<string, ComponentLoraConfig>();
  const text = metadata['lora_adapter_metadata'];
  if (text === undefined) return out;
  let fields: Record<string, unknown>;
  try {
    fields = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new DTorchError(ErrorCode.BadFile, `${path}: its header's lora_adapter_metadata is not JSON (${(err as Error).message}); re-save the LoRA with diffusers' save_lora_weights`);
  }
  if (typeof fields !== 'object' || fields === null) throw new DTorchError(ErrorCode.BadFile, `${path}: its header's lora_adapter_metadata is not a JSON object`);
  const components = new Set(Object.keys(fields).filter((k) => k.endsWith('.lora_alpha')).map((k) => k.slice(0, -'.lora_alpha'.length)));
  for (const c of components) {
    const field = (name: string) => fields[`${c}.${name}`];
    const bad = (name: string, want: string) => new DTorchError(ErrorCode.BadFile, `${path}: lora_adapter_metadata's ${c}.${name} must be ${want}, got ${JSON.stringify(field(name))}`);
    const loraAlpha = field('lora_alpha');
    if (typeof loraAlpha !== 'number' || !(loraAlpha > 0)) throw bad('lora_alpha', 'a positive number');
    const pattern = field('alpha_pattern') ?? {};
    if (typeof pattern !== 'object' || pattern === null || Array.isArray(pattern) || !Object.values(pattern).every((v) => typeof v === 'number' && v > 0)) throw bad('alpha_pattern', 'an object of positive numbers');
    if (field('use_dora') === true) throw new DTorchError(ErrorCode.BadFile, `${path}: the ${c} adapter is DoRA (use_dora), which DTorch does not run; use a plain LoRA`);
    if (field('lora_bias') === true) throw new DTorchError(ErrorCode.BadFile, `${path}: the ${c} adapter has a bias on lora_B (lora_bias), which DTorch does not run; use a LoRA without biases`);
    out.set(c, { loraAlpha, alphaPattern: new Map(Object.entries(pattern as Record<string, number>)), useRslora: field('use_rslora') === true });
  }
  return out;
}

/**
 * The alpha of the module at `modulePath` (inside its component, as the file names it) for our
 * scale alpha / rank: the component's config when the file has one, else the module's alpha
 * tensor, else its rank.
 */
export function moduleAlpha(path: string, modulePath: string, lora: ModuleLora, config: ComponentLoraConfig | undefined): number {
  const rank = lora.a.shape[0]!;
  if (!config) return lora.alpha ?? rank;
  const pattern = matchingPattern(path, [...config.alphaPattern.keys()], modulePath);
  const alpha = pattern === undefined ? config.loraAlpha : config.alphaPattern.get(pattern)!;
  // rsLoRA's alpha / sqrt(rank) is (alpha · sqrt(rank)) / rank
  return config.useRslora ? alpha * Math.sqrt(rank) : alpha;
}

// PEFT's get_pattern_key: the first pattern that matches the path whole or a suffix of it after a '.'
function matchingPattern(path: string, patterns: readonly string[], modulePath: string): string | undefined {
  return patterns.find((p) => {
    let re: RegExp;
    try {
      re = new RegExp(`^(?:.*\\.)?(?:${p})$`);
    } catch {
      throw new DTorchError(ErrorCode.BadFile, `${path}: lora_adapter_metadata's alpha_pattern key ${JSON.stringify(p)} is not a valid pattern`);
    }
    return re.test(modulePath);
  });
}
