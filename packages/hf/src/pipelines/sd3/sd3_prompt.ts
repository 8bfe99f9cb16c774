// Stable Diffusion 3's prompt encoding, as diffusers' StableDiffusion3Pipeline.encode_prompt: each
// CLIP (CLIP-L, then CLIP-G) gives its penultimate hidden state (clipSkip layers further back)
// and its pooled projection; the two hidden states are joined along features and zero-padded to
// T5's width (cropped to it when wider, as F.pad's negative pad does), then T5's last hidden
// state at maxSequenceLength tokens (zeros without a T5) is joined after them along tokens; the
// pooled projections are joined along features. The negative prompt ('' by default) is encoded
// the same way for classifier-free guidance.
// Prompts longer than a tokenizer's limit are truncated with a warning, as diffusers does.
// The embeddings are returned on `mesh` (the transformer's), whole on every device.
import * as dt from '@dtorch/api';
import type * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, invalidParameter, log } from '@dtorch/common';
import type { CLIPTextModelWithProjection } from '../../models/clip/clip_text_model.js';
import type { T5EncoderModel } from '../../models/t5/t5_encoder_model.js';
import type { PreTrainedTokenizer } from '../../tokenizers/pretrained_tokenizer.js';
import { promptList, promptsFor, repeatPerPrompt } from '../pipeline_inputs.js';
import type { StableDiffusion3Pipeline } from './sd3_pipeline.js';

/** The text encoders of an SD3 pipeline; the T5 is optional (its embeddings are zeros without it). */
export interface SD3TextEncoders {
  /** CLIP-L with projection (diffusers' text_encoder). */
  textEncoder: CLIPTextModelWithProjection;
  /** CLIP-L's tokenizer (diffusers' tokenizer). */
  tokenizer: PreTrainedTokenizer;
  /** CLIP-G with projection (diffusers' text_encoder_2). */
  textEncoder2: CLIPTextModelWithProjection;
  /** CLIP-G's tokenizer (diffusers' tokenizer_2). */
  tokenizer2: PreTrainedTokenizer;
  /** T5-XXL's encoder (diffusers' text_encoder_3); optional. */
  textEncoder3?: T5EncoderModel | undefined;
  /** T5's tokenizer (diffusers' tokenizer_3); required with textEncoder3. */
  tokenizer3?: PreTrainedTokenizer | undefined;
}

/** A prompt option: one prompt, or a list of prompts. */
export type Prompt = string | readonly string[];

/** encodePrompt's arguments: diffusers' encode_prompt, camelCase. */
export interface SD3EncodePromptOptions {
  /** The prompt (CLIP-L's, and the others' by default); required unless promptEmbeds is given. */
  prompt?: Prompt;
  /** CLIP-G's prompt (default `prompt`). */
  prompt2?: Prompt;
  /** T5's prompt (default `prompt`). */
  prompt3?: Prompt;
  /** Default ''. */
  negativePrompt?: Prompt;
  /** CLIP-G's negative prompt (default `negativePrompt`). */
  negativePrompt2?: Prompt;
  /** T5's negative prompt (default `negativePrompt`). */
  negativePrompt3?: Prompt;
  /** Default 1. */
  numImagesPerPrompt?: number;
  /** Also encode the negative prompt; default true. */
  doClassifierFreeGuidance?: boolean;
  /** CLIP layers skipped before the penultimate one (positive prompt only, as diffusers). */
  clipSkip?: number;
  /** T5's tokens; default 256. */
  maxSequenceLength?: number;
  /** Given embeddings are returned as they are (prompt's, or the negative's), the rest encoded. */
  promptEmbeds?: dt.Tensor;
  /** The pooled projections [batch, pooled_projection_dim] that go with promptEmbeds. */
  pooledPromptEmbeds?: dt.Tensor;
  /** The negative prompt's embeddings, instead of encoding negativePrompt. */
  negativePromptEmbeds?: dt.Tensor;
  /** The pooled projections that go with negativePromptEmbeds. */
  negativePooledPromptEmbeds?: dt.Tensor;
}

/** encodePrompt's result: [batch, 77 + maxSequenceLength, joint_attention_dim] and [batch, pooled_projection_dim]. */
export interface SD3PromptEmbeds {
  /** The CLIPs' penultimate hidden states (zero-padded or cropped to T5's width), then T5's: [batch, 77 + maxSequenceLength, joint_attention_dim]. */
  promptEmbeds: dt.Tensor;
  /** The two CLIPs' pooled projections, joined: [batch, pooled_projection_dim]. */
  pooledPromptEmbeds: dt.Tensor;
  /** With doClassifierFreeGuidance. */
  negativePromptEmbeds?: dt.Tensor;
  /** The negative prompt's pooled projections, with doClassifierFreeGuidance. */
  negativePooledPromptEmbeds?: dt.Tensor;
}

