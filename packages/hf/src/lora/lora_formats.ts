// The LoRA layouts people share for Flux (kohya / sd-scripts and its ComfyUI naming, BFL's, XLabs')
// rewritten into diffusers' module paths on the host, as diffusers' FluxLoraLoaderMixin.lora_state_dict
// and lora_conversion_utils do, with two deliberate differences: alpha is returned per module
// instead of being folded into the weights (scale = alpha / rank gives diffusers' delta), and keys
// diffusers drops or fails on are listed in `unknown` instead. Only bytes move: a fused matrix is
// split by rows of B (each part keeps A whole), BFL's (shift, scale) halves are swapped by rows.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { safetensorsDtypes } from '@dtorch/external';
import { fluxBflDoubleBlock, fluxBflSingleBlock, fluxBflTop, type BflModule, type BflModules } from '../models/flux/flux_bfl_layout.js';
import type { LoraTensor } from './lora_state_dict.js';

/** The layout a LoRA file was written in (SD3's kohya files are 'kohya' too). */
export type LoraLayout = 'diffusers' | 'kohya' | 'bfl' | 'xlabs';

/** One module's LoRA in diffusers' (PEFT's) form. */
export interface ModuleLora {
  /** lora_A [rank, in]. */
  a: LoraTensor;
  /** lora_B [out, rank]. */
  b: LoraTensor;
  /** Runs with scale alpha / rank; undefined when the file gives none (the caller decides, from metadata). */
  alpha?: number;
}

/** A LoRA file in diffusers' module paths (Flux's: fluxLoraToDiffusers; SD3's: sd3LoraToDiffusers). */
export interface DiffusersLora {
  /** The layout the file was in. */
  layout: LoraLayout;
  /** `<component>.<module path>` -> the module's LoRA: A [rank, in] and B [out, rank] (diffusers/PEFT lora_A / lora_B). component: transformer | text_encoder | text_encoder_2. Module paths as diffusers names modules (FluxTransformer2DModel: transformer_blocks.0.attn.to_q, single_transformer_blocks.3.proj_mlp, norm_out.linear, ...). */
  modules: Map<string, ModuleLora>;
  /** Keys of the file this function did not understand (never silently dropped). */
  unknown: string[];
}

/** Where one linear of a file goes: the diffusers modules its rows feed (a layout row), and whether its alpha counts. */
export interface LoraTarget extends Pick<BflModule, 'modules' | 'parts' | 'shiftScale'> {
  /** diffusers' kohya converter ignores final_layer alphas ("TODO: alphas"): these run with scale 1. */
  alphaIgnored?: boolean;
}

/** The linears of a layout table (norms take no LoRA), by BFL's name. */
function linearTargets(table: BflModules): Map<string, LoraTarget> {
  const linears = Object.entries(table).filter(([, m]) => m.kind === 'linear');
  return new Map(linears.map(([name, m]) => [name, name.startsWith('final_layer.') ? { ...m, alphaIgnored: true } : m]));
}

// sd-scripts' names are BFL's with "." -> "_" after "lora_unet_"; ComfyUI's after "diffusion_model.".
const doubleBlockTargets = linearTargets(fluxBflDoubleBlock);
const singleBlockTargets = linearTargets(fluxBflSingleBlock);
const topTargets = linearTargets(fluxBflTop);

// XLabs' processor LoRAs (x-flux) -> diffusers'; diffusers maps single blocks' qkv_lora to linear1's q, k, v only.
const xlabsDoubleTargets: Record<string, LoraTarget> = {
  qkv_lora1: doubleBlockTargets.get('img_attn.qkv')!,
  proj_lora1: doubleBlockTargets.get('img_attn.proj')!,
  qkv_lora2: doubleBlockTargets.get('txt_attn.qkv')!,
  proj_lora2: doubleBlockTargets.get('txt_attn.proj')!,
};
const linear1 = singleBlockTargets.get('linear1')!;
const xlabsSingleTargets: Record<string, LoraTarget> = {
  qkv_lora: { modules: linear1.modules.slice(0, 3), parts: linear1.parts!.slice(0, 3) },
  proj_lora: singleBlockTargets.get('linear2')!,
};

