// Images in, for image-to-image and inpainting: pictures decoded as diffusers' load_image
// decodes them, and diffusers' VaeImageProcessor that makes them the VAE's input tensor.
export { decodeImage, decodeImages, type ImageInput, type SingleImageInput, type RawPixels, type RgbImage, type Pixels } from './image_input.js';
export { VaeImageProcessor, type VaeImageProcessorOptions, type PreprocessOptions, type PreprocessTarget, type ResizeMode, type CropBox, type Resample } from './vae_image_processor.js';
