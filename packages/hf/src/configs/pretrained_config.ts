// What every model config shares: the file it came from, the dtype the weights were saved in,
// and the keys this library does not read (kept, as transformers keeps them on its configs).
// A config is read from its file (`fromFile`) or built in code from the file's own keys
// (`fromDict({ d_model: 32 })`, as transformers' from_dict): one reading path, one check.
import type * as dt from '@dtorch/api';
import { ConfigReader, type JsonObject } from './config_file.js';

const dtypes: Record<string, dt.DType> = { float32: 'float32', float16: 'float16', bfloat16: 'bfloat16', float64: 'float64' };

/**
 * What every model config shares: the file it came from, the saved dtype, and the keys it does not
 * read (`extra`). Subclasses read their keys with transformers' or diffusers' defaults; each has
 * `fromFile(path)` and `fromDict(keys)`.
 */
export abstract class PretrainedConfig {
  /** The file the config was read from ('<dict>' when built in code). */
  readonly file: string;
  /** `dtype` (transformers 5) or `torch_dtype` (4.x): the dtype the weights were saved in, if known. */
  readonly dtype: dt.DType | undefined;
  /** Keys of the file that this class does not read. */
  extra: JsonObject = {};

  protected constructor(reader: ConfigReader) {
    this.file = reader.file;
    const name = reader.json['dtype'] !== undefined ? 'dtype' : 'torch_dtype';
    const saved = reader.optionalString(name);
    if (saved !== null && saved !== 'auto' && !(saved in dtypes)) throw reader.bad(name, `one of ${Object.keys(dtypes).join(', ')}`, saved);
    this.dtype = saved === null || saved === 'auto' ? undefined : dtypes[saved];
  }

  /** Called last by each subclass constructor: what it did not read is kept in `extra`. */
  protected keepUnread(reader: ConfigReader): void {
    this.extra = reader.unread();
  }
}

/** The reader for a config built in code from the file's keys. */
export function dictReader(values: JsonObject, what: string): ConfigReader {
  return new ConfigReader(`${what} (from a dict)`, values);
}
