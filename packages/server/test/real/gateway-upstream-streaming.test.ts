// Streaming through the gateway's upstream mode: a 100 MiB upload and a 100 MiB download pass
// through with flat memory. The gateway runs in a child process of its own; its resident memory
// is sampled while the bytes flow, and its growth must stay far below what buffering would take.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, test } from 'node:test';
import { within } from '../support/bounded.js';
import { startEchoUpstream, type Upstream } from '../support/upstream-harness.js';

const MiB = 1024 * 1024;
const TOTAL = 100 * MiB;
/** Far below the 100 MiB a buffering proxy would hold; room for the JIT, pools and GC slack. */
const MAX_GROWTH_MIB = 30;

function statusField(pid: number, field: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN) / 1024;
}

/**
 * Runs `work` while sampling the resident memory of `pid` every 5 ms; returns the growth over
 * the resident memory before it (MiB), the larger of the sampled peak and the kernel's own
 * high-water mark (reset first through clear_refs where the kernel allows it).
 */
async function rssGrowth(pid: number, work: () => Promise<void>): Promise<{ before: number; peak: number; growth: number }> {
  let hwmReset = true;
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    hwmReset = false;
  }
  const before = statusField(pid, 'VmRSS');
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, statusField(pid, 'VmRSS'));
  }, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  if (hwmReset) peak = Math.max(peak, statusField(pid, 'VmHWM'));
  peak = Math.max(peak, statusField(pid, 'VmRSS'));
  return { before, peak, growth: peak - before };
}

/** Streams `total` bytes (a repeated random 64 KiB block) to the gateway; returns what the upstream counted and the digest sent. */
async function upload(
  port: number,
  bearer: string,
  total: number,
): Promise<{ status: number; echo: { bytes: number; sha256: string }; sent: string }> {
  const block = randomBytes(64 * 1024);
  const hash = createHash('sha256');
  async function* body() {
    for (let sent = 0; sent < total; sent += block.length) {
      const chunk = block.subarray(0, Math.min(block.length, total - sent));
      hash.update(chunk);
      yield chunk;
    }
  }
  return await new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'PUT',
        path: '/upload',
        headers: { authorization: bearer, 'content-type': 'application/octet-stream', 'content-length': String(total) },
        agent: false,
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, echo: JSON.parse(text), sent: hash.digest('hex') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    pipeline(Readable.from(body()), req).catch(reject);
  });
}

/** Reads a `total`-byte download through the gateway; returns the status and the byte count. */
function download(port: number, bearer: string, total: number): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: `/download?bytes=${total}`, headers: { authorization: bearer }, agent: false },
      (res) => {
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('gateway upstream mode, streaming (the real gateway, in its own process)', () => {
  let up: Upstream;
  let child: ChildProcess;
  let port: number;
  let bearer: string;
  const dir = mkdtempSync(join(tmpdir(), 'svc-gw-stream-'));
  before(async () => {
    up = await startEchoUpstream();
    const tokenFile = join(dir, 'bearer');
    child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '../support/upstream-gateway-child.ts'), up.url.href, tokenFile],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    port = await within(
      new Promise<number>((resolve, reject) => {
        let out = '';
        child.stdout?.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
          if (m?.[1]) resolve(Number(m[1]));
        });
        child.once('exit', (code) => reject(new Error(`the gateway exited ${code}`)));
      }),
      60_000,
      'the gateway child process to print its listening line',
    );
    bearer = readFileSync(tokenFile, 'utf8');
    // Warm-up: the proxy path compiled and its pools made before anything is measured.
    for (let i = 0; i < 3; i++) {
      await upload(port, bearer, 4 * MiB);
      await download(port, bearer, 4 * MiB);
    }
  });
  after(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await within(exited, 20_000, 'the gateway child process to exit on SIGTERM');
    }
    await up.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a 100 MiB upload streams through the gateway with flat memory', async (t) => {
    let result: Awaited<ReturnType<typeof upload>> | undefined;
    const mem = await rssGrowth(child.pid as number, async () => {
      result = await upload(port, bearer, TOTAL);
    });
    t.diagnostic(
      `gateway RSS ${mem.before.toFixed(1)} MiB before, peak ${mem.peak.toFixed(1)} MiB: +${mem.growth.toFixed(1)} MiB for 100 MiB`,
    );
    assert.equal(result?.status, 200);
    assert.equal(result?.echo.bytes, TOTAL);
    assert.equal(result?.echo.sha256, result?.sent, 'the upstream got other bytes than were sent');
    assert.ok(mem.growth < MAX_GROWTH_MIB, `the gateway grew by ${mem.growth.toFixed(1)} MiB during a 100 MiB upload`);
  });

  test('a 100 MiB download streams through the gateway with flat memory', async (t) => {
    let result: Awaited<ReturnType<typeof download>> | undefined;
    const mem = await rssGrowth(child.pid as number, async () => {
      result = await download(port, bearer, TOTAL);
    });
    t.diagnostic(
      `gateway RSS ${mem.before.toFixed(1)} MiB before, peak ${mem.peak.toFixed(1)} MiB: +${mem.growth.toFixed(1)} MiB for 100 MiB`,
    );
    assert.equal(result?.status, 200);
    assert.equal(result?.bytes, TOTAL);
    assert.ok(mem.growth < MAX_GROWTH_MIB, `the gateway grew by ${mem.growth.toFixed(1)} MiB during a 100 MiB download`);
  });
});
