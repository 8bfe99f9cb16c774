// FluxKontextPipeline's part of the lifecycle (FLUX.1-Kontext-dev, diffusers'
// pipeline_flux_kontext.py): Flux's hooks with an optional reference `image`, the size fitted to
// `maxArea` (1024² by default) at the asked aspect ratio, the reference resized to the Kontext
// resolution nearest its aspect ratio (diffusers' PREFERRED_KONTEXT_RESOLUTIONS; autoResize, as its
// _auto_resize) and encoded to the VAE's mean (no draw: the seed's noise is the start, as text to
// image's), its packed tokens appended to the latents' at every step with ids (1, row, col), and
// the prediction cut back to the latents' tokens.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger, log } from '@dtorch/common';
import { decodeImage, type ImageInput, type SingleImageInput } from '../../images/image_input.js';
import { VaeImageProcessor } from '../../images/vae_image_processor.js';
import { batchPlacements } from '../../parallel/batch.js';
import type { PipelineHooks } from '../pipeline_lifecycle.js';
import { FLUX_GENERATE_OPTIONS, checkFluxCall, fluxHooks, fluxImageProcessor, type FluxCall, type FluxEncoded, type FluxStart, type FluxText } from './flux_hooks.js';
import { latentImageIds, packLatents } from './flux_latents.js';
import { checkRepeatsTo, repeatToBatch } from '../variants/image_to_image.js';
import type { FluxPipeline } from './flux_pipeline.js';

/** The (width, height) FLUX.1-Kontext was trained at: a reference image is resized to the one nearest its aspect ratio. */
export const PREFERRED_KONTEXT_RESOLUTIONS: readonly (readonly [width: number, height: number])[] = [
  [672, 1568], [688, 1504], [720, 1456], [752, 1392], [800, 1328], [832, 1248], [880, 1184], [944, 1104], [1024, 1024],
  [1104, 944], [1184, 880], [1248, 832], [1328, 800], [1392, 752], [1456, 720], [1504, 688], [1568, 672],
];

/** A FluxKontextPipeline call's settings: Flux's, and the reference image (as given, then on the devices). */
export interface FluxKontextCall extends FluxCall {
  readonly kontext: {
    readonly imageInput: ImageInput | undefined;
    readonly autoResize: boolean;
    /** [B, 3, h, w] in [-1, 1] (or latents), after loadInputs. */
    readonly image?: dt.Tensor;
    readonly imageIsLatents?: boolean;
  };
}

/** Flux's start, with the reference image's packed latents and the ids of both token sets. */
export interface FluxKontextStart extends FluxStart {
  /** [B, reference tokens, 64], or undefined without a reference image. */
  readonly reference: dt.Tensor | undefined;
  /** The latents' ids then the reference's. */
  readonly allIds: dt.Tensor;
}

