// A tiny stand-in for the HuggingFace hub, on 127.0.0.1, answering the routes that
// @huggingface/hub (and Python's huggingface_hub) call, the way huggingface.co answers them:
//   GET  /api/models/{repo}/revision/{rev}      repo info: sha (the commit), siblings (the files)
//   POST /api/models/{repo}/paths-info/{rev}    per path: oid (git sha1), size, lfs {oid: sha256}, lastCommit
//   HEAD|GET /{repo}/resolve/{rev}/{path}       small files: the bytes, ETag "<git sha1>";
//                                              LFS files: 302 to http://localhost:<port>/cdn-lfs/<sha256>
//                                              with X-Linked-Etag <sha256>, X-Linked-Size
//   HEAD|GET /cdn-lfs/{sha256}                  the LFS bytes (Range honoured), as from the hub's CDN
// Every answer carries X-Repo-Commit where the hub sends it; nothing advertises xet. Every request
// is recorded (route, path, Authorization, Range) so tests can count them.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeFile {
  path: string;
  content: Uint8Array;
  /** Stored with Git LFS (served by redirect to /cdn-lfs/<sha256>, blob named by sha256). */
  lfs?: boolean;
}

export interface FakeRevision {
  commit: string;
  files: FakeFile[];
}

export interface FakeRepo {
  id: string;
  /** Branches and tags, each to a commit and its files. A commit hash resolves too. */
  revisions: Record<string, FakeRevision>;
}

export interface FakeHubOptions {
  repos: FakeRepo[];
  /** When set, every request to the hub (not its CDN) without `Authorization: Bearer <token>` gets 401. */
  token?: string;
  /**
   * The host name LFS downloads are redirected to (default 'localhost', the same server under
   * another name): another host, as the hub's CDN is, so that clients treat it as one.
   */
  cdnHost?: string;
  /**
   * Answer a probe that accepts `application/vnd.xet-fileinfo+json` for an LFS file as the hub does
   * for a xet-backed file: its xet hash and the links to xet's token and reconstruction routes
   * (which this server does not serve: a client that follows them fails).
   */
  xet?: boolean;
  /** Files answered with this status on resolve (paths-info still lists them), as a gated file (401) or a vanished one (404). */
  fileStatus?: Record<string, number>;
}

export type Route = 'info' | 'paths-info' | 'resolve' | 'cdn' | 'other';

export interface RecordedRequest {
  method: string;
  route: Route;
  /** The URL path, decoded. */
  path: string;
  /** The repository file a resolve/cdn request is for, when known. */
  file?: string;
  authorization?: string;
  range?: string;
  accept?: string;
}

export interface FakeHub {
  url: string;
  requests: RecordedRequest[];
  /** Requests of one route (and method, file) so far. */
  count(route: Route, filter?: { method?: string; file?: string; body?: boolean }): number;
  close(): Promise<void>;
}

export const sha1Hex = (bytes: Uint8Array | string) => createHash('sha1').update(bytes).digest('hex');
export const sha256Hex = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');
/** The git blob id of a file's bytes: what the hub gives as oid and ETag of a non-LFS file. */
export const gitBlobSha1 = (bytes: Uint8Array) =>
  createHash('sha1').update(`blob ${bytes.byteLength}\0`).update(bytes).digest('hex');