// Python's `a or b` for prompts: an empty string or list falls back
const or = (a: Prompt | undefined, b: Prompt): Prompt => (a === undefined || a === null || a.length === 0 ? b : a);

// `value` as `batch` prompts (one for every row, or one per row); `what` names the call
const prompts = (what: string, name: string, value: Prompt, batch: number) => promptsFor(what, name, promptList(what, name, value)!, batch);

/** Where the prompt's embeddings go and how the transformer reads them. */
export interface SD3PromptTarget {
  /** The transformer's mesh: the embeddings end there, whole on every device. */
  mesh: dt.DeviceMesh;
  /** The transformer's joint_attention_dim: T5's width (the zeros' width without a T5). */
  jointAttentionDim: number;
}

/** The pipeline's text encoders, or undefined once released. */
export function textEncodersOf(pipe: StableDiffusion3Pipeline): SD3TextEncoders | undefined {
  if (!pipe.textEncoder || !pipe.textEncoder2) return undefined;
  return { textEncoder: pipe.textEncoder, tokenizer: pipe.tokenizer, textEncoder2: pipe.textEncoder2, tokenizer2: pipe.tokenizer2, textEncoder3: pipe.textEncoder3, tokenizer3: pipe.tokenizer3 };
}

/** Where the pipeline's prompt embeddings go. */
export function promptTargetOf(pipe: StableDiffusion3Pipeline): SD3PromptTarget {
  return { mesh: pipe.mesh, jointAttentionDim: pipe.transformer.config.jointAttentionDim };
}

/** diffusers' encode_prompt (see the header). */
export async function encodeSD3Prompt(what: string, encoders: SD3TextEncoders | undefined, target: SD3PromptTarget, options: SD3EncodePromptOptions): Promise<SD3PromptEmbeds> {
  const o = options;
  const n = o.numImagesPerPrompt ?? 1;
  const maxSequenceLength = o.maxSequenceLength ?? 256;
  const cfg = o.doClassifierFreeGuidance ?? true;
  const need = () => {
    if (!encoders) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: the text encoders were released (releaseTextEncoders); pass promptEmbeds and pooledPromptEmbeds (and the negative ones for guidance)`);
    }
    return encoders;
  };
  let positive: [dt.Tensor, dt.Tensor];
  let batch: number;
  if (o.promptEmbeds) {
    positive = [o.promptEmbeds, o.pooledPromptEmbeds!];
    batch = o.promptEmbeds.shape[0]! / n;
  } else {
    const prompt = promptList(what, 'prompt', o.prompt);
    if (!prompt) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt or promptEmbeds`);
    batch = prompt.length;
    positive = await encodeOne(need(), target, {
      prompts: [prompt, prompts(what, 'prompt2', or(o.prompt2, prompt), batch), prompts(what, 'prompt3', or(o.prompt3, prompt), batch)],
      n, clipSkip: o.clipSkip, maxSequenceLength,
    });
  }
  const out: SD3PromptEmbeds = { promptEmbeds: positive[0], pooledPromptEmbeds: positive[1] };
  if (!cfg) return out;
  if (o.negativePromptEmbeds) {
    return { ...out, negativePromptEmbeds: o.negativePromptEmbeds, negativePooledPromptEmbeds: o.negativePooledPromptEmbeds! };
  }
  const negative = or(o.negativePrompt, '');
  // diffusers encodes the negative prompt with clip_skip None whatever clipSkip is
  const [embeds, pooled] = await encodeOne(need(), target, {
    prompts: [
      prompts(what, 'negativePrompt', negative, batch),
      prompts(what, 'negativePrompt2', or(o.negativePrompt2, negative), batch),
      prompts(what, 'negativePrompt3', or(o.negativePrompt3, negative), batch),
    ],
    n, clipSkip: undefined, maxSequenceLength,
  });
  return { ...out, negativePromptEmbeds: embeds, negativePooledPromptEmbeds: pooled };
}

interface EncodeOne {
  prompts: [string[], string[], string[]];
  n: number;
  clipSkip: number | undefined;
  maxSequenceLength: number;
}

