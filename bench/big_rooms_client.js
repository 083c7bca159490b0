#!/usr/bin/env node
// Benchmark 17's load client in Node (`node bench/big_rooms_client.js CONFIG.json`): the same
// phases, protocol and output as bench/big_rooms_client.py (its docstring says what each phase
// measures), one of several processes each holding its share of the sockets. Python's client spent
// most of its CPU parsing rosters (a storm of N joins is N^2/2 member entries to parse); V8's
// JSON.parse and the `ws` package cost a fraction of that, so the machine's cores go to the
// servers. Needs Node 18+ and `npm ci --prefix bench` (the `ws` of bench/package-lock.json);
// bench/big_rooms.py runs it when BENCH_BIG_ROOMS_CLIENT is `node` (its default when node is
// on PATH).
//
// Each socket: one user (the session cookie and the server's Origin, as a browser sends them),
// `hello` accepting `presence.diff` as presence.js does, a heartbeat every `beat_every` seconds
// on the clock from the moment it opens. It prints `ready` once its sockets are open, then reads
// one JSON command a line on stdin and answers each with one JSON line (storm, states, count,
// quit), as the Python client does. One addition, read by bench/big_rooms.py: the storm's
// rosters are sent once each (`rosters`), a socket naming its roster by index, since 5,000
// sockets' equal rosters of 5,000 members are 25 M names to print and parse otherwise.
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");
const zlib = require("zlib");
const WebSocket = require("ws");

// permessage-deflate, in the loop. ws inflates and deflates each message through a zlib stream
// in libuv's thread pool: at thousands of frames a second its hand-offs cost ~55 us of CPU a
// small frame here, against ~9 us for the frame uncompressed and ~19 us inflated in place (the
// same zlib, the same context kept across messages; a storm's client spent a quarter of its CPU
// deflating its heartbeats through the pool). So the client runs zlib with each stream's own
// handle, synchronously (Node's internals, as its zlib.inflateRawSync uses them; without them,
// or with BENCH_BIG_ROOMS_WS_ZLIB=1, ws' own path runs). Every frame is still compressed as a
// browser compresses it; what the servers send and negotiate is unchanged.
const TRAILER = Buffer.from([0x00, 0x00, 0xff, 0xff]);

// All of `chunk` through zlib stream `z` with Z_SYNC_FLUSH, synchronously: its output.
function zlibSync(z, chunk) {
  const handle = z._handle;
  const state = z._writeState;
  let inOff = 0;
  let availIn = chunk.length;
  const buffers = [];
  let total = 0;
  for (;;) {
    const availOut = z._chunkSize - z._outOffset;
    handle.writeSync(
      zlib.constants.Z_SYNC_FLUSH,
      chunk,
      inOff,
      availIn,
      z._outBuffer,
      z._outOffset,
      availOut,
    );
    if (z.syncError || z.destroyed) throw z.syncError || new Error("zlib failed");
    const outLeft = state[0];
    const inLeft = state[1];
    const have = availOut - outLeft;
    if (have > 0) {
      buffers.push(z._outBuffer.subarray(z._outOffset, z._outOffset + have));
      z._outOffset += have;
      total += have;
    }
    if (outLeft === 0 || z._outOffset >= z._chunkSize) {
      z._outOffset = 0;
      z._outBuffer = Buffer.allocUnsafe(z._chunkSize);
    }
    if (outLeft !== 0) break; // the input consumed, the output flushed
    inOff += availIn - inLeft;
    availIn = inLeft;
  }
  return buffers.length === 1 ? Buffer.from(buffers[0]) : Buffer.concat(buffers, total);
}

