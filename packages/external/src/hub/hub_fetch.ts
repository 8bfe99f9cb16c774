// The `fetch` handed to @huggingface/hub for one call: it adds the token (to the hub's own
// address only), notes the hub's answer when it is not OK (the library's errors keep the status
// but not the X-Error-Code header that says RepoNotFound / EntryNotFound / GatedRepo), and counts
// the bytes of a file's body as they arrive, for progress.

/** Bytes of one file received so far; `total` when the hub said the size. */
export interface DownloadProgress {
  /** The file's path inside the repository, e.g. `text_encoder/model.safetensors`. */
  file: string;
  /** Bytes received so far. */
  loaded: number;
  /** The file's size in bytes, from Content-Length; absent when the hub did not send one. */
  total?: number;
}

/** Where byte counts go: the user's callback, a terminal bar, or nowhere. */
export interface ProgressSink {
  /** More bytes of a file arrived (also called once with `loaded` 0 when its body starts). */
  update(progress: DownloadProgress): void;
  /** The file's body ended (complete, or failed when `ok` is false). */
  end(file: string, ok: boolean): void;
}

/** The hub's last answer that was not OK, for the error message. */
export interface HubFailure {
  url: string;
  status: number;
  /** X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo, ... */
  errorCode?: string;
  /** X-Error-Message, when the hub sends one. */
  errorMessage?: string;
}

export interface HubCall {
  failure?: HubFailure;
}

export interface HubFetchOptions {
  hubUrl: string;
  token: string | undefined;
  call: HubCall;
  /** The file this call downloads, and where its byte counts go. */
  progress?: { file: string; sink: ProgressSink };
}

function sameOrigin(url: string, base: string): boolean {
  try {
    return new URL(url).origin === new URL(base).origin;
  } catch {
    return false;
  }
}

export function hubFetch(options: HubFetchOptions): typeof fetch {
  const { hubUrl, token, call, progress } = options;
  return async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    // the token goes to the hub only; fetch itself drops it on a redirect to another origin
    if (token !== undefined && sameOrigin(url, hubUrl)) headers.set('Authorization', `Bearer ${token}`);
    const response = await fetch(input, { ...init, headers });
    if (!response.ok) {
      call.failure = {
        url,
        status: response.status,
        ...(response.headers.get('X-Error-Code') !== null && { errorCode: response.headers.get('X-Error-Code')! }),
        ...(response.headers.get('X-Error-Message') !== null && { errorMessage: response.headers.get('X-Error-Message')! }),
      };
      return response;
    }
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    // the body of a file: a GET off the API routes, not the library's 1-byte size probe
    const isBody = method === 'GET' && headers.get('Range') !== 'bytes=0-0' && !url.startsWith(`${hubUrl}/api/`);
    if (!progress || !isBody || response.body === null) return response;
    return countBytes(response, progress.file, progress.sink);
  };
}

// The same response, its body counted chunk by chunk into `sink`.
function countBytes(response: Response, file: string, sink: ProgressSink): Response {
  const length = Number(response.headers.get('Content-Length') ?? NaN);
  const total = Number.isFinite(length) ? length : undefined;
  let loaded = 0;
  sink.update({ file, loaded, ...(total !== undefined && { total }) });
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      loaded += chunk.byteLength;
      sink.update({ file, loaded, ...(total !== undefined && { total }) });
      controller.enqueue(chunk);
    },
    flush() {
      sink.end(file, total === undefined || loaded === total);
    },
  });
  const counted = new Response(response.body!.pipeThrough(counter), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  // a new Response has no url; the library may read it
  Object.defineProperty(counted, 'url', { value: response.url });
  return counted;
}
