// What the tests share: a real `leasekit serve` (LEASEKIT_BIN), a tapped fetch that records
// what is sent and can lose or replace answers, and a TCP proxy that can go silent.

import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export const API_KEY = "ts-client-key-0123456789";
export const ADMIN_KEY = "ts-admin-key-0123456789";

/** A fresh server on its own data dir; `stop()` ends it. */
export async function serve() {
  const bin = process.env.LEASEKIT_BIN;
  if (!bin) throw new Error("set LEASEKIT_BIN to the leasekit binary");
  const dir = mkdtempSync(join(tmpdir(), "leasekit-ts-"));
  const child = spawn(
    bin,
    ["serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--api-key", `ts:${API_KEY}`, "--admin-key", `ts:${ADMIN_KEY}`],
    { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, RUST_LOG: "error" } },
  );
  const [url] = await new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`leasekit serve exited: ${code}`)));
    createInterface({ input: child.stdout }).once("line", (line) => resolve([line.trim()]));
  });
  if (!url.startsWith("http://127.0.0.1:")) throw new Error(`no URL: ${url}`);
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", resolve);
        child.kill("SIGTERM");
      }),
  };
}

let counter = 0;
/** A resource name of its own for each test. */
export const name = (what) => `${what}-${process.pid}-${++counter}`;

/**
 * A fetch that records each request (`sent`: {headers, body}) and, for the nth request
 * (1-based), may lose its answer after the server made it (`lose(n, request)` true) or answer
 * in the server's place (`answer(n, request)` returns a Response).
 */
export function tap({ lose = () => false, answer = () => undefined } = {}) {
  const sent = [];
  const fetch = async (url, init) => {
    const request = { headers: Object.fromEntries(new Headers(init.headers)), body: JSON.parse(init.body) };
    sent.push(request);
    const n = sent.length;
    const instead = answer(n, request);
    if (instead) return instead;
    const response = await globalThis.fetch(url, init);
    if (lose(n, request)) {
      await response.arrayBuffer();
      throw new TypeError("fetch failed: the answer was lost on the way back");
    }
    return response;
  };
  return { fetch, sent };
}

/**
 * Forwards loopback TCP to the server until `silent` is set; from then on every byte either way
 * is dropped and nothing is answered (connections stay open: a hung server, not a refusal).
 */
export async function silentProxy(target) {
  const { hostname, port } = new URL(target);
  const state = { silent: false, lateMs: 0 };
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
    }
    client.on("data", (chunk) => state.silent || upstream.write(chunk));
    // Answers, in order, each chunk `lateMs` after it came (the server acted; the client hears late).
    let answers = Promise.resolve();
    upstream.on("data", (chunk) => {
      const late = state.lateMs;
      answers = answers.then(() => (late ? sleep(late) : undefined)).then(() => state.silent || client.write(chunk));
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    goSilent: () => {
      state.silent = true;
    },
    answerLate: (ms) => {
      state.lateMs = ms;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