const underscored = (table: Map<string, LoraTarget>): Map<string, LoraTarget> => new Map([...table].map(([name, target]) => [name.replaceAll('.', '_'), target]));
const sdDouble = underscored(doubleBlockTargets);
const sdSingle = underscored(singleBlockTargets);
const sdTop = underscored(topTargets);

/** The target of an sd-scripts unet name (without "lora_unet_"), with block paths filled in. */
function sdScriptsTarget(name: string): LoraTarget | undefined {
  const block = /^(double|single)_blocks_(\d+)_(.+)$/.exec(name);
  if (!block) return sdTop.get(name);
  const [, kind, index, rest] = block;
  const target = (kind === 'double' ? sdDouble : sdSingle).get(rest!);
  const prefix = kind === 'double' ? `transformer_blocks.${index}.` : `single_transformer_blocks.${index}.`;
  return target && { ...target, modules: target.modules.map((m) => prefix + m) };
}

// diffusers' own paths with "." -> "_", as the "lora_transformer_" files of diffusers' "mixture" branch
// name them; derived from the tables above so that every Flux linear is here once.
const diffusersBlockPaths = (table: Map<string, LoraTarget>) => [...new Set([...table.values()].flatMap((t) => t.modules))];
const mixtureDouble = new Map(diffusersBlockPaths(doubleBlockTargets).map((m) => [m.replaceAll('.', '_'), m]));
const mixtureSingle = new Map(diffusersBlockPaths(singleBlockTargets).map((m) => [m.replaceAll('.', '_'), m]));
const mixtureTop = new Map(diffusersBlockPaths(topTargets).map((m) => [m.replaceAll('.', '_'), m]));

/** The diffusers path of a "lora_transformer_" name (without the prefix); diffusers itself maps only attention linears inside blocks. */
function mixtureModule(name: string): string | undefined {
  const block = /^(transformer_blocks|single_transformer_blocks)_(\d+)_(.+)$/.exec(name);
  if (!block) return mixtureTop.get(name);
  const [, kind, index, rest] = block;
  const path = (kind === 'transformer_blocks' ? mixtureDouble : mixtureSingle).get(rest!);
  return path && `${kind}.${index}.${path}`;
}

/** CLIP's module path of a kohya text-encoder name (after "lora_te_" / "lora_te1_"), as diffusers' _convert_text_encoder_lora_key and its later PEFT renaming give it. */
export function clipModule(name: string): string | undefined {
  const path = name
    .replaceAll('_', '.')
    .replace('text.model', 'text_model')
    .replace('self.attn', 'self_attn')
    .replace(/\.(q|k|v|out)\.proj$/, '.$1_proj');
  // the linears a CLIP LoRA adapts; diffusers drops text_projection and would mangle other names
  return /^(text_model\.)?encoder\.layers\.\d+\.(self_attn\.(q|k|v|out)_proj|mlp\.fc[12])$/.test(path) ? path : undefined;
}

// ---- bytes ----

const matrixDtypes = new Set(['F32', 'F16', 'BF16']);

function bad(key: string, what: string): DTorchError {
  return new DTorchError(ErrorCode.BadFile, `LoRA tensor "${key}": ${what}`);
}

function checkMatrix(t: LoraTensor, key: string): void {
  if (!matrixDtypes.has(t.dtype)) throw bad(key, `has dtype ${t.dtype}; LoRA weights must be F32, F16 or BF16 (re-save the file in one of them)`);
  if (t.shape.length !== 2) throw bad(key, `has shape [${t.shape}]; LoRA weights of linears are matrices (DTorch reads no convolution LoRAs)`);
  const expected = t.shape[0]! * t.shape[1]! * safetensorsDtypes[t.dtype];
  if (t.bytes.byteLength !== expected) throw bad(key, `holds ${t.bytes.byteLength} bytes but ${t.dtype} [${t.shape}] needs ${expected}; the file is damaged`);
}