function zlibInPlace() {
  const probe = zlib.createInflateRaw();
  const usable =
    typeof probe._handle?.writeSync === "function" &&
    probe._writeState instanceof Uint32Array &&
    typeof probe._chunkSize === "number";
  probe.close();
  if (!usable || process.env.BENCH_BIG_ROOMS_WS_ZLIB === "1") return false;
  const file = path.join(path.dirname(require.resolve("ws")), "lib", "permessage-deflate.js");
  const PerMessageDeflate = require(file);
  const cleanup = PerMessageDeflate.prototype.cleanup;
  const stream = (pmd, key, make, endpoint) => {
    if (!pmd[key]) {
      const bits = pmd.params[`${endpoint}_max_window_bits`];
      const windowBits = typeof bits === "number" ? bits : zlib.constants.Z_DEFAULT_WINDOWBITS;
      const options = key === "syncInflate" ? "zlibInflateOptions" : "zlibDeflateOptions";
      const z = make({...pmd._options[options], windowBits});
      z.on("error", (err) => {
        z.syncError = err;
      });
      pmd[key] = z;
    }
    return pmd[key];
  };
  PerMessageDeflate.prototype.decompress = function (data, fin, callback) {
    const peer = this._isServer ? "client" : "server";
    let out;
    try {
      const z = stream(this, "syncInflate", zlib.createInflateRaw, peer);
      out = zlibSync(z, fin ? Buffer.concat([data, TRAILER]) : data);
      if (fin && this.params[`${peer}_no_context_takeover`]) z.reset();
    } catch (err) {
      queueMicrotask(() => callback(err));
      return;
    }
    queueMicrotask(() => callback(null, out)); // ws awaits it as it awaits its own
  };
  PerMessageDeflate.prototype.compress = function (data, fin, callback) {
    const own = this._isServer ? "server" : "client";
    let out;
    try {
      const z = stream(this, "syncDeflate", zlib.createDeflateRaw, own);
      out = zlibSync(z, Buffer.isBuffer(data) ? data : Buffer.from(data));
      if (fin) out = out.subarray(0, out.length - 4); // the flush's 00 00 ff ff, as ws drops it
      if (fin && this.params[`${own}_no_context_takeover`]) z.reset();
    } catch (err) {
      queueMicrotask(() => callback(err));
      return;
    }
    queueMicrotask(() => callback(null, out));
  };
  PerMessageDeflate.prototype.cleanup = function () {
    for (const key of ["syncInflate", "syncDeflate"]) {
      if (this[key]) {
        this[key].close();
        this[key] = null;
      }
    }
    return cleanup.call(this);
  };
  return true;
}
const ZLIB = zlibInPlace() ? "in the loop" : "ws";

// One socket in SAMPLE parses its room states for the latency (the others count them).
const SAMPLE = 10;

const now = () => Date.now() / 1000; // the wall clock, as Python's time.time()
const sleep = (seconds) => new Promise((r) => setTimeout(r, Math.max(0, seconds * 1000)));
const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const systemSeconds = () => process.cpuUsage().system / 1e6;

// Names are interned: a storm's rosters hold the same few thousand strings, not 25 M copies.
const names = new Map();
const intern = (s) => {
  const got = names.get(s);
  if (got !== undefined) return got;
  names.set(s, s);
  return s;
};

// How late this process's event loop wakes a 20 ms sleep: a loop that lags delays every frame
// it reads (the latency it measures is then its own, not the servers').
class Lag {
  constructor() {
    this.samples = [];
    this.cpu0 = 0;
    this.sys0 = 0;
  }
  start() {
    this.samples = [];
    this.cpu0 = cpuSeconds();
    this.sys0 = systemSeconds();
  }
  result() {
    const lags = this.samples.length ? [...this.samples].sort((a, b) => a - b) : [0];
    return {
      cpu_s: cpuSeconds() - this.cpu0,
      system_s: systemSeconds() - this.sys0, // the kernel's part of it
      lag_p50: lags[Math.floor(lags.length / 2)],
      lag_p99: lags[Math.min(lags.length - 1, Math.floor(lags.length * 0.99))],
      lag_max: lags[lags.length - 1],
    };
  }
  run() {
    const tick = () => {
      const t = performance.now();
      setTimeout(() => {
        this.samples.push((performance.now() - t) / 1000 - 0.02);
        tick();
      }, 20);
    };
    tick();
  }
}

