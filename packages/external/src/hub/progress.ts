// Download progress: the user's onProgress callback, else a bar per file on a terminal's stderr
// (cli-progress, as @huggingface/hub's own CLI uses), else nothing.
import cliProgress from 'cli-progress';
import type { DownloadProgress, ProgressSink } from './hub_fetch.js';

export function callbackSink(onProgress: (progress: DownloadProgress) => void): ProgressSink {
  const last = new Map<string, DownloadProgress>();
  return {
    update(progress) {
      last.set(progress.file, progress);
      onProgress(progress);
    },
    end(file, ok) {
      const seen = last.get(file);
      last.delete(file);
      // the last word on a complete file says its size, even when the hub did not send one
      if (ok && seen && seen.total === undefined) onProgress({ file, loaded: seen.loaded, total: seen.loaded });
    },
  };
}

function formatBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

/** One bar per file being downloaded, on `stream` (stderr), which must be a terminal. */
export function terminalSink(stream: NodeJS.WriteStream = process.stderr): ProgressSink {
  const bars = new Map<string, cliProgress.SingleBar>();
  const payload = (p: DownloadProgress) => ({ file: p.file, loadedText: formatBytes(p.loaded), totalText: p.total === undefined ? '?' : formatBytes(p.total) });
  return {
    update(progress) {
      let bar = bars.get(progress.file);
      if (!bar) {
        bar = new cliProgress.SingleBar({
          stream,
          format: '{file} |{bar}| {percentage}% | {loadedText} / {totalText} | {eta_formatted}',
          // the cursor stays visible and no signal handler is added: an interrupted download leaves the terminal as it was
          hideCursor: false,
          gracefulExit: false,
          barsize: 30,
        }, cliProgress.Presets.shades_classic);
        bars.set(progress.file, bar);
        bar.start(progress.total ?? 0, progress.loaded, payload(progress));
        return;
      }
      if (progress.total === undefined) bar.setTotal(progress.loaded);
      bar.update(progress.loaded, payload(progress));
    },
    end(file) {
      bars.get(file)?.stop();
      bars.delete(file);
    },
  };
}

const silent: ProgressSink = { update() {}, end() {} };

/** The sink for one openRepo: the callback when given, else a bar when stderr is a terminal. */
export function progressSink(onProgress: ((progress: DownloadProgress) => void) | undefined, barsDisabled: boolean): ProgressSink {
  if (onProgress) return callbackSink(onProgress);
  if (!barsDisabled && process.stderr.isTTY) return terminalSink(process.stderr);
  return silent;
}
