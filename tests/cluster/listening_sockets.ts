// The TCP ports a process listens on, from /proc: its socket inodes (/proc/<pid>/fd) matched
// against the listening sockets of its network namespace (/proc/<pid>/net/tcp and tcp6). Linux only.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** A listening socket: its address as bound ("0.0.0.0" and "::" for every interface) and port. */
export interface ListeningSocket {
  address: string;
  port: number;
}

// /proc/net/tcp writes an IPv4 address as one little-endian 32-bit word in hex
function ipv4(hex: string): string {
  return [3, 2, 1, 0].map((i) => parseInt(hex.slice(2 * i, 2 * i + 2), 16)).join('.');
}

// and an IPv6 address as four such words
function ipv6(hex: string): string {
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++) for (const i of [3, 2, 1, 0]) bytes.push(parseInt(hex.slice(8 * w + 2 * i, 8 * w + 2 * i + 2), 16));
  const groups = Array.from({ length: 8 }, (_, g) => ((bytes[2 * g]! << 8) | bytes[2 * g + 1]!).toString(16));
  const text = groups.join(':');
  return text === '0:0:0:0:0:0:0:0' ? '::' : text;
}

/** Every TCP socket process `pid` listens on. */
export function listeningSockets(pid: number): ListeningSocket[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const out: ListeningSocket[] = [];
  for (const [table, decode] of [['tcp', ipv4], ['tcp6', ipv6]] as const) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue; // no IPv6 here
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A' || !inodes.has(f[9]!)) continue; // 0A: LISTEN
      const [address, port] = f[1]!.split(':');
      out.push({ address: decode(address!), port: parseInt(port!, 16) });
    }
  }
  return out;
}