class Sock {
  constructor(ws, g) {
    this.ws = ws;
    this.g = g; // global index
    this.user = "";
    this.room = "";
    this.roster = new Set();
    this.frames = 0;
    this.bytes = 0;
    this.firstAt = 0;
    this.lastAt = 0;
    this.snapshotAt = null;
    this.fullAt = null;
    this.counted = null; // resolve() once its first count came
    this.latencies = [];
    this.kind = ""; // what is counted now: "storm", "states", "count"
    this.closeCode = null;
  }
}

function send(sock, frame) {
  if (sock.ws.readyState !== WebSocket.OPEN) return; // closed: its roster and counts say so
  try {
    sock.ws.send(JSON.stringify(frame));
  } catch {
    // closed meanwhile
  }
}

class Client {
  constructor(config) {
    this.config = config;
    this.lag = new Lag();
    // a probe holds a few sockets and reads every room state (its loop idles: what it
    // measures is the servers' delay, not a busy client's)
    this.probe = Boolean(config.probe);
    this.socks = [];
    this.n = 0;
    this.missing = 0;
    this.onFull = null;
    this.retries = 0; // joins Redis refused and that were asked again
  }

  open(cookie, g) {
    const servers = this.config.servers;
    const i = g % servers.length;
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(servers[i], {
        origin: this.config.origin[i],
        headers: {Cookie: cookie},
        handshakeTimeout: 120000,
        perMessageDeflate: true, // offered, as browsers and Python's websockets offer it
        maxPayload: 0,
      });
      const sock = new Sock(ws, g);
      const timer = setTimeout(() => reject(new Error(`no hello on socket ${g}`)), 180000);
      ws.on("message", (data) => {
        const text = data.toString();
        if (!sock.user) {
          const hello = JSON.parse(text);
          sock.user = intern(hello.user);
          ws.send(JSON.stringify({type: "hello", accept: ["presence.diff"]}));
          clearTimeout(timer);
          resolve(sock);
          return;
        }
        this.frame(sock, text);
      });
      ws.on("close", (code) => {
        sock.closeCode = code;
        if (!sock.user) {
          clearTimeout(timer);
          reject(new Error(`socket ${g} closed before its hello: ${code}`));
        }
      });
      ws.on("error", (err) => {
        if (!sock.user) {
          clearTimeout(timer);
          reject(err);
        }
      });
    });
  }

  frame(sock, text) {
    const kind = sock.kind;
    if ((kind === "storm" || kind === "count") && text.includes('"unavailable"')) {
      // Redis refused the join (a timeout): asked again a second later, as presence.js does
      const f = JSON.parse(text);
      if (f.type === "error" && f.code === "unavailable" && f.frame === "join") {
        this.retries += 1;
        setTimeout(() => send(sock, {type: "join", room: f.room}), 1000);
      }
      return;
    }
    if (kind === "states") {
      if (!text.includes('"presence.roomstate"')) return;
      const t = now();
      sock.frames += 1;
      sock.bytes += text.length;
      if (this.probe || sock.g % SAMPLE === 0) {
        for (const st of JSON.parse(text).states) {
          if (st.data) sock.latencies.push(t - st.data.t);
        }
      }
      return;
    }
    if (kind === "count") {
      if (text.includes('"presence.count"')) {
        sock.frames += 1;
        sock.bytes += text.length;
        if (sock.counted) {
          sock.counted();
          sock.counted = null;
        }
      }
      return;
    }
    if (kind !== "storm") return;
    const frame = JSON.parse(text);
    const type = frame.type;
    if (frame.room !== sock.room) return;
    if (type === "presence.state") {
      if (!frame.page) sock.roster = new Set();
      for (const m of frame.members) sock.roster.add(intern(m.user));
      if (!frame.more) sock.snapshotAt = now();
    } else if (type === "presence.diff") {
      const t = now();
      sock.frames += 1;
      sock.bytes += text.length;
      sock.firstAt = sock.firstAt || t;
      sock.lastAt = t;
      for (const m of frame.left) sock.roster.delete(m.user);
      for (const m of frame.joined) sock.roster.add(intern(m.user));
    } else {
      return;
    }
    if (sock.fullAt === null && sock.roster.size >= this.n) {
      sock.fullAt = now();
      this.missing -= 1;
      if (this.missing <= 0 && this.onFull) this.onFull();
    }
  }

  // A heartbeat a socket every `beat_every` seconds, spread, as presence.js beats: a round on
  // the clock, in chunks (a busy loop delays a chunk, never the round).
  async beat() {
    const every = Number(this.config.beat_every ?? 10);
    const chunks = 20;
    for (;;) {
      const socks = [...this.socks]; // those open so far
      const start = performance.now() / 1000;
      for (let c = 0; c < chunks; c++) {
        for (let k = c; k < socks.length; k += chunks) send(socks[k], {type: "heartbeat"});
        await sleep(start + (every * (c + 1)) / chunks - performance.now() / 1000);
      }
    }
  }

  // -- phases ----------------------------------------------------------------------------------
  async storm(cmd) {
    const room = cmd.room;
    const n = Number(cmd.n);
    const members = this.socks.filter((s) => s.g < n); // the others stay out of this room
    this.n = n;
    this.missing = members.length;
    const full = new Promise((r) => {
      this.onFull = r;
    });
    if (this.missing <= 0) this.onFull();
    for (const s of members) {
      Object.assign(s, {kind: "storm", room, roster: new Set(), frames: 0, bytes: 0});
      Object.assign(s, {firstAt: 0, lastAt: 0, snapshotAt: null, fullAt: null});
    }
    const startAt = Number(cmd.start_at);
    const spread = Number(cmd.spread);
    await Promise.all(
      members.map(async (s) => {
        await sleep(startAt + (spread * s.g) / n - now());
        send(s, {type: "join", room});
      }),
    );
    const deadline = startAt + spread + Number(cmd.settle);
    let timer;
    await Promise.race([
      full,
      new Promise((r) => {
        timer = setTimeout(r, Math.max(1, deadline - now()) * 1000);
      }),
    ]);
    clearTimeout(timer);
    await sleep(0.5); // a frame on its way still counts against the rate
    for (const s of members) s.kind = "";
    // each distinct roster once (sorted), a socket naming its own by index
    const rosters = [];
    const index = new Map();
    const sockets = members.map((s) => {
      const sorted = [...s.roster].sort();
      const key = sorted.join("\n");
      let i = index.get(key);
      if (i === undefined) {
        i = rosters.length;
        index.set(key, i);
        rosters.push(sorted);
      }
      return [s.frames, s.bytes, s.snapshotAt, s.fullAt, s.firstAt, s.lastAt, i];
    });
    const codes = {};
    for (const s of this.socks) {
      if (s.closeCode !== null) codes[s.closeCode] = (codes[s.closeCode] || 0) + 1;
    }
    return {
      sockets,
      rosters,
      users: members.map((s) => s.user),
      closed: this.socks.filter((s) => s.closeCode !== null).length,
      close_codes: codes,
    };
  }

  async states(cmd) {
    const members = this.socks.filter((s) => s.g < Number(cmd.n));
    for (const s of members) Object.assign(s, {kind: "states", frames: 0, bytes: 0, latencies: []});
    const startAt = Number(cmd.start_at);
    const seconds = Number(cmd.seconds);
    const hz = Number(cmd.hz);
    const room = cmd.room;
    const senders = members.filter((s) => s.g < Number(cmd.senders));
    const sender = async (s) => {
      const offset = (s.g % 7) / (7 * hz); // senders spread over the tick, as people move
      for (let k = 0; ; k++) {
        const at = startAt + offset + k / hz;
        if (at >= startAt + seconds) return;
        await sleep(at - now());
        send(s, {type: "roomstate", room, data: {t: now(), k}});
      }
    };
    await Promise.all(senders.map(sender));
    await sleep(startAt + seconds + 1.5 - now()); // the drain
    for (const s of members) s.kind = "";
    let frames = 0;
    let bytes = 0;
    const latencies = [];
    for (const s of members) {
      frames += s.frames;
      bytes += s.bytes;
      for (const x of s.latencies) latencies.push(x);
    }
    return {frames, bytes, latencies};
  }

  async count(cmd) {
    const room = cmd.room;
    const startAt = Number(cmd.start_at);
    const spread = Number(cmd.spread);
    const n = Number(cmd.n);
    const counted = [];
    for (const s of this.socks) {
      Object.assign(s, {kind: "count", frames: 0, bytes: 0});
      counted.push(
        new Promise((r) => {
          s.counted = r;
        }),
      );
    }
    await Promise.all(
      this.socks.map(async (s) => {
        await sleep(startAt - spread - 5 + (spread * s.g) / n - now());
        send(s, {type: "join", room});
      }),
    );
    let timer;
    const joined = await Promise.race([
      Promise.all(counted).then(() => true),
      new Promise((r) => {
        timer = setTimeout(() => r(false), Math.max(1, startAt - now()) * 1000);
      }),
    ]);
    clearTimeout(timer);
    const uncounted = this.socks.filter((s) => s.counted !== null).length; // no count yet
    await sleep(startAt - now());
    for (const s of this.socks) s.frames = s.bytes = 0;
    const seconds = Number(cmd.seconds);
    const rate = Number(cmd.rate);
    const total = Number(cmd.churners);
    const churners = this.socks.filter((s) => s.g < total);
    let changes = 0;
    // each churner leaves and joins again, its turns spread so that all make `rate`
    const churn = async (s) => {
      const period = (2 * total) / rate;
      for (let k = 0; ; k++) {
        const at = startAt + (s.g / total) * period + (k * period) / 2;
        if (at >= startAt + seconds) return;
        await sleep(at - now());
        send(s, {type: k % 2 === 0 ? "leave" : "join", room});
        changes += 1;
      }
    };
    await Promise.all(churners.map(churn));
    await sleep(startAt + seconds - now());
    const others = this.socks.filter((s) => s.g >= total);
    for (const s of this.socks) s.kind = "";
    let frames = 0;
    let bytes = 0;
    for (const s of others) {
      frames += s.frames;
      bytes += s.bytes;
    }
    return {joined, uncounted, changes, others: others.length, frames, bytes};
  }
}

async function main(path) {
  const config = JSON.parse(fs.readFileSync(path, "utf8"));
  const client = new Client(config);
  const concurrency = Number(config.connect_concurrency ?? 50);
  client.beat(); // beating each socket from the moment it opens
  client.lag.run();
  const pairs = config.cookies.map((c, k) => [c, config.globals[k]]);
  let next = 0;
  const worker = async () => {
    while (next < pairs.length) {
      const [cookie, g] = pairs[next++];
      client.socks.push(await client.open(cookie, g));
    }
  };
  await Promise.all(Array.from({length: Math.min(concurrency, pairs.length)}, worker));
  process.stdout.write("ready\n");
  const lines = readline.createInterface({input: process.stdin, terminal: false});
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    if (cmd.phase === "quit") break;
    client.lag.start();
    client.retries = 0;
    const result = await client[cmd.phase](cmd);
    result.client = {...client.lag.result(), join_retries: client.retries, runtime: `node ${process.version}`, zlib: ZLIB};
    await new Promise((r) => process.stdout.write(JSON.stringify(result) + "\n", r));
  }
  for (const s of client.socks) s.ws.close();
  await sleep(1);
  process.exit(0);
}

main(process.argv[2]).catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
