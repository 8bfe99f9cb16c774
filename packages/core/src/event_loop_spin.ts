// EventLoopSpin: keeps Node's event loop turning, rather than asleep in its poll for I/O, while a
// sync or read the program awaits is about to be answered. A worker thread answers through a
// thread-safe function (an eventfd the loop polls): seen within one turn of a turning loop,
// where a loop asleep in its poll must be woken first, which takes several times longer (a
// share of a short compiled forward: docs/engine.md has the figures). Each wait turns the loop
// for at most DTORCH_EVENT_LOOP_SPIN_US, so a long wait (a diffusion step) sleeps as before; the
// turns are setImmediate callbacks, so timers and I/O are served meanwhile as usual. CUDA's own
// synchronize spins the same way before it sleeps.

export class EventLoopSpin {
  readonly #spinMs: number;
  #pending = 0; // waits not yet answered
  #until = 0; // performance.now() when the latest wait's spin ends
  #turning = false;

  /** Spins each wait for at most `spinUs` microseconds; 0 never spins. */
  constructor(spinUs: number) {
    this.#spinMs = spinUs / 1000;
  }

  /** Whether the loop is being kept turning now. */
  get turning(): boolean {
    return this.#turning;
  }

  /** Keeps the loop turning while `answer` is pending (at most the spin); returns `answer` as it is. */
  around<T>(answer: Promise<T>): Promise<T> {
    if (this.#spinMs <= 0) return answer;
    this.#pending++;
    this.#until = Math.max(this.#until, performance.now() + this.#spinMs);
    const settled = () => {
      this.#pending--;
    };
    answer.then(settled, settled); // handles a rejection here only: the caller still gets it
    if (!this.#turning) {
      this.#turning = true;
      setImmediate(this.#turn);
    }
    return answer;
  }

  readonly #turn = (): void => {
    if (this.#pending > 0 && performance.now() < this.#until) setImmediate(this.#turn);
    else this.#turning = false;
  };
}
