// One view of a checkpoint, whether a single .safetensors file or a sharded index: every
// tensor's header entry and file, and positioned reads of byte runs inside a tensor, counted
// (bytesRead is what was asked of the file system, so a loader can show it read only its slice).
import { closeSync, fstatSync, openSync } from 'node:fs';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { parseSafetensorsHeader, readExactly, type TensorEntry } from './safetensors.js';
import { readSafetensorsIndex } from './safetensors_index.js';

/** A tensor's header entry in a checkpoint, with the file that holds it. */
export interface CheckpointTensor extends TensorEntry {
  /** The file that holds it. */
  file: string;
}

/** A run of bytes inside one tensor: `length` bytes from byte `from` of its data. */
export interface ByteRun {
  /** The offset of its first byte, from the start of the tensor's data. */
  from: number;
  /** How many bytes it holds. */
  length: number;
}

/**
 * A safetensors checkpoint, one file or sharded, opened for positioned reads: the loader reads
 * only the bytes of the slices its ranks hold, not whole tensors. Keeps each file open until
 * {@link SafetensorsCheckpoint.close | close()}.
 */
export class SafetensorsCheckpoint {
  /** The path it was opened from: the `.safetensors` file or the index. */
  readonly path: string;
  /** Every tensor of every file, by name. */
  readonly tensors = new Map<string, CheckpointTensor>();
  /** Metadata of each file, by file. */
  readonly metadata = new Map<string, Record<string, string>>();
  /** Bytes of tensor data read so far (headers not counted). */
  bytesRead = 0;
  /** Positioned reads made so far. */
  reads = 0;
  readonly #fds = new Map<string, number>();

  private constructor(path: string) {
    this.path = path;
  }

  /** Opens `path`: a `.safetensors` file, or a `*.index.json` naming shards beside it. */
  static open(path: string): SafetensorsCheckpoint {
    if (typeof path !== 'string') {
      throw new DTorchError(ErrorCode.InvalidArgument, `Expected a path to a .safetensors file or a .safetensors.index.json for checkpoint path but received ${typeof path}`);
    }
    const checkpoint = new SafetensorsCheckpoint(path);
    try {
      if (path.endsWith('.json')) {
        const index = readSafetensorsIndex(path);
        for (const file of index.files) checkpoint.addFile(file);
        for (const [name, file] of index.weightMap) {
          const found = checkpoint.tensors.get(name);
          if (!found || found.file !== file) {
            throw new DTorchError(ErrorCode.BadFile, `${path}: weight_map puts "${name}" in ${file}, which has no tensor of that name`);
          }
        }
      } else {
        checkpoint.addFile(path);
      }
    } catch (err) {
      checkpoint.close();
      throw err;
    }
    return checkpoint;
  }

  private addFile(file: string): void {
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch (err) {
      throw new DTorchError(ErrorCode.BadFile, `${file}: cannot open: ${(err as Error).message}`);
    }
    this.#fds.set(file, fd);
    const header = parseSafetensorsHeader(file, fstatSync(fd).size, (length, position) => readExactly(fd, length, position, file));
    this.metadata.set(file, header.metadata);
    for (const entry of header.tensors.values()) {
      const other = this.tensors.get(entry.name);
      if (other) throw new DTorchError(ErrorCode.BadFile, `${this.path}: tensor "${entry.name}" is in both ${other.file} and ${file}`);
      this.tensors.set(entry.name, { ...entry, file });
    }
  }

  /** The entry of `name`; BAD_FILE naming the checkpoint when there is none. */
  entry(name: string): CheckpointTensor {
    const entry = this.tensors.get(name);
    if (!entry) throw new DTorchError(ErrorCode.BadFile, `${this.path}: has no tensor "${name}"`);
    return entry;
  }

  /**
   * Reads the runs (byte ranges inside tensor `name`'s data, in order) into one buffer, one
   * positioned read per stretch of adjacent runs.
   */
  readRuns(name: string, runs: readonly ByteRun[]): Uint8Array {
    const entry = this.entry(name);
    const size = entry.end - entry.begin;
    const total = runs.reduce((sum, r) => sum + r.length, 0);
    const out = Buffer.alloc(total);
    const fd = this.#fds.get(entry.file);
    if (fd === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${this.path} was closed; open it again to read "${name}"`);
    let at = 0;
    for (let i = 0; i < runs.length; ) {
      const from = runs[i]!.from;
      let length = runs[i]!.length;
      for (i++; i < runs.length && runs[i]!.from === from + length; i++) length += runs[i]!.length;
      if (from < 0 || length < 0 || from + length > size) {
        throw new DTorchError(ErrorCode.InvalidArgument, `bytes [${from}, ${from + length}) are outside tensor "${name}" (${size} bytes)`);
      }
      if (length > 0) {
        readExactly(fd, length, entry.begin + from, entry.file).copy(out, at);
        this.bytesRead += length;
        this.reads++;
      }
      at += length;
    }
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  }

  /** Bytes of tensor data in the checkpoint. */
  get dataBytes(): number {
    let n = 0;
    for (const t of this.tensors.values()) n += t.end - t.begin;
    return n;
  }

  /** Closes the files; reads after it throw INVALID_ARGUMENT. Closing twice is harmless. */
  close(): void {
    for (const fd of this.#fds.values()) closeSync(fd);
    this.#fds.clear();
  }
}