// One prompt set (positive or negative) through the three encoders: [embeds, pooled] on target.mesh.
async function encodeOne(e: SD3TextEncoders, target: SD3PromptTarget, { prompts, n, clipSkip, maxSequenceLength }: EncodeOne): Promise<[dt.Tensor, dt.Tensor]> {
  const clipLength = e.tokenizer.modelMaxLength > 1e6 ? 77 : e.tokenizer.modelMaxLength; // diffusers' tokenizer_max_length: CLIP-L tokenizer's for both
  const ids1 = await tokenize(e.tokenizer, prompts[0], clipLength, `CLIP can only handle sequences up to ${clipLength} tokens`);
  const ids2 = await tokenize(e.tokenizer2, prompts[1], clipLength, `CLIP can only handle sequences up to ${clipLength} tokens`);
  const ids3 = e.textEncoder3 && e.tokenizer3 ? await tokenize(e.tokenizer3, prompts[2], maxSequenceLength, `\`maxSequenceLength\` is set to ${maxSequenceLength} tokens`) : undefined;
  const batch = prompts[0].length;
  const { dtype } = placeOf(e.textEncoder);
  return dt.tidy(() => {
    const [l, pooledL] = clipEmbeds(e.textEncoder, ids1, clipSkip, dtype, target.mesh);
    const [g, pooledG] = clipEmbeds(e.textEncoder2, ids2, clipSkip, dtype, target.mesh);
    const t5 = ids3
      ? onMesh(e.textEncoder3!.forward(idsTensor(ids3, placeOf(e.textEncoder3!).mesh)).lastHiddenState, target.mesh)
      : dt.zeros([batch, maxSequenceLength, target.jointAttentionDim], { mesh: target.mesh, dtype });
    const clip = dt.cat([l, g], -1);
    const width = t5.shape[2]!;
    // as diffusers' F.pad: a negative pad crops, keeping the first `width` channels (CLIPs wider
    // than T5 together, as in diffusers' own tiny test configuration)
    const padded = clip.shape[2] === width ? clip : dt.pad(clip, [0, width - clip.shape[2]!]);
    const embeds = dt.cat([padded, t5.to(padded.dtype)], -2);
    const pooled = dt.cat([pooledL, pooledG], -1);
    return [repeatPerPrompt(embeds, n), repeatPerPrompt(pooled, n)] as [dt.Tensor, dt.Tensor];
  });
}

// [penultimate hidden state (clipSkip further back), pooled projection] of one CLIP, on `mesh`
function clipEmbeds(encoder: CLIPTextModelWithProjection, ids: number[][], clipSkip: number | undefined, dtype: dt.DType, mesh: dt.DeviceMesh): [dt.Tensor, dt.Tensor] {
  const out = encoder.forward(idsTensor(ids, placeOf(encoder).mesh), { outputHiddenStates: true });
  const states = out.hiddenStates!;
  const at = states.length - (clipSkip === undefined ? 2 : clipSkip + 2);
  if (at < 0) throw invalidParameter('clipSkip', `an integer in [0, ${states.length - 2}]`, clipSkip);
  return [onMesh(states[at]!.to(dtype), mesh), onMesh(out.textEmbeds, mesh)];
}

/** The mesh and dtype of a module's parameters. */
export function placeOf(module: nn.Module): { mesh: dt.DeviceMesh; dtype: dt.DType } {
  const [first] = module.parameters();
  if (!first) throw new DTorchError(ErrorCode.InvalidArgument, `${module.constructor.name} has no parameters (was it disposed?)`);
  return { mesh: first.mesh, dtype: first.dtype };
}

// token ids, whole on every device of the encoder's mesh (text encoders are cheap next to the denoiser)
function idsTensor(ids: number[][], mesh: dt.DeviceMesh): dt.Tensor {
  return dt.tensor(ids, { dtype: 'int64', mesh });
}

function onMesh(t: dt.Tensor, mesh: dt.DeviceMesh): dt.Tensor {
  const whole = mesh.shape.map(() => dt.Replicate());
  return t.mesh.equals(mesh) ? t.redistribute(whole) : t.redistribute(mesh, whole);
}

// ids padded to `length` and truncated, with diffusers' warning naming what was cut off
async function tokenize(tokenizer: PreTrainedTokenizer, prompts: string[], length: number, why: string): Promise<number[][]> {
  const { inputIds } = await tokenizer.encode(prompts, { padding: 'max_length', maxLength: length, truncation: true });
  const untruncated = (await tokenizer.encode(prompts, { padding: 'longest' })).inputIds;
  if (untruncated[0]!.length > length) {
    const removed = await tokenizer.batchDecode(untruncated.map((row) => row.slice(length - 1, -1)));
    log.warn(`The following part of your input was truncated because ${why}: ${JSON.stringify(removed)}`);
  }
  return inputIds;
}
