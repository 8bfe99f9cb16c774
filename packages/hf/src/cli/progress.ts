// The denoising loop's progress for `dtorch generate`: a cli-progress bar with steps per second
// and time left on a terminal, one plain line per step otherwise (a log file or a pipe gets no
// control characters). Speed is measured from the end of the first step, so that prompt
// encoding and the first step's warm-up do not count.
import { Presets, SingleBar } from 'cli-progress';
import type { StepInfo } from '../pipelines/diffusion_pipeline.js';

/** The denoising speed so far, as stepRate measures it. */
export interface StepRate {
  /** Steps per second after the first; undefined after one step. */
  stepsPerSecond: number | undefined;
  /** Seconds left at that rate. */
  secondsLeft: number | undefined;
}

/** Steps per second and time left from the first step's end to this one's. */
export function stepRate(first: StepInfo, now: StepInfo): StepRate {
  const seconds = (now.elapsedMs - first.elapsedMs) / 1000;
  if (now.step <= first.step || seconds <= 0) return { stepsPerSecond: undefined, secondsLeft: undefined };
  const stepsPerSecond = (now.step - first.step) / seconds;
  return { stepsPerSecond, secondsLeft: (now.steps - now.step) / stepsPerSecond };
}

function formatSeconds(seconds: number | undefined): string {
  if (seconds === undefined) return '-';
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  return `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
}

function formatRate(rate: number | undefined): string {
  return rate === undefined ? '-' : rate >= 10 ? rate.toFixed(1) : rate.toFixed(2);
}

/** The progress of `dtorch generate`'s denoising loop: a bar on a terminal, a line per step otherwise. */
export class StepProgress {
  private readonly bar: SingleBar | undefined;
  private first: StepInfo | undefined;
  private started = false;

  /** A bar on `stream` when it is a terminal, else plain lines. */
  constructor(private readonly stream: NodeJS.WriteStream = process.stdout) {
    if (stream.isTTY) {
      this.bar = new SingleBar(
        {
          stream,
          format: 'denoising {bar} {value}/{total} steps | {rate} steps/s | {left} left',
          hideCursor: true,
          clearOnComplete: false,
        },
        Presets.shades_classic,
      );
    }
  }

  /** pipe.generate's onStep. */
  readonly onStep = (info: StepInfo): void => {
    this.first ??= info;
    const { stepsPerSecond, secondsLeft } = stepRate(this.first, info);
    const rate = formatRate(stepsPerSecond);
    const left = formatSeconds(secondsLeft);
    if (this.bar) {
      if (!this.started) {
        this.bar.start(info.steps, 0, { rate, left });
        process.once('SIGINT', this.interrupted);
      }
      this.started = true;
      this.bar.update(info.step, { rate, left });
    } else {
      this.stream.write(`step ${info.step}/${info.steps}  ${rate} steps/s  ${left} left\n`);
    }
  };

  // Ctrl-C during the loop: the bar hid the cursor, give it back before leaving
  private readonly interrupted = (): void => {
    this.stop();
    process.exit(130);
  };

  /** Ends the bar (also after a failed run, so that the cursor comes back). */
  stop(): void {
    if (this.bar && this.started) this.bar.stop();
    process.off('SIGINT', this.interrupted);
    this.started = false;
  }
}