/** FluxKontextPipeline's hooks. */
export const fluxKontextHooks: PipelineHooks<FluxPipeline, FluxKontextCall, FluxEncoded, FluxText, FluxKontextStart> = {
  ...(fluxHooks as unknown as PipelineHooks<FluxPipeline, FluxKontextCall, FluxEncoded, FluxText, FluxKontextStart>),

  checkInputs(pipe, what, options) {
    if (options === null || typeof options !== 'object') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: options must be an object`);
    const { image, maxArea, autoResize, ...rest } = options as Record<string, unknown>;
    const area = maxArea === undefined ? 1024 ** 2 : checkInteger(`${what} maxArea`, maxArea, 1);
    const resize = autoResize === undefined ? true : checkBoolean(`${what} autoResize`, autoResize);
    // diffusers: the asked size's aspect ratio at maxArea pixels, in multiples of the patches
    const sample = pipe.defaultSampleSize * pipe.vaeScaleFactor;
    const [askedHeight, askedWidth] = [(rest['height'] as number | undefined) ?? sample, (rest['width'] as number | undefined) ?? sample];
    checkInteger(`${what} height`, askedHeight, 1);
    checkInteger(`${what} width`, askedWidth, 1);
    const multiple = pipe.vaeScaleFactor * 2;
    const aspect = askedWidth / askedHeight;
    const width = Math.floor(Math.round(Math.sqrt(area * aspect)) / multiple) * multiple;
    const height = Math.floor(Math.round(Math.sqrt(area / aspect)) / multiple) * multiple;
    if (height !== askedHeight || width !== askedWidth) log.warn(`${what}: height and width adjusted to ${height} and ${width} (maxArea ${area} at the asked aspect ratio, multiples of ${multiple})`);
    const call = checkFluxCall(pipe, what, { ...rest, height, width }, FLUX_GENERATE_OPTIONS, { guidanceScale: 3.5 });
    return { ...call, kontext: { imageInput: image as ImageInput | undefined, autoResize: resize } };
  },

  // the reference at its own size (a Kontext resolution with autoResize), preprocessed
  async loadInputs(pipe, call, owned) {
    const input = call.kontext.imageInput;
    if (input === undefined || input === null) return call;
    const { vaeScaleFactor: multiple, latentChannels } = fluxImageProcessor(pipe);
    if (input instanceof dt.Tensor && input.ndim === 4 && input.shape[1] === latentChannels) return { ...call, kontext: { ...call.kontext, image: input, imageIsLatents: true } };
    const processor = new VaeImageProcessor({ vaeScaleFactor: multiple, vaeLatentChannels: latentChannels });
    const first = (Array.isArray(input) ? input[0] : input) as SingleImageInput;
    const size = first instanceof dt.Tensor ? { height: first.shape[first.ndim - 2]!, width: first.shape[first.ndim - 1]! } : await decodeImage(first, `${call.what} image`);
    let [height, width] = processor.getDefaultHeightWidth(size);
    if (call.kontext.autoResize) [width, height] = nearestKontextResolution(width / height);
    [height, width] = [Math.floor(height / multiple) * multiple, Math.floor(width / multiple) * multiple];
    const image = await processor.preprocess(input, { height, width }, { mesh: pipe.vae.mesh, name: `${call.what} image` });
    owned.push(image);
    return { ...call, kontext: { ...call.kontext, image } };
  },

  // diffusers' prepare_latents: the reference encoded to the VAE's mean (argmax: no draw),
  // repeated to the batch and packed, with ids (1, row, col); the noise as text to image's
  prepareLatents(pipe, call, timesteps, owned) {
    const start = fluxHooks.prepareLatents(pipe, call, timesteps, owned);
    const image = call.kontext.image;
    if (image === undefined) return { ...start, reference: undefined, allIds: start.imageIds };
    try {
      const [rows, , h, w] = image.shape as [number, number, number, number];
      checkRepeatsTo(call.what, rows, call.batch, 'image');
      const latentH = call.kontext.imageIsLatents ? h : h / pipe.vaeScaleFactor;
      const latentW = call.kontext.imageIsLatents ? w : w / pipe.vaeScaleFactor;
      const reference = dt.tidy(() => {
        const vae = pipe.vae;
        const latents = call.kontext.imageIsLatents
          ? image.to(pipe.dtype)
          : vae.encode(image.to(vae.dtype)).mode().sub(vae.shiftFactor ?? 0).mul(vae.scalingFactor).to(pipe.dtype);
        return packLatents(repeatToBatch(latents, call.batch).redistribute(pipe.mesh, batchPlacements(pipe.mesh)));
      });
      const referenceIds = latentImageIds(latentH / 2, latentW / 2, pipe.mesh, pipe.dtype, 1);
      const allIds = dt.tidy(() => dt.cat([start.imageIds, referenceIds], 0));
      referenceIds.dispose();
      owned.push(reference, allIds);
      return { ...start, reference, allIds };
    } catch (err) {
      if (!start.given) start.latents.dispose();
      throw err;
    }
  },

  // the reference's tokens after the latents', the prediction cut back to the latents'
  predict(pipe, x, t, text, start) {
    if (!start.reference) return fluxHooks.predict(pipe, x, t, text, start);
    const tokens = x.shape[1]!;
    const reference = x.shape[0] === start.reference.shape[0] ? start.reference : dt.cat([start.reference, start.reference], 0);
    const out = fluxHooks.predict(pipe, dt.cat([x, reference], 1), t, text, { ...start, imageIds: start.allIds });
    return out.narrow(1, 0, tokens);
  },
};

/** The (width, height) of PREFERRED_KONTEXT_RESOLUTIONS nearest `aspectRatio` (width / height); the first of a tie, as Python's min. */
export function nearestKontextResolution(aspectRatio: number): [width: number, height: number] {
  let best = PREFERRED_KONTEXT_RESOLUTIONS[0]!;
  for (const r of PREFERRED_KONTEXT_RESOLUTIONS) if (Math.abs(aspectRatio - r[0] / r[1]) < Math.abs(aspectRatio - best[0] / best[1])) best = r;
  return [best[0], best[1]];
}