/** The one number of an alpha tensor (shape [] or [1]). */
export function scalar(t: LoraTensor, key: string): number {
  if (t.shape.reduce((a, b) => a * b, 1) !== 1) throw bad(key, `has shape [${t.shape}]; an alpha is one number`);
  const view = new DataView(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
  switch (t.dtype) {
    case 'F64':
      return view.getFloat64(0, true);
    case 'F32':
      return view.getFloat32(0, true);
    case 'BF16':
      return new Float32Array(new Uint32Array([view.getUint16(0, true) << 16]).buffer)[0]!;
    case 'F16':
      return halfToNumber(view.getUint16(0, true));
    default:
      throw bad(key, `has dtype ${t.dtype}; an alpha is a floating-point number (as diffusers requires)`);
  }
}

function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/** Rows [from, from + count) of a matrix, as a view of its bytes (row-major: a row is contiguous). */
function rows(t: LoraTensor, from: number, count: number): LoraTensor {
  const rowBytes = t.shape[1]! * safetensorsDtypes[t.dtype];
  return { dtype: t.dtype, shape: [count, t.shape[1]!], bytes: t.bytes.subarray(from * rowBytes, (from + count) * rowBytes) };
}

/** The matrix with its second half of rows first. */
function swapHalves(t: LoraTensor, key: string): LoraTensor {
  const n = t.shape[0]!;
  if (n % 2 !== 0) throw bad(key, `has ${n} rows; the final adaLN's output is (shift, scale) halves, so an even count`);
  const half = t.bytes.byteLength / 2;
  const bytes = new Uint8Array(t.bytes.byteLength);
  bytes.set(t.bytes.subarray(half), 0);
  bytes.set(t.bytes.subarray(0, half), half);
  return { dtype: t.dtype, shape: t.shape, bytes };
}

/** Columns [col, col + count) of rows [row, row + nRows), copied. */
function block(t: LoraTensor, row: number, nRows: number, col: number, count: number): LoraTensor {
  const size = safetensorsDtypes[t.dtype];
  const rowBytes = t.shape[1]! * size;
  const bytes = new Uint8Array(nRows * count * size);
  for (let r = 0; r < nRows; r++) {
    const start = (row + r) * rowBytes + col * size;
    bytes.set(t.bytes.subarray(start, start + count * size), r * count * size);
  }
  return { dtype: t.dtype, shape: [nRows, count], bytes };
}

/** Whether every element of a block is ±0 (the sign and the rest of the bits: the high byte's top bit is the sign). */
function isZeroBlock(t: LoraTensor, row: number, nRows: number, col: number, count: number): boolean {
  const b = block(t, row, nRows, col, count).bytes;
  const size = safetensorsDtypes[t.dtype];
  for (let i = 0; i < b.length; i++) {
    const mask = i % size === size - 1 ? 0x7f : 0xff;
    if (b[i]! & mask) return false;
  }
  return true;
}

// ---- building the result ----

/** Adds module `name`; a second LoRA for it is an error naming `key`. */
export function add(out: DiffusersLora, name: string, lora: ModuleLora, key: string): void {
  if (out.modules.has(name)) throw bad(key, `is a second LoRA for module ${name}; keep one adapter per file`);
  out.modules.set(name, lora);
}

/** One down/up pair (and alpha) split over its target modules under "transformer.". */
export function addTarget(out: DiffusersLora, target: LoraTarget, a: LoraTensor, b: LoraTensor, alpha: number, upKey: string): void {
  const rank = a.shape[0]!;
  if (target.shiftScale) b = swapHalves(b, upKey);
  if (!target.parts) {
    add(out, `transformer.${target.modules[0]}`, { a, b, alpha }, upKey);
    return;
  }
  const total = target.parts.reduce((x, y) => x + y, 0);
  const outRows = b.shape[0]!;
  if (outRows % total !== 0) throw bad(upKey, `has ${outRows} rows, not a multiple of ${total}: it cannot be split into ${target.modules.join(', ')} (${target.parts.join(':')})`);
  const dims = target.parts.map((p) => (p * outRows) / total);
  const n = target.modules.length;
  // diffusers' sparse case: a B that is block-diagonal over rank chunks splits A's rows too, each
  // part then having rank / n (and alpha / n, so that alpha / rank stays)
  const partRank = rank / n;
  let sparse = rank % n === 0;
  for (let j = 0, row = 0; sparse && j < n; row += dims[j]!, j++) {
    for (let k = 0; sparse && k < n; k++) {
      if (k !== j) sparse = isZeroBlock(b, row, dims[j]!, k * partRank, partRank);
    }
  }
  for (let j = 0, row = 0; j < n; row += dims[j]!, j++) {
    const name = `transformer.${target.modules[j]}`;
    if (sparse) add(out, name, { a: rows(a, j * partRank, partRank), b: block(b, row, dims[j]!, j * partRank, partRank), alpha: alpha / n }, upKey);
    else add(out, name, { a, b: rows(b, row, dims[j]!), alpha }, upKey);
  }
}

/** A and B of one module, checked: matrices whose ranks agree; `original` names keys in messages. */
export function pair(tensors: ReadonlyMap<string, LoraTensor>, downKey: string, upKey: string, original: (key: string) => string = (k) => k): [LoraTensor, LoraTensor] {
  const a = tensors.get(downKey)!;
  const b = tensors.get(upKey)!;
  checkMatrix(a, original(downKey));
  checkMatrix(b, original(upKey));
  if (a.shape[0] !== b.shape[1]) {
    throw bad(original(upKey), `has rank ${b.shape[1]} (shape [${b.shape}]) but "${original(downKey)}" has rank ${a.shape[0]} (shape [${a.shape}]); down is [rank, in] and up [out, rank]: the file mixes two LoRAs or is damaged`);
  }
  return [a, b];
}

/** One module's keys: its down (A), up (B) and alpha. */
export interface Group {
  down?: string;
  up?: string;
  alpha?: string;
}

/** Keys grouped by module name over the given suffixes; keys with none of them go to `rest`. */
export function groupBy(keys: Iterable<string>, suffixes: Record<keyof Group, string>, rest: string[]): Map<string, Group> {
  const groups = new Map<string, Group>();
  for (const key of keys) {
    const part = (Object.keys(suffixes) as (keyof Group)[]).find((p) => key.endsWith(suffixes[p]));
    if (!part) {
      rest.push(key);
      continue;
    }
    const name = key.slice(0, -suffixes[part].length);
    const group = groups.get(name) ?? {};
    group[part] = key;
    groups.set(name, group);
  }
  return groups;
}

const partners: Record<string, string> = { lora_down: 'lora_up', lora_up: 'lora_down', lora_A: 'lora_B', lora_B: 'lora_A', down: 'up', up: 'down' };
/** The key the other half of a down / up pair would have. */
const partnerKey = (key: string) => key.replace(/(lora_down|lora_up|lora_A|lora_B|down|up)(\.weight)$/, (_, part: string, weight: string) => partners[part]! + weight);

/** A group's down and up keys, or undefined (its keys listed unknown) when it has no weights. */
export function weightsOf(group: Group, out: DiffusersLora, original: (key: string) => string): [string, string] | undefined {
  if (group.down && group.up) return [group.down, group.up];
  if (group.down) throw bad(original(group.down), `has no matching up weight ("${partnerKey(original(group.down))}"); the file is incomplete: re-export the LoRA`);
  if (group.up) throw bad(original(group.up), `has no matching down weight ("${partnerKey(original(group.up))}"); the file is incomplete: re-export the LoRA`);
  out.unknown.push(original(group.alpha!));
  return undefined;
}

// ---- layouts ----

/** kohya's / sd-scripts' key suffixes. */
export const kohyaSuffixes = { down: '.lora_down.weight', up: '.lora_up.weight', alpha: '.alpha' };

/** diffusers' _custom_replace: "." -> "_" in the part before lora_down / lora_up / alpha. */
function sdScriptsName(key: string, limits: RegExp): string {
  const match = limits.exec(key);
  if (!match) return key.replaceAll('.', '_');
  const boundary = match.index > 0 && key[match.index - 1] === '.' ? match.index - 1 : match.index;
  return key.slice(0, boundary).replaceAll('.', '_') + key.slice(boundary);
}

/**
 * sd-scripts' layout (and ComfyUI's "diffusion_model." / "text_encoders.clip_l.transformer." names
 * of it), as diffusers' _convert_sd_scripts_to_ai_toolkit. `tensors` are keyed as lora_down / lora_up;
 * `original` gives the file's key for messages and `unknown`.
 */
function fromSdScripts(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora, original: (key: string) => string): void {
  // ComfyUI names -> sd-scripts names, dropping (into unknown) what diffusers drops, in its order
  let keys = [...tensors.keys()].map((key) => ({ key, name: key.replaceAll('diffusion_model.', 'lora_unet_').replaceAll('text_encoders.clip_l.transformer.', 'lora_te_') }));
  const drop = (test: (name: string) => boolean) => {
    for (const k of keys) if (test(k.name)) out.unknown.push(original(k.key));
    keys = keys.filter((k) => !test(k.name));
  };
  const sdPrefixes = ['lora_unet_', 'lora_te_', 'lora_te1_'];
  const isSd = (name: string) => sdPrefixes.some((p) => name.startsWith(p));
  drop((name) => name.includes('position_embedding'));
  if (keys.some((k) => k.name.includes('diff_b') && isSd(k.name))) drop((name) => name.includes('.diff_b'));
  if (keys.some((k) => k.name.includes('.norm') && k.name.includes('.diff'))) drop((name) => name.includes('.norm') || name.includes('.diff'));
  // T5 ("text_encoders.t5xxl."), lora_te2_ / lora_te3_: diffusers' Flux loader converts only CLIP
  drop((name) => !isSd(name));
  const limits = keys.some((k) => k.name.includes('alpha')) ? /lora_down|lora_up|alpha/ : /lora_down|lora_up/;
  keys = keys.map((k) => ({ key: k.key, name: sdScriptsName(k.name, limits) }));
  drop((name) => name.includes('text_projection'));

  const byName = new Map<string, string>();
  for (const k of keys) {
    // two keys of one name ("lora_unet_x" and "diffusion_model.x"): diffusers keeps the last, silently
    if (byName.has(k.name)) out.unknown.push(original(byName.get(k.name)!));
    byName.set(k.name, k.key);
  }
  const file = (name: string) => original(byName.get(name)!);
  const rest: string[] = [];
  const groups = groupBy(byName.keys(), kohyaSuffixes, rest);
  out.unknown.push(...rest.map(file));
  for (const [name, group] of groups) {
    const unet = name.startsWith('lora_unet_') ? sdScriptsTarget(name.slice('lora_unet_'.length)) : undefined;
    const clip = name.startsWith('lora_te_') || name.startsWith('lora_te1_') ? clipModule(name.replace(/^lora_te1?_/, '')) : undefined;
    if (!unet && !clip) {
      out.unknown.push(...Object.values(group).map(file));
      continue;
    }
    const weights = weightsOf(group, out, file);
    if (!weights) continue;
    const [a, b] = pair(tensors, byName.get(weights[0])!, byName.get(weights[1])!, original);
    const rank = a.shape[0]!;
    // no alpha: sd-scripts' default, alpha = rank (scale 1)
    let alpha = group.alpha ? scalar(tensors.get(byName.get(group.alpha)!)!, file(group.alpha)) : rank;
    if (unet?.alphaIgnored) {
      // diffusers runs these with scale 1; an alpha that said otherwise is dropped, so listed
      if (alpha !== rank) out.unknown.push(file(group.alpha!));
      alpha = rank;
    }
    if (unet) addTarget(out, unet, a, b, alpha, file(weights[1]));
    else add(out, `text_encoder.${clip}`, { a, b, alpha }, file(weights[1]));
  }
}

/** diffusers' "mixture" branch: kohya-style names of diffusers' own modules ("lora_transformer_…"). */
function fromMixture(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora): void {
  const rest: string[] = [];
  const groups = groupBy(tensors.keys(), kohyaSuffixes, rest);
  out.unknown.push(...rest);
  for (const [name, group] of groups) {
    const transformer = name.startsWith('lora_transformer_') ? mixtureModule(name.slice('lora_transformer_'.length)) : undefined;
    const clip = name.startsWith('lora_te1_') ? clipModule(name.slice('lora_te1_'.length)) : undefined;
    // diffusers drops the "lora_unet_" keys of such files and fails on anything else
    if (!transformer && !clip) {
      out.unknown.push(...Object.values(group));
      continue;
    }
    const weights = weightsOf(group, out, (k) => k);
    if (!weights) continue;
    const [a, b] = pair(tensors, ...weights);
    const alpha = group.alpha ? scalar(tensors.get(group.alpha)!, group.alpha) : a.shape[0]!;
    add(out, transformer ? `transformer.${transformer}` : `text_encoder.${clip}`, { a, b, alpha }, weights[1]);
  }
}

const components = ['transformer', 'text_encoder', 'text_encoder_2'];

/** diffusers' / PEFT's layout. With `alphaKeys` false, ".alpha" keys are listed unknown (diffusers does not read them there). */
export function fromDiffusersLayout(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora, alphaKeys: boolean): void {
  const weights = new Map<string, { adapter: string; a?: string; b?: string }>();
  const alphas = new Map<string, string>();
  const moduleName = (path: string) => (components.some((c) => path.startsWith(`${c}.`)) ? path : `transformer.${path}`);
  for (const key of tensors.keys()) {
    const lora = /^(.+?)\.lora_(A|B)(?:\.([^.]+))?\.weight$/.exec(key);
    const alpha = /^(.+)\.alpha$/.exec(key);
    if (lora) {
      const [, path, which, adapter = ''] = lora;
      const name = moduleName(path!);
      const entry = weights.get(name) ?? { adapter };
      if (entry.adapter !== adapter) throw bad(key, `is adapter "${adapter}" of ${name}, which also has adapter "${entry.adapter}"; keep one adapter per file`);
      entry[which === 'A' ? 'a' : 'b'] = key;
      weights.set(name, entry);
    } else if (alpha && alphaKeys) alphas.set(moduleName(alpha[1]!), key);
    else out.unknown.push(key);
  }
  for (const [name, { a: aKey, b: bKey }] of weights) {
    if (!aKey) throw bad(bKey!, `has no matching lora_A; the file is incomplete: re-export the LoRA`);
    if (!bKey) throw bad(aKey, `has no matching lora_B; the file is incomplete: re-export the LoRA`);
    const [a, b] = pair(tensors, aKey, bKey);
    const alphaKey = alphas.get(name);
    alphas.delete(name);
    out.modules.set(name, alphaKey ? { a, b, alpha: scalar(tensors.get(alphaKey)!, alphaKey) } : { a, b });
  }
  out.unknown.push(...alphas.values());
}

/** Keys renamed by `rename`, and the way back to the file's key. */
function renamed(tensors: ReadonlyMap<string, LoraTensor>, rename: (key: string) => string): [Map<string, LoraTensor>, (key: string) => string] {
  const back = new Map<string, string>();
  const out = new Map<string, LoraTensor>();
  for (const [key, t] of tensors) {
    const name = rename(key);
    back.set(name, key);
    out.set(name, t);
  }
  return [out, (name) => back.get(name) ?? name];
}

/** diffusers' _convert_kohya_flux_lora_to_diffusers, by the branch it takes. */
function fromKohya(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora): void {
  const keys = [...tensors.keys()];
  if (keys.some((k) => k.startsWith('transformer.'))) {
    // a file with PEFT keys besides: diffusers keeps only "transformer.*", renamed to lora_A / lora_B
    const peft = new Map([...tensors].filter(([k]) => k.startsWith('transformer.')));
    out.unknown.push(...keys.filter((k) => !k.startsWith('transformer.')));
    const [named, original] = renamed(peft, (k) => k.replace('lora_down.weight', 'lora_A.weight').replace('lora_up.weight', 'lora_B.weight'));
    const inner: DiffusersLora = { layout: 'kohya', modules: out.modules, unknown: [] };
    fromDiffusersLayout(named, inner, false);
    out.unknown.push(...inner.unknown.map(original));
    return;
  }
  if (keys.some((k) => k.startsWith('lora_transformer_') && /lora_down|lora_up|alpha/.test(k))) fromMixture(tensors, out);
  else fromSdScripts(tensors, out, (k) => k);
}

/** diffusers' _convert_xlabs_flux_lora_to_diffusers; XLabs stores no alpha (scale 1). */
function fromXlabs(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora): void {
  const rest: string[] = [];
  const groups = groupBy(tensors.keys(), { down: '.down.weight', up: '.up.weight', alpha: '.alpha' }, rest);
  out.unknown.push(...rest);
  for (const [name, group] of groups) {
    const double = /^(?:diffusion_model\.)?double_blocks\.(\d+)\.processor\.(qkv_lora1|proj_lora1|qkv_lora2|proj_lora2)$/.exec(name);
    const single = /^(?:diffusion_model\.)?single_blocks\.(\d+)\.processor\.(qkv_lora|proj_lora)\d*$/.exec(name);
    const target = double
      ? { ...xlabsDoubleTargets[double[2]!]!, modules: xlabsDoubleTargets[double[2]!]!.modules.map((m) => `transformer_blocks.${double[1]}.${m}`) }
      : single
        ? { ...xlabsSingleTargets[single[2]!]!, modules: xlabsSingleTargets[single[2]!]!.modules.map((m) => `single_transformer_blocks.${single[1]}.${m}`) }
        : undefined;
    if (!target) {
      out.unknown.push(...Object.values(group));
      continue;
    }
    // diffusers fails on an alpha here: XLabs has none, its up weights carry the scale
    if (group.alpha) out.unknown.push(group.alpha);
    if (!group.down && !group.up) continue;
    const weights = weightsOf(group, out, (k) => k);
    if (!weights) continue;
    const [a, b] = pair(tensors, ...weights);
    addTarget(out, target, a, b, a.shape[0]!, weights[1]);
  }
}

/**
 * BFL's names with lora_A / lora_B ("diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight", or
 * without the prefix as BFL's own code saves them). diffusers' Flux loader leaves these unconverted
 * (its load then finds no "transformer." key); they are the ComfyUI form of sd-scripts' layout with
 * other suffixes, so they take its conversion.
 */
function fromBfl(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora): void {
  const [named, original] = renamed(tensors, (key) => {
    // fal's Kontext LoRAs: PEFT's "base_model.model." before BFL's names
    const name = key.replace(/^base_model\.model\./, '').replace(/\.lora_A\.weight$/, '.lora_down.weight').replace(/\.lora_B\.weight$/, '.lora_up.weight');
    return /^(double_blocks|single_blocks|final_layer|img_in|txt_in|time_in|vector_in|guidance_in)\./.test(name) ? `diffusion_model.${name}` : name;
  });
  fromSdScripts(named, out, original);
}

const bflModules = /^(diffusion_model\.|(base_model\.model\.)?(double_blocks|single_blocks)\.)/;

/** The layout of a file, by its keys, as diffusers' FluxLoraLoaderMixin.lora_state_dict tells them apart. */
export function detectLoraLayout(keys: Iterable<string>): LoraLayout {
  const all = [...keys];
  if (all.some((k) => k.includes('.lora_down.weight'))) return 'kohya';
  if (all.some((k) => k.includes('processor'))) return 'xlabs';
  if (all.some((k) => bflModules.test(k) && /\.lora_[AB]\./.test(k))) return 'bfl';
  return 'diffusers';
}

/** The tensors but DoRA's magnitudes, which are listed unknown: diffusers drops them (with a warning) and loads the rest as plain LoRA. */
export function withoutDora(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora): Map<string, LoraTensor> {
  out.unknown.push(...[...tensors.keys()].filter((k) => k.includes('dora_scale')));
  return new Map([...tensors].filter(([k]) => !k.includes('dora_scale')));
}

/**
 * A Flux LoRA file's tensors in diffusers' module paths, whichever layout it was written in
 * (diffusers, kohya / sd-scripts / ComfyUI, BFL, XLabs). Pure: no device, bytes are moved or viewed,
 * never converted. Bad input (a down without its up, ranks that disagree, a tensor that is not a
 * matrix) is a BAD_FILE DTorchError naming the key.
 */
export function fluxLoraToDiffusers(tensors: ReadonlyMap<string, LoraTensor>): DiffusersLora {
  const out: DiffusersLora = { layout: 'diffusers', modules: new Map(), unknown: [] };
  const kept = withoutDora(tensors, out);
  out.layout = detectLoraLayout(kept.keys());
  if (out.layout === 'kohya') fromKohya(kept, out);
  else if (out.layout === 'xlabs') fromXlabs(kept, out);
  else if (out.layout === 'bfl') fromBfl(kept, out);
  else fromDiffusersLayout(kept, out, true);
  return out;
}

/**
 * A LoRA file of a model whose shared layouts DTorch does not convert (the default of a model or
 * pipeline without a converter of its own): diffusers' / PEFT's own keys only; another layout is a
 * BAD_FILE error naming it.
 */
export function diffusersLayoutLora(path: string, model: string, tensors: ReadonlyMap<string, LoraTensor>): DiffusersLora {
  const layout = detectLoraLayout(tensors.keys());
  if (layout !== 'diffusers') {
    throw new DTorchError(ErrorCode.BadFile, `${path}: a LoRA in ${layout} layout; DTorch reads ${model} LoRAs in diffusers' layout ("transformer.<module>.lora_A.weight"); convert it with diffusers (load_lora_weights, then save_lora_weights)`);
  }
  return fluxLoraToDiffusers(tensors);
}
