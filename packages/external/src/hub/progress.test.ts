// Download progress: bytes per file to onProgress, a cli-progress bar on a terminal, nothing else.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { captureOutput, tempDir, useFakeHub } from '../../test/hub_env.js';
import { REPO_ID, tinyFiles, tinyRepo } from '../../test/tiny_repo.js';
import type { DownloadProgress } from './hub_fetch.js';
import { openRepo } from './open_repo.js';
import { terminalSink } from './progress.js';

const fake = useFakeHub(() => [tinyRepo()]);

describe('download progress', () => {
  it('gives onProgress increasing byte counts per file, ending at the file size; nothing for a cached file', async () => {
    const events: DownloadProgress[] = [];
    const cacheDir = tempDir('cache');
    const files = ['model.safetensors', 'config.json'];
    const { output } = await captureOutput(async () =>
      (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url, onProgress: (p) => events.push(p) })).fetch(files));
    expect(output).toBe('');
    for (const path of files) {
      const size = tinyFiles().find((f) => f.path === path)!.content.byteLength;
      const mine = events.filter((e) => e.file === path);
      expect(mine.length).toBeGreaterThan(2); // the fake hub sends each body in 4 chunks
      expect(mine[0]!.loaded).toBe(0);
      for (let i = 1; i < mine.length; i++) expect(mine[i]!.loaded).toBeGreaterThan(mine[i - 1]!.loaded);
      expect(mine.every((e) => e.total === size)).toBe(true);
      expect(mine.at(-1)!.loaded).toBe(size);
    }
    // one file after the other
    expect(events.findIndex((e) => e.file === 'config.json')).toBeGreaterThan(events.findLastIndex((e) => e.file === 'model.safetensors'));

    events.length = 0;
    await (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url, onProgress: (p) => events.push(p) })).fetch(files);
    expect(events).toEqual([]);
  });

  it('draws a bar per file on a terminal (cli-progress)', () => {
    let text = '';
    const stream = Object.assign(new Writable({ write(chunk, _enc, done) { text += String(chunk); done(); } }), { isTTY: true, columns: 120 });
    const sink = terminalSink(stream as unknown as NodeJS.WriteStream);
    sink.update({ file: 'model.safetensors', loaded: 0, total: 2_500_000 });
    sink.update({ file: 'model.safetensors', loaded: 1_250_000, total: 2_500_000 });
    sink.update({ file: 'model.safetensors', loaded: 2_500_000, total: 2_500_000 });
    sink.end('model.safetensors', true);
    expect(text).toContain('model.safetensors');
    expect(text).toContain('100%');
    expect(text).toContain('2.50 MB / 2.50 MB');
  });
});
