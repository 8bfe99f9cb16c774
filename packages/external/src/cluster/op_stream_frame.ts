// The op stream's framing: the 32-byte header each message starts with, how it is written and how
// a received one is checked. The layout is at the top of op_stream.ts and in docs/cluster.md
// ("The op stream: framing"); the payload is the native engine's and opaque here.
import { crc32 } from 'node:zlib';

/** "DTOS": the first four bytes of every op stream header. */
export const OP_STREAM_MAGIC = Buffer.from('DTOS', 'latin1');

/** The framing's version (header bytes 4-5); a receiver refuses any other. */
export const OP_STREAM_VERSION = 1;

/** Bytes in a header. */
export const HEADER_BYTES = 32;

/** The message types (header byte 6). */
export const MessageType = {
  /** Worker to main, first and once: the payload is the worker's 32-byte session key. */
  Hello: 1,
  /** Main to worker: a recorded segment. */
  Segment: 2,
  /** Worker to main: a reply (a read value, a sync ack). */
  Reply: 3,
} as const;

/** One of {@link MessageType}'s values. */
export type MessageType = (typeof MessageType)[keyof typeof MessageType];

/** Why a received message was refused: `kind` is stable for counting, `message` is for people. */
export interface OpStreamReject {
  /**
   * - `truncated`: fewer than 32 header bytes
   * - `malformed`: a header frame longer than 32 bytes, or non-zero reserved bits
   * - `magic`, `version`, `type`: not an op stream header, another version, a type this side does not take
   * - `length`: payload bytes other than the header says (truncated or extended)
   * - `size`: a payload over maxMessageBytes
   * - `checksum`: the CRC-32 does not match (corrupt bytes)
   * - `sequence`: not the next number (replayed, duplicated, or one skipped)
   * - `unadmitted`: from a peer that did not open with a hello carrying an admitted key
   */
  kind: 'truncated' | 'malformed' | 'magic' | 'version' | 'type' | 'length' | 'size' | 'checksum' | 'sequence' | 'unadmitted';
  /** What was wrong, in words (never a key's bytes). */
  message: string;
  /** The node it came from, on the main side once the peer is known; undefined on the worker side. */
  node?: number;
}

/** The header fields before the checksum, then the CRC-32 (zlib's) of those 28 bytes and the payload. */
export function encodeFrame(type: MessageType, sequence: bigint, parts: readonly Buffer[]): Buffer[] {
  const header = Buffer.alloc(HEADER_BYTES);
  OP_STREAM_MAGIC.copy(header, 0);
  header.writeUInt16LE(OP_STREAM_VERSION, 4);
  header.writeUInt8(type, 6);
  header.writeBigUInt64LE(sequence, 8);
  header.writeBigUInt64LE(BigInt(parts.reduce((n, p) => n + p.length, 0)), 16);
  header.writeUInt32LE(checksum(header, parts), 28);
  return [header, ...parts];
}

function checksum(header: Buffer, parts: readonly Buffer[]): number {
  let crc = crc32(header.subarray(0, 28));
  // skip empty parts: zlib's crc32 of a null pointer (ZeroMQ's empty frame) is 0, not the running value
  for (const part of parts) if (part.length > 0) crc = crc32(part, crc);
  return crc;
}

/** A message whose header checked out; the sequence number is for the caller to check. */
export interface Frame {
  type: MessageType;
  sequence: bigint;
  /** The payload frames joined (no copy when there is one). */
  payload: Buffer;
}

type Decoded = { ok: true; frame: Frame } | { ok: false; kind: OpStreamReject['kind']; message: string };

const refuse = (kind: OpStreamReject['kind'], message: string): Decoded => ({ ok: false, kind, message });

/**
 * Checks a received message (its frames after any routing id): the header's length, magic,
 * version, type (one of `accepted`), reserved bytes, payload length and size, and checksum.
 */
export function decodeFrame(frames: readonly Buffer[], accepted: readonly MessageType[], maxPayloadBytes: number): Decoded {
  const header = frames[0];
  if (header === undefined || header.length < HEADER_BYTES) return refuse('truncated', `a header of ${header?.length ?? 0} bytes, expected ${HEADER_BYTES}`);
  if (header.length > HEADER_BYTES) return refuse('malformed', `a header frame of ${header.length} bytes, expected ${HEADER_BYTES}`);
  if (!header.subarray(0, 4).equals(OP_STREAM_MAGIC)) return refuse('magic', `magic ${header.subarray(0, 4).toString('hex')}, expected ${OP_STREAM_MAGIC.toString('hex')} ("DTOS")`);
  const version = header.readUInt16LE(4);
  if (version !== OP_STREAM_VERSION) return refuse('version', `framing version ${version}, this build speaks ${OP_STREAM_VERSION}`);
  const type = header.readUInt8(6) as MessageType;
  if (!accepted.includes(type)) return refuse('type', `message type ${type}, expected ${accepted.join(' or ')}`);
  if (header.readUInt8(7) !== 0 || header.readUInt32LE(24) !== 0) return refuse('malformed', 'non-zero reserved header bytes');
  const parts = frames.slice(1);
  const declared = header.readBigUInt64LE(16);
  const actual = parts.reduce((n, p) => n + p.length, 0);
  if (declared !== BigInt(actual)) return refuse('length', `a payload of ${actual} bytes, the header says ${declared}`);
  if (actual > maxPayloadBytes) return refuse('size', `a payload of ${actual} bytes, over maxMessageBytes ${maxPayloadBytes}`);
  if (checksum(header, parts) !== header.readUInt32LE(28)) return refuse('checksum', 'the checksum does not match (corrupt bytes)');
  const payload = parts.length === 1 ? parts[0]! : Buffer.concat(parts, actual);
  return { ok: true, frame: { type, sequence: header.readBigUInt64LE(8), payload } };
}
