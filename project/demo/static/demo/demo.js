/* The presence demo's shared bits: one presence.js client per page (window.presence), the
 * "live / reconnecting" pill in the top bar, and "last seen …" texts. Page scripts call
 * Demo.connect(options) before the page has loaded; pages without one still connect, so that
 * your own dot in the top bar and everybody's dots on the page stay live. */
(function (global) {
  "use strict";

  function connect(options) {
    // ?transport=sse tries the page over Server-Sent Events + REST (presence.js falls back to
    // them by itself when WebSockets cannot get through).
    // ?share=0: this tab's own connection, not the one the browser's tabs share.
    const query = new URLSearchParams(global.location.search);
    const transport = query.get("transport");
    const client = global.Presence.connect(Object.assign({}, options || {},
      transport ? {transport} : {}, query.get("share") === "0" ? {share: false} : {}));
    global.presence = client;
    const pill = document.getElementById("connection");
    if (pill) {
      const show = (state, text) => {
        pill.dataset.state = state;
        pill.textContent = text;
      };
      client.on("open", () => {
        pill.dataset.transport = client.transport;
        show("live", client.transport === "sse" ? "live (SSE)" : "live");
      });
      client.on("close", (e) => show(e.reconnectIn === null ? "closed" : "reconnecting",
        e.reconnectIn === null ? "offline" : "reconnecting…"));
    }
    return client;
  }

  /* "just now", "3 minutes ago", ... of a time in ms on this browser's clock. */
  function ago(ms) {
    const seconds = Math.max(0, (Date.now() - ms) / 1000);
    if (seconds < 60) return "just now";
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes === 1 ? "a minute ago" : minutes + " minutes ago";
    const hours = Math.floor(minutes / 60);
    if (hours < 24) return hours === 1 ? "an hour ago" : hours + " hours ago";
    return new Date(ms).toLocaleString();
  }

  /* "Do not disturb · 📅 In a meeting": the written state always, the message after it (a dot's
   * colour alone does not tell online from do not disturb to everybody); nothing when offline
   * (the row's "last seen" says it). */
  function statusText(p) {
    if (p.state === "offline") return "";
    const label = (global.Presence.labels[p.state] || p.state).replace(/ \(.*\)$/, "");
    const text = [p.emoji, p.message].filter(Boolean).join(" ");
    return text ? label + " · " + text : label;
  }

  /* The avatar colour of a user id, as the server's avatar_hue filter. */
  function hue(uid) {
    const n = /^\d+$/.test(uid) ? Number(uid) : [...uid].reduce((s, c) => s + c.codePointAt(0), 0);
    return (n * 67 + 200) % 360;
  }

  global.Demo = {connect, ago, statusText, hue};

  document.addEventListener("DOMContentLoaded", () => {
    if (!global.presence) connect();
  });
})(window);
