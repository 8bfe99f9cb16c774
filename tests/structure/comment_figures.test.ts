// Product code comments say why, not how fast: a time a benchmark or a profile measured belongs
// in bench/results and the docs (docs/engine.md, docs/gpu.md, docs/benchmarks.md), where it names
// its machine and its run and can be re-run; a comment that quotes one goes stale unseen. This
// reads every comment in native/ and packages/*/src (tests aside) and fails on a figure in
// milliseconds, microseconds or nanoseconds, or in seconds with decimals, unless the allow-list
// below names it: a time the code itself sets (a poll's sleep, a retry's wait, a bucket's bound).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceFiles } from './source_files.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

// [file, text on the comment's line, why it may name a time]
const allowed: [string, string, string][] = [
  ['native/common/env.cpp', '"5ms" are refused', 'an example of a setting refused'],
  ['packages/common/src/env.ts', '"5ms" are refused', 'an example of a setting refused'],
  ['packages/common/src/env.ts', '0 to 1,000,000 microseconds', "DTORCH_EVENT_LOOP_SPIN_US's range"],
  ['native/external/cuda/device_sync.cpp', 'within a few microseconds of its 20', "pollUntil's sleep, set below it"],
  ['native/external/cuda/device_sync.cpp', '1 us: its polls', 'the timer slack the line sets'],
  ['native/external/torch/process_group.h', 'fails within 100 ms', "abortGlooGroups' bound, set in process_group.cpp"],
  ['native/external/torch/kernel_trace.h', 'gaps under 20 us', "a kernel trace's idle buckets"],
  ['native/external/torch/kernel_trace.h', '20 us to 200 us', "a kernel trace's idle buckets"],
  ['native/external/torch/kernel_trace.h', '200 us and more', "a kernel trace's idle buckets"],
  ['packages/external/src/torch.ts', 'short (under 20 µs:', "a kernel trace's idle buckets"],
  ['packages/external/src/torch.ts', 'medium (20 to 200 µs)', "a kernel trace's idle buckets"],
  ['packages/external/src/torch.ts', 'gaps under 20 µs', "a kernel trace's idle buckets"],
  ['packages/external/src/torch.ts', 'gaps of 20 to 200 µs', "a kernel trace's idle buckets"],
  ['packages/external/src/torch.ts', 'gaps of 200 µs and more', "a kernel trace's idle buckets"],
  ['packages/external/src/cluster/op_stream_socket.ts', '1 ms later and then up to every 20 ms', "a full peer's retry, set below it"],
];

const figure =
  /(?<![\w.])\d(?:[\d.,]*\d)?\s*(?:[-–]\s*\d(?:[\d.,]*\d)?\s*)?(?:ms|µs|us|ns|milliseconds?|microseconds?|nanoseconds?)\b|(?<![\w.])\d+\.\d+\s*(?:s|seconds?)\b/;

// The comments of a C++ or TypeScript source, by line: string and character literals skipped, so
// that a "//" or "/*" inside one starts nothing.
function comments(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let line = 1;
  let state: 'code' | 'line' | 'block' | "'" | '"' | '`' = 'code';
  let current = '';
  const end = () => {
    if (current.trim()) out.push({ line, text: current });
    current = '';
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    const next = text[i + 1];
    if (c === '\n') {
      if (state === 'line') state = 'code';
      end();
      line++;
      continue;
    }
    if (state === 'code') {
      if (c === '/' && (next === '/' || next === '*')) {
        state = next === '/' ? 'line' : 'block';
        i++;
      } else if (c === "'" || c === '"' || c === '`') state = c;
    } else if (state === 'line' || state === 'block') {
      if (state === 'block' && c === '*' && next === '/') {
        state = 'code';
        i++;
      } else current += c;
    } else if (c === '\\') i++; // an escaped character ends no string
    else if (c === state) state = 'code';
  }
  end();
  return out;
}

describe('comments in product code', () => {
  const name = (path: string) => relative(root, path).split(sep).join('/');
  const isTest = (path: string) => /(^|\/)(node_modules|dist)$|\.test\.ts$|^native\/tests$/.test(name(path));
  const code = /\.(h|cpp|cu|cuh|ts|mts|mjs|js)$/;
  const files = [
    ...sourceFiles(join(root, 'native'), code, isTest),
    ...readdirSync(join(root, 'packages')).flatMap((p) => sourceFiles(join(root, 'packages', p, 'src'), code, isTest)),
  ];
  const hits = files.flatMap((path) =>
    comments(readFileSync(path, 'utf8'))
      .filter((c) => figure.test(c.text))
      .map((c) => ({ file: name(path), line: c.line, text: c.text.trim() })),
  );
  const isAllowed = (hit: (typeof hits)[number]) => allowed.some(([file, text]) => hit.file === file && hit.text.includes(text));

  it('cite no measured times (they belong in bench/results and docs)', () => {
    expect(files.length).toBeGreaterThan(300);
    const cited = hits.filter((h) => !isAllowed(h)).map((h) => `${h.file}:${h.line}: ${h.text}`);
    expect(cited).toEqual([]);
  });

  it('allow only times the code sets, each still there', () => {
    const stale = allowed.filter(([file, text]) => !hits.some((h) => h.file === file && h.text.includes(text)));
    expect(stale).toEqual([]);
  });

  it('reads comments, not strings, and knows a figure when it sees one', () => {
    const src = 'const a = "// 5 ms"; // took 3.3 µs\nconst g = \'**/*.ts\'; /* 80 us\n * 0.629-0.648 ms */ x(); // 4x, 1.5 s\nlet s = `/*`; // ok';
    expect(comments(src)).toEqual([
      { line: 1, text: ' took 3.3 µs' },
      { line: 2, text: ' 80 us' },
      { line: 3, text: ' * 0.629-0.648 ms  4x, 1.5 s' },
      { line: 4, text: ' ok' },
    ]);
    for (const yes of ['3.3 µs', '691 vs 329 ns', '15.50 to 15.08 ms', '0.629-0.648 ms', '3.70 s', '20 microseconds']) expect(yes).toMatch(figure);
    for (const no of ['within 5 s', 'timeoutMs', 'a 1024x1024 step', 'kMs20', 'v1.5s']) expect(no).not.toMatch(figure);
  });
});
