// bench/frame_floor.py's load client: opens N sockets to the server, asks it (on one more) to send
// ROUNDS frames to each, counts them, and prints the server's reply and its own CPU as JSON.
"use strict";
const WebSocket = require("ws");

const [port, n, rounds, deflate] = process.argv.slice(2).map(Number);
const url = `ws://127.0.0.1:${port}/`;
const options = {perMessageDeflate: deflate === 1};
let open = 0;
let received = 0;
for (let i = 0; i < n; i++) {
  const socket = new WebSocket(url, options);
  socket.on("open", () => {
    if (++open === n) go();
  });
  socket.on("message", () => received++);
  socket.on("error", (err) => {
    console.error(err.message);
    process.exit(1);
  });
}

// Every socket open: "ready" on stdout, then the rounds once a line comes on stdin (the harness
// reads the server's CPU between the two).
function go() {
  const control = new WebSocket(url, options);
  control.on("open", () => {
    console.log("ready");
    process.stdin.once("data", () => send(control));
  });
}

function send(control) {
  const start = process.cpuUsage();
  control.send(`go ${rounds}`);
  control.on("message", (reply) => {
    const [, frames] = String(reply).split(" ");
    const wait = () => {
      if (received < Number(frames)) return setTimeout(wait, 10);
      const cpu = process.cpuUsage(start);
      const out = {server: String(reply), received, client_cpu_s: (cpu.user + cpu.system) / 1e6};
      console.log(JSON.stringify(out));
      process.exit(0);
    };
    wait();
  });
}