function lfsPointer(bytes: Uint8Array): Buffer {
  return Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256Hex(bytes)}\nsize ${bytes.byteLength}\n`);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

// 200, or 206 for a `bytes=a-b` range.
async function sendBytes(req: IncomingMessage, res: ServerResponse, bytes: Uint8Array, headers: Record<string, string>): Promise<void> {
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const common = { 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream', ...headers };
  if (range) {
    const start = Number(range[1]);
    const end = range[2] ? Math.min(Number(range[2]), bytes.byteLength - 1) : bytes.byteLength - 1;
    const part = bytes.subarray(start, end + 1);
    res.writeHead(206, { ...common, 'Content-Length': part.byteLength, 'Content-Range': `bytes ${start}-${end}/${bytes.byteLength}` });
    res.end(req.method === 'HEAD' ? undefined : part);
    return;
  }
  res.writeHead(200, { ...common, 'Content-Length': bytes.byteLength });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  // in 4 chunks a few ms apart, so that progress sees them one by one
  const step = Math.max(1, Math.ceil(bytes.byteLength / 4));
  for (let at = 0; at < bytes.byteLength; at += step) {
    res.write(bytes.subarray(at, at + step));
    await new Promise((done) => setTimeout(done, 5));
  }
  res.end();
}

export async function startFakeHub(options: FakeHubOptions): Promise<FakeHub> {
  const requests: RecordedRequest[] = [];
  const blobs = new Map<string, FakeFile>(); // sha256 -> file, for /cdn-lfs
  for (const repo of options.repos) {
    for (const rev of Object.values(repo.revisions)) for (const f of rev.files) if (f.lfs) blobs.set(sha256Hex(f.content), f);
  }
  let base = '';
  let cdnBase = '';

  // the repo a path starts with (ids have at most one slash), and the rest
  const splitRepo = (path: string): { repo: FakeRepo; rest: string } | undefined => {
    for (const repo of options.repos) {
      if (path.startsWith(`${repo.id}/`)) return { repo, rest: path.slice(repo.id.length + 1) };
    }
    return undefined;
  };
  const findRevision = (repo: FakeRepo, rev: string): FakeRevision | undefined =>
    repo.revisions[rev] ?? Object.values(repo.revisions).find((r) => r.commit === rev);

  const handle = async (req: IncomingMessage, res: ServerResponse, record: RecordedRequest): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://x');
    const path = decodeURIComponent(url.pathname);
    record.path = path;
    // the CDN's URLs are signed by the hub's redirect: no token there
    const cdn = /^\/cdn-lfs\/([0-9a-f]{64})$/.exec(path);
    if (!cdn && options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) {
      sendJson(res, 401, { error: 'Invalid credentials in Authorization header' });
      return;
    }
    if (cdn) {
      record.route = 'cdn';
      const file = blobs.get(cdn[1]!);
      if (!file) return sendJson(res, 404, { error: 'no such object' });
      record.file = file.path;
      await sendBytes(req, res, file.content, { ETag: `"${cdn[1]}"` });
      return;
    }

    const api = /^\/api\/models\/(.+)$/.exec(path);
    if (api) {
      const found = splitRepo(api[1]!);
      const m = found && /^(revision|paths-info)\/(.+)$/.exec(found.rest);
      if (!found || !m) {
        record.route = 'other';
        return sendJson(res, 404, { error: 'Repository not found' }, { 'X-Error-Code': 'RepoNotFound' });
      }
      record.route = m[1] === 'revision' ? 'info' : 'paths-info';
      const rev = findRevision(found.repo, m[2]!);
      if (!rev) return sendJson(res, 404, { error: `Invalid rev id: ${m[2]}` }, { 'X-Error-Code': 'RevisionNotFound' });
      if (m[1] === 'revision') {
        return sendJson(res, 200, {
          _id: `id-${found.repo.id}`,
          id: found.repo.id,
          sha: rev.commit,
          private: false,
          gated: false,
          downloads: 0,
          likes: 0,
          lastModified: '2025-01-01T00:00:00.000Z',
          siblings: rev.files.map((f) => ({ rfilename: f.path })),
        });
      }
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { paths: string[] };
      const infos = rev.files.filter((f) => body.paths.includes(f.path)).map((f) => ({
        type: 'file',
        path: f.path,
        size: f.content.byteLength,
        oid: f.lfs ? gitBlobSha1(lfsPointer(f.content)) : gitBlobSha1(f.content),
        ...(f.lfs && { lfs: { oid: sha256Hex(f.content), size: f.content.byteLength, pointerSize: lfsPointer(f.content).byteLength } }),
        // the commit that last changed the file, older than the revision's (as on the hub)
        lastCommit: { id: sha1Hex(`last change of ${f.path}`), title: `update ${f.path}`, date: '2024-01-01T00:00:00.000Z' },
        securityFileStatus: { status: 'safe' },
      }));
      return sendJson(res, 200, infos);
    }

    const found = splitRepo(path.slice(1));
    const m = found && /^resolve\/([^/]+)\/(.+)$/.exec(found.rest);
    if (!found || !m) {
      record.route = 'other';
      return sendJson(res, 404, { error: 'Repository not found' }, { 'X-Error-Code': 'RepoNotFound' });
    }
    record.route = 'resolve';
    record.file = m[2]!;
    const rev = findRevision(found.repo, m[1]!);
    if (!rev) return sendJson(res, 404, { error: `Invalid rev id: ${m[1]}` }, { 'X-Error-Code': 'RevisionNotFound' });
    const forced = options.fileStatus?.[m[2]!];
    if (forced === 404) return sendJson(res, 404, { error: 'Entry not found' }, { 'X-Error-Code': 'EntryNotFound', 'X-Repo-Commit': rev.commit });
    if (forced !== undefined) {
      return sendJson(res, forced, { error: `Access to model ${found.repo.id} is restricted. You must have access to it and be authenticated to access it. Please log in.` }, { 'X-Error-Code': 'GatedRepo' });
    }
    const file = rev.files.find((f) => f.path === m[2]);
    if (!file) return sendJson(res, 404, { error: 'Entry not found' }, { 'X-Error-Code': 'EntryNotFound', 'X-Repo-Commit': rev.commit });
    if (file.lfs && options.xet && req.headers.accept?.includes('application/vnd.xet-fileinfo+json')) {
      const hash = sha256Hex(`xet ${file.path}`);
      return sendJson(res, 200, { casUrl: `${base}/xet-cas`, hash, refreshUrl: `${base}/api/models/${found.repo.id}/xet-read-token/${rev.commit}` }, {
        'Content-Type': 'application/vnd.xet-fileinfo+json',
        'X-Repo-Commit': rev.commit,
        'X-Linked-Etag': `"${sha256Hex(file.content)}"`,
        'X-Linked-Size': String(file.content.byteLength),
        'X-Xet-Hash': hash,
        Link: `<${base}/api/models/${found.repo.id}/xet-read-token/${rev.commit}>; rel="xet-auth", <${base}/xet-cas/reconstructions/${hash}>; rel="xet-reconstruction-info"`,
      });
    }
    if (file.lfs) {
      const sha = sha256Hex(file.content);
      res.writeHead(302, {
        Location: `${cdnBase}/cdn-lfs/${sha}`,
        'X-Repo-Commit': rev.commit,
        'X-Linked-Etag': `"${sha}"`,
        'X-Linked-Size': String(file.content.byteLength),
        ETag: `"${gitBlobSha1(lfsPointer(file.content))}"`,
        'Content-Length': 0,
      });
      res.end();
      return;
    }
    await sendBytes(req, res, file.content, { ETag: `"${gitBlobSha1(file.content)}"`, 'X-Repo-Commit': rev.commit });
  };

  const server = createServer((req, res) => {
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      route: 'other',
      path: req.url ?? '',
      ...(req.headers.authorization !== undefined && { authorization: req.headers.authorization }),
      ...(req.headers.range !== undefined && { range: req.headers.range }),
      ...(req.headers.accept !== undefined && { accept: req.headers.accept }),
    };
    requests.push(record);
    handle(req, res, record).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: String(err) });
      else res.destroy();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  cdnBase = `http://${options.cdnHost ?? 'localhost'}:${port}`;

  return {
    url: base,
    requests,
    count(route, filter = {}) {
      return requests.filter((r) =>
        r.route === route &&
        (filter.method === undefined || r.method === filter.method) &&
        (filter.file === undefined || r.file === filter.file) &&
        // a body request: a GET with no Range, or with a Range other than the 1-byte probe
        (filter.body === undefined || filter.body === (r.method === 'GET' && r.range !== 'bytes=0-0'))).length;
    },
    close: () => new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    }),
  };
}
