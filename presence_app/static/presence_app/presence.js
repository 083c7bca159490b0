/*! presence_app — presence.js: the browser side of presence. No dependencies, no build step:
 * include it with a <script> tag and call Presence.connect().
 *
 * Transport: the WebSocket first; when it cannot open (a proxy that breaks WebSockets: it
 * closes before the server's hello), Server-Sent Events for the rest of the page's life: one
 * EventSource stream, and join, leave, status, typing, watch and activity as POSTs. The page's
 * API is the same either way; client.transport says which ("websocket" or "sse"). Only a page
 * whose socket never got a hello falls back: once a WebSocket worked, a reconnect that meets a
 * server down (a restart, a deploy) keeps trying the WebSocket with backoff.
 *
 *   const presence = Presence.connect({rooms: ["doc-42"]});
 *   presence.on("join", (e) => console.log(e.user, "joined", e.room));
 *   presence.typing("doc-42");               // throttled for you
 *   presence.setStatus({state: "dnd", message: "In a meeting", emoji: "📅"});
 *
 * Options: url (default: ws(s)://<this host>/ws/presence/), transport ("auto", the default,
 * "websocket" or "sse"), sseUrl (default /presence/sse/), restUrl (default
 * /presence/api/stream/), rooms, watch (user ids), device,
 * autoWatch (default true: watch every [data-presence-user] on the page), root (default
 * document), labels ({online, idle, dnd, offline, invisible}: tooltip texts), minDelay and
 * maxDelay (reconnect backoff, ms), timerWorker (default true: heartbeats keep time in a
 * dedicated worker, which a hidden tab's timer throttling does not slow; false: a page timer),
 * share (default true: the browser's tabs of this origin share one connection, held by a
 * SharedWorker running this file, else by a leader tab; false: this tab's own; client.shared
 * says which: "worker", "leader" or null), shareKey (tabs share only with the same key; default
 * the csrftoken cookie, which Django changes at sign-in and presence_app at sign-out; none
 * readable, or "" / null: this tab's own connection), workerUrl (this file's URL for the
 * SharedWorker; default the script's).
 * Each tab keeps its own rooms, typing, room states and watch list: the rules by which the hub
 * merges them are above class TabLink and in docs/websocket.md.
 *
 * Events (client.on(name, fn) returns an unsubscribe function): join, leave, update (each
 * also for every member of a presence.diff: the server batches them per tick), diff, count (a
 * count-only room's live count: {room, count, sample?}), typing,
 * roomstate (members' live states in a room changed: {room, states}), state (a room's or the
 * watch list's snapshot), self (your own status), direct (a payload
 * presence.send_to_user() sent to all your tabs and devices), privacy (your last-seen
 * privacy choice, after setPrivacy), error, open, close,
 * unauthorized, message (a frame of the project's own, on a socket whose consumer uses
 * PresenceConsumerMixin: never hello, heartbeat.ack, error or a presence.* frame). Calls: join(room), leave(room), setStatus({state, message, emoji,
 * expiresIn}), setPrivacy({lastSeen, approximate}), watch(ids), typing(room),
 * setRoomState(room, data) (your live state in a room: a cursor, a selection; sent at most
 * limits.room_state_rate times a second, the latest), roomState(room) (the others' states),
 * members(room), count(room), get(userId), send(frame) (a project's
 * own frame, rate limited with the rest; false while disconnected), close().
 *
 * In the page: every element with data-presence-user="<id>" gets the class presence-<state>
 * (online, idle, dnd, offline; invisible only on your own), data-presence-state, a title and an
 * aria-label; every element with data-presence-room-count="<room>" shows the room's count; a
 * {% last_seen %} text (data-presence-last-seen) turns to "online now" / "last seen just now"
 * as the user comes and goes, a {% room_roster %} list keeps its online members first, and a
 * {% room_members %} list (data-presence-room-members) shows who is in the room now: joins
 * added (named by its data-presence-names-url), leaves removed, and with data-presence-others
 * (on it or on a count) everyone but you.
 *
 * <script src=".../presence.js" data-presence-connect data-presence-rooms="lobby doc-42"> connects
 * on load and puts the client at window.presence.
 *
 * From a bundler or <script type="module">: `import Presence from ".../presence.mjs"` (the same
 * code: presence.mjs imports this file and exports what it defines; presence.d.ts has the types).
 */
(function (global) {
  "use strict";

  const STATES = ["online", "idle", "dnd", "offline", "invisible"];
  const ONLINE = new Set(["online", "idle", "dnd", "invisible"]);
  const LABELS = {
    online: "Online",
    idle: "Away",
    dnd: "Do not disturb",
    offline: "Offline",
    invisible: "Invisible (only you see this)",
  };
  // Input that counts as activity. Heartbeats keep the connection; only these reset "idle".
  const ACTIVITY_EVENTS = ["pointerdown", "pointermove", "keydown", "wheel", "touchstart", "scroll"];
  const CLOSE_UNAUTHENTICATED = 4401;
  // The server's close when the sign-in this connection was opened with signed out: connect
  // again at once, with the browser's cookies as they are now (signed out: 4401).
  const CLOSE_SIGNED_OUT = 4402;
  const STABLE_MS = 10000; // a connection that lived this long resets the backoff
  // Our close code when the server stopped answering heartbeats (a dead link: the browser may
  // not notice for minutes, while the server has long dropped this socket's lease).
  const CLOSE_STALE = 4000;

  function defaultUrl() {
    const scheme = global.location.protocol === "https:" ? "wss:" : "ws:";
    return scheme + "//" + global.location.host + "/ws/presence/";
  }

  // A repeating timer a hidden tab's throttling does not slow: Chrome runs a hidden page's
  // repeating timers at most once a second, and once a minute after 5 minutes hidden, but not
  // a dedicated worker's. Where no worker starts (no Worker, a Content-Security-Policy without
  // blob: in worker-src), a page timer. Returns the function that stops it.
  const TICKER = "let t = null; onmessage = (e) => { clearInterval(t);" +
    " t = e.data > 0 ? setInterval(() => postMessage(0), e.data) : null; };";

  function every(ms, fn, useWorker) {
    if (useWorker && typeof global.Worker === "function" && global.Blob && global.URL) {
      try {
        const url = global.URL.createObjectURL(new Blob([TICKER], {type: "text/javascript"}));
        const worker = new global.Worker(url);
        let fallback = null;
        let started = false;
        const start = () => {
          if (!started) global.URL.revokeObjectURL(url);
          started = true;
        };
        worker.onmessage = () => {
          start();
          fn();
        };
        worker.onerror = () => {
          start();
          worker.terminate();
          if (fallback === null) fallback = setInterval(fn, ms);
        };
        worker.postMessage(ms);
        return () => {
          worker.terminate();
          if (fallback !== null) clearInterval(fallback);
          start();
        };
      } catch (e) {
        // no worker here: a page timer below
      }
    }
    const id = setInterval(fn, ms);
    return () => clearInterval(id);
  }

  function byteLength(text) {
    return new TextEncoder().encode(text).length;
  }

  // One connection to the server and its life: the WebSocket (or the SSE fallback), the
  // heartbeat, the reconnect with backoff, the token bucket of outgoing frames. A tab's client
  // is one (its own connection); so is the hub that holds the connection a browser's tabs share
  // (a SharedWorker's, or a leader tab's). Subclasses read the frames (_receive), hear what
  // happens to the connection (_emit: open, close, unauthorized) and say what is lost with it
  // (_lost).
  class Connection {
    constructor(opts) {
      let url = opts.url || defaultUrl();
      if (opts.device) {
        url += (url.includes("?") ? "&" : "?") + "device=" + encodeURIComponent(opts.device);
      }
      this.url = url;
      const query = opts.device ? "?device=" + encodeURIComponent(opts.device) : "";
      this.sseUrl = (opts.sseUrl || "/presence/sse/") + query;
      this.restUrl = opts.restUrl || "/presence/api/stream/";
      this.transport = opts.transport === "sse" ? "sse" : "websocket";
      this.fallback = opts.transport !== "websocket" && typeof global.EventSource === "function";
      this.lastEventId = null; // the SSE stream's resume point (its rooms, its lease)
      this.minDelay = opts.minDelay || 1000;
      this.maxDelay = opts.maxDelay || 30000;
      this.timerWorker = opts.timerWorker !== false;
      this.limits = null;

      this.socket = null;
      this.helloSeen = false; // the current connection got its hello
      // A WebSocket of this client got a hello once: WebSockets get through here, so a socket
      // that closes before its hello later meets a server that is down, not a proxy.
      this.socketWorked = false;
      this.openedAt = 0;
      this.attempt = 0;
      this.closed = false;
      this.queue = [];
      this.tokens = 0;
      this.tokensAt = 0;
      this.timers = {heartbeat: null, retry: null, drain: null};
    }

    _makeSocket() {
      return this.transport === "sse" ? new SseSocket(this) : new WebSocket(this.url);
    }

    _open() {
      if (this.closed) return;
      const ws = this._makeSocket();
      this.socket = ws;
      this.helloSeen = false;
      ws.onmessage = (event) => {
        this.heardAt = Date.now();
        this._receive(event.data);
      };
      ws.onclose = (event) => this._onClose(ws, event);
    }

    // Every heartbeat is answered: one that got no frame back within a whole interval means
    // the link is dead. Drop the socket at once (a close handshake would wait on the dead link
    // too) and reconnect.
    _beat() {
      const ws = this.socket;
      if (!ws || ws.sse || ws.shared) return; // a stream's lease is kept by the stream itself
      if (this.beatAt && this.heardAt < this.beatAt) {
        ws.onclose = null;
        ws.onmessage = null;
        ws.close(CLOSE_STALE);
        this._onClose(ws, {code: CLOSE_STALE});
        return;
      }
      this._send({type: "heartbeat"});
    }

    _onClose(ws, event, now) {
      if (ws !== this.socket) return;
      this.socket = null;
      this.queue = [];
      this._lost();
      for (const key of ["heartbeat", "drain"]) this._clearTimer(key);
      if (this.openedAt && Date.now() - this.openedAt > STABLE_MS) this.attempt = 0;
      this.openedAt = 0;
      if (event.code === CLOSE_UNAUTHENTICATED) {
        // Logged out: reconnecting cannot help.
        this.closed = true;
        this._emit("close", {code: event.code, reconnectIn: null});
        this._emit("unauthorized", {code: event.code});
        return;
      }
      if (this.closed) {
        this._emit("close", {code: event.code, reconnectIn: null});
        return;
      }
      if (!ws.sse && !ws.shared && !this.helloSeen && !this.socketWorked && this.fallback) {
        // No socket of this page ever got as far as the hello: WebSockets do not get through
        // here. (One that worked before and fails now met a restart: retry it, below.)
        this.transport = "sse";
        this._emit("close", {code: event.code, reconnectIn: 0});
        this._open();
        return;
      }
      if (event.code === CLOSE_SIGNED_OUT) now = true;
      // Exponential backoff with jitter, so a restarted server is not hit by every tab at once;
      // none for a tab that woke up to a dead socket (the server is not the one in trouble), nor
      // after a sign-out (the browser's current sign-in, whoever it is, connects now).
      const cap = Math.min(this.maxDelay, this.minDelay * 2 ** this.attempt);
      const delay = now ? 0 : Math.round(cap / 2 + Math.random() * cap / 2);
      if (!now) this.attempt += 1;
      this._emit("close", {code: event.code, reconnectIn: delay});
      this.timers.retry = setTimeout(() => {
        this.timers.retry = null;
        this._open();
      }, delay);
    }

    _lost() {}

    _onOnline() {
      // The network is back: no need to wait out the backoff.
      if (!this.socket && !this.closed && this.timers.retry) {
        this._clearTimer("retry");
        this._open();
      }
    }

    // The tab woke (resume, pageshow, visible again). A socket that heard nothing for two
    // heartbeat intervals slept through them: the server ends a socket silent for a lease, so
    // it is dropped and a new one opened now (the server's own close, if it comes, is ignored);
    // a fresher one gets a heartbeat now, whose answer (or its absence) settles it.
    _onWake() {
      if (this.closed) return;
      const ws = this.socket;
      if (!ws) {
        this._onOnline();
        return;
      }
      if (ws.shared) {
        ws.wake(); // the connection is the hub's: it looks at it
        return;
      }
      if (ws.sse || !this.helloSeen || ws.readyState !== WebSocket.OPEN) return;
      if (Date.now() - (this.heardAt || 0) > 2 * this.heartbeatMs) {
        ws.onclose = null;
        ws.onmessage = null;
        ws.close(CLOSE_STALE);
        this._onClose(ws, {code: CLOSE_STALE}, true);
        return;
      }
      this._send({type: "heartbeat"});
    }

    // The server's hello: the connection is up, its limits known, its heartbeat started (the
    // hub's beats for a shared one: a tab's link needs none).
    _connected(msg) {
      this.helloSeen = true;
      if (!this.socket || (!this.socket.sse && !this.socket.shared)) this.socketWorked = true;
      this.limits = msg.limits;
      this.openedAt = Date.now();
      const rate = Math.max(1, Math.floor(msg.limits.frames_per_second * 0.8));
      this.rate = rate;
      this.tokens = rate;
      this.tokensAt = Date.now();
      this._clearTimer("heartbeat");
      this.beatAt = 0;
      this.heartbeatMs = msg.heartbeat * 1000;
      if (!this.socket || !this.socket.shared) {
        this.timers.heartbeat = every(this.heartbeatMs, () => this._beat(), this.timerWorker);
      }
    }

    // Frames go out through a token bucket a little below the server's limit: re-joining many
    // rooms after a reconnect must not trip MAX_FRAMES_PER_SECOND.
    _send(frame) {
      const ws = this.socket;
      if (!ws || ws.readyState !== WebSocket.OPEN || !this.limits) return false;
      this.queue.push(frame);
      this._drain();
      return true;
    }

    _drain() {
      const ws = this.socket;
      if (!ws || ws.readyState !== WebSocket.OPEN) return;
      const now = Date.now();
      this.tokens = Math.min(this.rate, this.tokens + ((now - this.tokensAt) / 1000) * this.rate);
      this.tokensAt = now;
      while (this.queue.length && this.tokens >= 1) {
        const frame = this.queue.shift();
        ws.send(JSON.stringify(frame));
        if (frame.type === "heartbeat") this.beatAt = Date.now(); // sent, not queued
        this._sent(frame);
        this.tokens -= 1;
      }
      if (this.queue.length && !this.timers.drain) {
        const wait = Math.ceil(((1 - this.tokens) / this.rate) * 1000);
        this.timers.drain = setTimeout(() => {
          this.timers.drain = null;
          this._drain();
        }, wait);
      }
    }

    _sent(frame) {}

    _clearTimer(key) {
      const id = this.timers[key];
      if (id === null || id === undefined) return;
      if (typeof id === "function") {
        id(); // every()'s stop
      } else {
        clearTimeout(id);
        clearInterval(id);
      }
      this.timers[key] = null;
    }
  }

  class PresenceClient extends Connection {
    constructor(options) {
      const opts = options || {};
      super(opts);
      this.root = opts.root || global.document;
      this.labels = Object.assign({}, LABELS, opts.labels || {});
      this.autoWatch = opts.autoWatch !== false;
      // One connection for the browser's tabs of this origin (a SharedWorker's, else a leader
      // tab's), or null: this tab's own (share: false, or a browser with neither).
      this.share = shareMode(opts, this);
      this.shared = this.share ? this.share.mode : null;

      this.rooms = new Set((opts.rooms || []).map(String)); // wanted: re-joined on reconnect
      this.appWatch = new Set((opts.watch || []).map(String));
      this.sentWatch = null; // the watch list the server has, as a sorted string
      this.handlers = new Map();
      this.users = new Map(); // user id -> latest presence seen
      this.roomMembers = new Map(); // room -> Map(user id -> member)
      this.roomCounts = new Map(); // a count-only room -> its last presence.count
      this.countsMe = new Map(); // a count-only room -> do you count in it (AUDIENCE may hide you)
      this.roomPaging = new Set(); // rooms whose snapshot is still coming, a page at a time
      this.names = new Map(); // user id -> the name a {% room_members %} list showed
      this.nameWants = new Map(); // names URL -> ids to ask it for
      this.userId = null;
      this.me = null; // your own presence, as only you see it
      this.pendingStatus = null;
      this.lastTyping = new Map();
      this.lastActivity = 0;
      this.activityMs = 15000;
      this.typingMs = 2000;
      this.roomStates = new Map(); // room -> Map("user|conn" -> {user, conn, data}): others'
      this.ownStates = new Map(); // room -> your latest state there (sent again on reconnect)
      this.dirtyStates = new Set(); // rooms whose own state waits for the next tick
      this.stateSentAt = 0;

      Object.assign(this.timers, {scan: null, ago: null, state: null, names: null});

      this._onActivity = this._onActivity.bind(this);
      this._onVisibility = this._onVisibility.bind(this);
      this._onOnline = this._onOnline.bind(this);
      this._onWake = this._onWake.bind(this);
      this._onPageShow = (event) => {
        if (event.persisted) this._onWake(); // back from the back-forward cache
      };
      for (const name of ACTIVITY_EVENTS) {
        global.addEventListener(name, this._onActivity, {capture: true, passive: true});
      }
      global.document.addEventListener("visibilitychange", this._onVisibility);
      global.addEventListener("online", this._onOnline);
      // A frozen tab (Chrome freezes background tabs; a phone, a page restored from the
      // back-forward cache) runs nothing, heartbeats included: it wakes to a socket the server
      // may have ended a lease ago. It reconnects at once rather than after its backoff.
      global.document.addEventListener("resume", this._onWake);
      global.addEventListener("pageshow", this._onPageShow);
      if (this.autoWatch && global.MutationObserver) {
        // Dots added later (a new chat message, a list page) are watched and painted too.
        this.observer = new MutationObserver(() => this._scheduleScan());
        this.observer.observe(this.root.body || this.root, {
          childList: true, subtree: true, attributes: true, attributeFilter: ["data-presence-user"],
        });
      }
      this._open();
    }

    // -- public API ------------------------------------------------------------------------
    on(event, fn) {
      if (!this.handlers.has(event)) this.handlers.set(event, new Set());
      this.handlers.get(event).add(fn);
      return () => this.off(event, fn);
    }

    off(event, fn) {
      const set = this.handlers.get(event);
      if (set) set.delete(fn);
    }

    join(room) {
      room = String(room);
      if (this.rooms.has(room)) return;
      this.rooms.add(room);
      this._send({type: "join", room});
    }

    leave(room) {
      room = String(room);
      if (!this.rooms.delete(room)) return;
      this.roomMembers.delete(room);
      this.roomCounts.delete(room);
      this.countsMe.delete(room);
      this.roomPaging.delete(room);
      this.roomStates.delete(room);
      this.ownStates.delete(room);
      this.dirtyStates.delete(room);
      this._paintCounts();
      this._send({type: "leave", room});
    }

    setStatus(status) {
      const s = status || {};
      const frame = {type: "status"};
      if (s.state !== undefined) frame.state = s.state;
      if (s.message !== undefined) frame.message = s.message;
      if (s.emoji !== undefined) frame.emoji = s.emoji;
      if (s.expiresIn !== undefined) frame.expires_in = s.expiresIn;
      if (!this._send(frame)) {
        // Offline: the last wish is sent once the socket is back.
        this.pendingStatus = Object.assign(this.pendingStatus || {type: "status"}, frame);
      }
    }

    setPrivacy(choice) {
      // Who sees your last seen: lastSeen "everyone" | "audience" | "nobody", approximate.
      const c = choice || {};
      const frame = {type: "privacy"};
      if (c.lastSeen !== undefined) frame.last_seen = c.lastSeen;
      if (c.approximate !== undefined) frame.approximate = c.approximate;
      return this._send(frame);
    }

    watch(ids) {
      this.appWatch = new Set((ids || []).map(String));
      this._syncWatch();
    }

    typing(room) {
      room = String(room);
      if (!this.rooms.has(room)) return;
      const now = Date.now();
      if (now - (this.lastTyping.get(room) || 0) < this.typingMs) return;
      this.lastTyping.set(room, now);
      this._send({type: "typing", room});
    }

    // Your live state in a room (null clears it). Latest wins: at most one frame per tick
    // (limits.room_state_rate, and half the frame rate), so a 60 Hz cursor costs no more.
    setRoomState(room, data) {
      room = String(room);
      if (!this.rooms.has(room)) return false;
      this.ownStates.set(room, data == null ? null : data);
      this.dirtyStates.add(room);
      this._flushStates();
      return true;
    }

    roomState(room) {
      const map = this.roomStates.get(String(room));
      return map ? Array.from(map.values()) : [];
    }

    send(frame) {
      return this._send(frame);
    }

    // A count-only room's: its count frame's sample (its count: count(room)).
    members(room) {
      const counted = this.roomCounts.get(String(room));
      if (counted) return (counted.sample || []).slice();
      const map = this.roomMembers.get(String(room));
      return map ? Array.from(map.values()) : [];
    }

    // How many are in a room: a count-only room's live count, else its members' number.
    count(room) {
      const counted = this.roomCounts.get(String(room));
      if (counted) return counted.count;
      const map = this.roomMembers.get(String(room));
      return map ? map.size : 0;
    }

    get(userId) {
      return this._presenceOf(String(userId)) || null;
    }

    close() {
      this.closed = true;
      for (const key of Object.keys(this.timers)) this._clearTimer(key);
      for (const name of ACTIVITY_EVENTS) {
        global.removeEventListener(name, this._onActivity, {capture: true});
      }
      global.document.removeEventListener("visibilitychange", this._onVisibility);
      global.removeEventListener("online", this._onOnline);
      global.document.removeEventListener("resume", this._onWake);
      global.removeEventListener("pageshow", this._onPageShow);
      if (this.observer) this.observer.disconnect();
      if (this.socket) this.socket.close(1000);
    }

    // -- connection --------------------------------------------------------------------------
    _makeSocket() {
      return this.share ? this.share.link() : super._makeSocket();
    }

    _lost() {
      this.sentWatch = null;
    }

    // The shared connection went down (the hub reconnects it by itself): this tab hears the
    // close as if it were its own, and gets a hello again once the hub is back.
    _onDown(ws, event) {
      if (ws !== this.socket) return;
      this.helloSeen = false;
      this.queue = [];
      this._lost();
      this._clearTimer("drain");
      if (event.code === CLOSE_UNAUTHENTICATED) {
        this.closed = true;
        ws.onclose = null;
        ws.close(1000);
        this._emit("close", {code: event.code, reconnectIn: null});
        this._emit("unauthorized", {code: event.code});
        return;
      }
      this._emit("close", {code: event.code, reconnectIn: event.reconnectIn});
    }

    _hello(msg) {
      this._connected(msg);
      if (this.socket && this.socket.shared) this.transport = this.socket.transport;
      this.userId = msg.user;
      this.me = msg.me;
      this.activityMs = msg.activity * 1000;
      this.typingMs = msg.typing * 1000;
      // This client handles batched membership changes (a frame a tick, not one a join).
      this._send({type: "hello", accept: ["presence.diff"]});
      // A new connection knows nothing: join the rooms and watch the users again.
      for (const room of this.rooms) this._send({type: "join", room});
      // A new connection has no state: yours goes again after the joins.
      this.roomStates.clear();
      for (const [room, data] of this.ownStates) if (data != null) this.dirtyStates.add(room);
      this._flushStates();
      this._syncWatch();
      if (this.pendingStatus) {
        this._send(this.pendingStatus);
        this.pendingStatus = null;
      }
      if (this.me) this._paint(this.userId);
      this._emit("open", msg);
    }

    _stateTickMs() {
      const limits = this.limits || {};
      const rate = Math.min(limits.room_state_rate || 20, Math.max(1, (this.rate || 2) / 2));
      return 1000 / rate;
    }

    _flushStates() {
      if (this.timers.state || !this.dirtyStates.size || !this.limits) return;
      const wait = this.stateSentAt + this._stateTickMs() - Date.now();
      if (wait > 0) {
        this.timers.state = setTimeout(() => {
          this.timers.state = null;
          this._flushStates();
        }, wait);
        return;
      }
      this.stateSentAt = Date.now();
      for (const room of this.dirtyStates) {
        if (this.rooms.has(room)) {
          this._send({type: "roomstate", room, data: this.ownStates.get(room)});
        }
      }
      this.dirtyStates.clear();
    }

    // -- frames from the server ----------------------------------------------------------------
    _receive(text) {
      let msg;
      try {
        msg = JSON.parse(text);
      } catch (e) {
        return;
      }
      switch (msg.type) {
        case "hello":
          this._hello(msg);
          break;
        case "presence.state":
          this._state(msg);
          break;
        case "presence.join":
          this._join(msg);
          this._paintCounts();
          this._paintLists(msg.room);
          break;
        case "presence.leave":
          this._leave(msg);
          this._paintCounts();
          this._paintLists(msg.room);
          break;
        case "presence.diff":
          this._diff(msg);
          break;
        case "presence.count": // a count-only room: how many, never who (but a sample)
          if (!this.rooms.has(msg.room)) break;
          this.roomCounts.set(msg.room, msg);
          if ("counted" in msg) this.countsMe.set(msg.room, msg.counted !== false);
          for (const m of msg.sample || []) this._remember(m);
          this._paintCounts();
          this._emit("count", msg);
          break;
        case "presence.update":
          if (msg.self) {
            this.me = msg;
            this._paint(msg.user);
            this._emit("self", msg);
          } else {
            this._update(msg);
          }
          break;
        case "presence.typing":
          this._emit("typing", msg);
          break;
        case "presence.roomstate":
          this._roomState(msg);
          break;
        case "presence.message": // presence.send_to_user(): to every tab and device of yours
          this._emit("direct", msg.payload);
          break;
        case "presence.privacy": // your last-seen privacy choice, after setPrivacy()
          this._emit("privacy", {lastSeen: msg.last_seen, approximate: msg.approximate});
          break;
        case "error":
          this._error(msg);
          break;
        case "heartbeat.ack": // heardAt is set: nothing else to do
          break;
        default:
          // The project's own frames only: a protocol frame this version does not know (a
          // newer server's presence.*) is not the project's to handle.
          if (typeof msg.type === "string" && !msg.type.startsWith("presence.")) {
            this._emit("message", msg);
          }
          break;
      }
    }

    _join(msg) {
      this._remember(msg);
      if (this.rooms.has(msg.room)) this._roomMap(msg.room).set(msg.user, msg); // not left
      this._emit("join", msg);
    }

    _leave(msg) {
      this._remember(msg);
      if (this.roomMembers.has(msg.room)) this.roomMembers.get(msg.room).delete(msg.user);
      this._dropStates(msg.user, msg.room); // their last connection left: every state
      this._emit("leave", msg);
    }

    _update(msg) {
      this._remember(msg);
      for (const map of this.roomMembers.values()) {
        if (map.has(msg.user)) map.set(msg.user, Object.assign({}, map.get(msg.user), msg));
      }
      if (msg.state === "offline") this._dropStates(msg.user, null);
      this._emit("update", msg);
    }

    // A tick's membership changes in one frame (the server batches them for a client that
    // accepted presence.diff in its hello): each member as the join, leave or update it stands
    // for, so pages hear the same events; the counts are painted once.
    _diff(msg) {
      const room = msg.room;
      for (const m of msg.left || []) this._leave(Object.assign({type: "presence.leave", room}, m));
      for (const m of msg.joined || []) this._join(Object.assign({type: "presence.join", room}, m));
      for (const m of msg.updated || []) this._update(Object.assign({type: "presence.update"}, m));
      this._paintCounts();
      this._paintLists(room);
      this._emit("diff", msg);
    }

    _state(msg) {
      for (const member of msg.members) this._remember(member);
      if (msg.room != null && this.rooms.has(msg.room)) {
        // A big room's snapshot comes in pages: page 0 replaces the list, the next add to it.
        const pairs = msg.members.map((m) => [m.user, m]);
        const known = this.roomMembers.get(msg.room);
        if (msg.page > 0 && known) for (const [user, m] of pairs) known.set(user, m);
        else this.roomMembers.set(msg.room, new Map(pairs));
        if (msg.more) this.roomPaging.add(msg.room);
        else this.roomPaging.delete(msg.room);
        this._paintCounts();
        this._paintLists(msg.room);
        const states = msg.states || [];
        if (!(msg.page > 0)) this.roomStates.delete(msg.room);
        this._roomState({type: "presence.roomstate", room: msg.room, states, snapshot: true});
      }
      this._emit("state", msg);
    }

    _roomState(msg) {
      if (!this.rooms.has(msg.room)) return;
      let map = this.roomStates.get(msg.room);
      if (!map) this.roomStates.set(msg.room, (map = new Map()));
      for (const st of msg.states) {
        const key = st.user + "|" + st.conn;
        if (st.data == null) map.delete(key);
        else map.set(key, st);
      }
      this._emit("roomstate", msg);
    }

    // A user left a room (or, with room null, went offline): their states there are gone.
    _dropStates(user, room) {
      for (const [name, map] of this.roomStates) {
        if (room !== null && name !== room) continue;
        const gone = [];
        for (const [key, st] of map) if (st.user === user) gone.push(key);
        if (!gone.length) continue;
        const states = gone.map((key) => Object.assign({}, map.get(key), {data: null}));
        for (const key of gone) map.delete(key);
        this._emit("roomstate", {type: "presence.roomstate", room: name, states});
      }
    }

    _error(msg) {
      if (msg.frame === "join" && msg.room && this.rooms.has(msg.room)) {
        if (msg.code === "unavailable") {
          // Redis is away for a moment: ask again later.
          setTimeout(() => {
            if (this.rooms.has(msg.room)) this._send({type: "join", room: msg.room});
          }, 2000 + Math.random() * 3000);
        } else {
          this.rooms.delete(msg.room); // forbidden, invalid, over the limit: do not insist
        }
      }
      this._emit("error", msg);
    }

    // -- the page ----------------------------------------------------------------------------
    _remember(p) {
      const known = this.users.get(p.user);
      this.users.set(p.user, Object.assign({}, known, p));
      if (p.user === this.userId && this.me && this.me.state !== "invisible") {
        this.me = Object.assign({}, this.me, {state: p.state});
      }
      this._paint(p.user);
    }

    _presenceOf(userId) {
      // Your own dots show what only you may see (invisible); everybody else's the public view.
      if (userId === this.userId && this.me) return this.me;
      return this.users.get(userId);
    }

    _label(p) {
      const label = this.labels[p.state] || p.state;
      const status = [p.emoji, p.message].filter(Boolean).join(" ");
      return status && ONLINE.has(p.state) ? label + ": " + status : label;
    }

    _paint(userId) {
      const p = this._presenceOf(userId);
      if (!p) return;
      const state = STATES.includes(p.state) ? p.state : "offline";
      const label = this._label(p);
      const id = CSS.escape(userId);
      for (const el of this.root.querySelectorAll('[data-presence-user="' + id + '"]')) {
        for (const s of STATES) el.classList.toggle("presence-" + s, s === state);
        el.dataset.presenceState = state;
        el.title = label;
        el.setAttribute("aria-label", label);
      }
      // {% last_seen %}: "online now" when they come, "last seen just now" when they go; a
      // text the server wrote stays while nothing changes. Both texts come translated.
      const online = ONLINE.has(state) ? "online" : "offline";
      for (const el of this.root.querySelectorAll('[data-presence-last-seen="' + id + '"]')) {
        if (el.dataset.presenceState === online) continue;
        el.dataset.presenceState = online;
        // An offline event without a time: the user keeps their last seen to themself.
        const hidden = online === "offline" && p.at === null;
        const text = online === "online" ? el.dataset.presenceTextOnline
          : hidden ? el.dataset.presenceTextHidden : el.dataset.presenceTextOffline;
        if (text !== undefined) el.textContent = text;
        // Gone now: the text ages from here ("last seen 2 minutes ago"), on this browser's clock.
        if (online === "offline" && !hidden) el.dataset.presenceGoneAt = String(Date.now());
        else delete el.dataset.presenceGoneAt;
        this._scheduleAgeing();
      }
      // {% room_roster %}: the member's row, and online members first.
      const rosters = new Set();
      for (const el of this.root.querySelectorAll('[data-presence-member="' + id + '"]')) {
        if (el.dataset.presenceState === online) continue;
        el.dataset.presenceState = online;
        el.classList.toggle("presence-online", online === "online");
        el.classList.toggle("presence-offline", online === "offline");
        if (el.parentElement) rosters.add(el.parentElement);
      }
      for (const list of rosters) this._sortRoster(list);
    }

    _scheduleAgeing() {
      if (this.timers.ago || this.closed) return;
      this.timers.ago = setInterval(() => this._ageTexts(), 30000);
    }

    // "last seen just now" a minute on: "last seen 1 minute ago" (data-presence-text-ago, the
    // server's translated "last seen %(when)s", with the browser's Intl wording of the time).
    _ageTexts() {
      let ageing = 0;
      for (const el of this.root.querySelectorAll("[data-presence-gone-at]")) {
        const template = el.dataset.presenceTextAgo;
        const seconds = (Date.now() - Number(el.dataset.presenceGoneAt)) / 1000;
        ageing += 1;
        if (!template || !(seconds >= 60) || typeof Intl === "undefined" || !Intl.RelativeTimeFormat) {
          continue;
        }
        const lang = (this.root.documentElement || global.document.documentElement).lang || undefined;
        const format = new Intl.RelativeTimeFormat(lang, {numeric: "always"});
        const minutes = Math.floor(seconds / 60);
        const hours = Math.floor(minutes / 60);
        const when = hours >= 24 ? format.format(-Math.floor(hours / 24), "day")
          : hours >= 1 ? format.format(-hours, "hour") : format.format(-minutes, "minute");
        el.textContent = template.replace("%(when)s", when);
      }
      if (!ageing) this._clearTimer("ago");
    }

    _sortRoster(list) {
      const rows = Array.from(list.children).filter((el) => el.dataset.presenceMember != null);
      const rank = (el) => (el.dataset.presenceState === "online" ? 0 : 1);
      const order = (el) => Number(el.dataset.presenceOrder) || 0;
      rows.sort((a, b) => rank(a) - rank(b) || order(a) - order(b));
      for (const el of rows) list.appendChild(el); // a no-op move for rows already in place
    }

    _paintCounts() {
      for (const el of this.root.querySelectorAll("[data-presence-room-count]")) {
        const room = el.dataset.presenceRoomCount;
        if (this.roomMembers.has(room) || this.roomCounts.has(room)) {
          // data-presence-others: everyone but you (you are in the room: the page joined it)
          const you = el.hasAttribute("data-presence-others") ? this._selfCounted(room) : 0;
          el.textContent = String(Math.max(0, this.count(room) - you));
        }
      }
    }

    _selfCounted(room) {
      if (this.roomCounts.has(room)) {
        const shown = this.me && this.me.state !== "invisible";
        return shown && this.countsMe.get(room) !== false ? 1 : 0;
      }
      const map = this.roomMembers.get(room);
      return map && map.has(this.userId) ? 1 : 0;
    }

    // {% room_members "room" %} alone: the room's live list, each member's dot and name, in the
    // order they came; data-presence-others leaves you out. A member who joins after the page
    // was rendered is named by the list's data-presence-names-url (the server names only whom
    // you may see in the room); the row shows once the name came. A count-only room has none.
    _paintLists(room) {
      if (!this.roomMembers.has(room) || this.roomCounts.has(room) || this.roomPaging.has(room)) {
        return;
      }
      const map = this.roomMembers.get(room);
      const sel = '[data-presence-room-members="' + CSS.escape(room) + '"]';
      for (const list of this.root.querySelectorAll(sel)) {
        const others = list.hasAttribute("data-presence-others");
        const wanted = (id) => map.has(id) && !(others && id === this.userId);
        const rows = new Set();
        for (const el of Array.from(list.children)) {
          const id = el.dataset.presenceRoomMember;
          if (id == null) continue;
          const name = el.querySelector(".presence-room-member-name");
          if (name && !el.hidden && !this.names.has(id)) this.names.set(id, name.textContent);
          if (wanted(id)) rows.add(id);
          else el.remove();
        }
        for (const id of map.keys()) {
          if (!rows.has(id) && wanted(id)) list.appendChild(this._memberRow(list, id));
        }
      }
    }

    _memberRow(list, id) {
      const doc = list.ownerDocument;
      const row = doc.createElement(list.tagName === "UL" || list.tagName === "OL" ? "li" : "div");
      row.className = "presence-room-member";
      row.dataset.presenceRoomMember = id;
      const dot = doc.createElement("span");
      dot.className = "presence-dot";
      dot.dataset.presenceUser = id;
      dot.setAttribute("role", "img");
      const name = doc.createElement("span");
      name.className = "presence-room-member-name";
      row.append(dot, " ", name);
      const url = list.dataset.presenceNamesUrl;
      if (this.names.has(id)) name.textContent = this.names.get(id);
      else if (url) {
        row.hidden = true; // shown with its name
        this._wantName(url, id);
      } else name.textContent = id; // no endpoint to ask: the id
      // after it is in the page: its dot painted as the others
      Promise.resolve().then(() => this._paint(id));
      return row;
    }

    _wantName(url, id) {
      if (!this.nameWants.has(url)) this.nameWants.set(url, new Set());
      this.nameWants.get(url).add(id);
      // The joins of a moment (a tick's diff, a snapshot) are asked for in one request.
      if (!this.timers.names) this.timers.names = setTimeout(() => this._askNames(), 50);
    }

     _askNames() {
      this.timers.names = null;
      const wants = this.nameWants;
      this.nameWants = new Map();
      for (const [url, set] of wants) {
        const ids = Array.from(set).filter((id) => !this.names.has(id));
        for (let i = 0; i < ids.length; i += 100) this._fetchNames(url, ids.slice(i, i + 100), 0);
      }
    }

    _fetchNames(url, ids, attempt) {
      const sep = url.includes("?") ? "&" : "?";
      global.fetch(url + sep + "ids=" + ids.map(encodeURIComponent).join(","), {
        credentials: "same-origin", headers: {Accept: "application/json"},
      }).then((reply) => {
        if (reply.ok) return reply.json();
        // Too many requests, presence away for a moment: ask again, a few times.
        if ((reply.status === 429 || reply.status === 503) && attempt < 3 && !this.closed) {
          setTimeout(() => this._fetchNames(url, ids, attempt + 1), 2000 * (attempt + 1));
        }
        return null;
      }).then((body) => {
        if (body && body.names) this._named(body.names);
      }).catch(() => {});
    }

   _named(names) {
      for (const [id, text] of Object.entries(names)) {
        this.names.set(id, text);
        const sel = '[data-presence-room-member="' + CSS.escape(id) + '"]';
        for (const row of this.root.querySelectorAll(sel)) {
          const name = row.querySelector(".presence-room-member-name");
          if (name) name.textContent = text;
          row.hidden = false;
        }
      }
    }

    _pageUsers() {
      const ids = new Set();
      for (const el of this.root.querySelectorAll("[data-presence-user]")) {
        if (el.dataset.presenceUser) ids.add(el.dataset.presenceUser);
      }
      return ids;
    }

    _scheduleScan() {
      if (this.timers.scan) return;
      this.timers.scan = setTimeout(() => {
        this.timers.scan = null;
        for (const id of this._pageUsers()) this._paint(id);
        this._syncWatch();
      }, 250);
    }

    _syncWatch() {
      if (!this.limits) return;
      const wanted = new Set(this.appWatch);
      if (this.autoWatch) for (const id of this._pageUsers()) wanted.add(id);
      const ids = Array.from(wanted).sort().slice(0, this.limits.watch);
      const key = ids.join("\n");
      if (key === this.sentWatch) return;
      if (this.sentWatch === null && ids.length === 0) {
        this.sentWatch = key;
        return;
      }
      // One frame replaces the list; longer lists follow as "add" frames within the size limit.
      const budget = this.limits.frame_bytes - 64;
      let chunk = [];
      let size = 0;
      let first = true;
      const flush = () => {
        this._send(first ? {type: "watch", users: chunk} : {type: "watch", add: chunk});
        first = false;
        chunk = [];
        size = 0;
      };
      for (const id of ids) {
        const cost = byteLength(JSON.stringify(id)) + 1;
        if (chunk.length && size + cost > budget) flush();
        chunk.push(id);
        size += cost;
      }
      if (chunk.length || first) flush();
      this.sentWatch = key;
    }

    // -- activity ----------------------------------------------------------------------------
    _onActivity() {
      if (global.document.visibilityState !== "visible") return;
      const now = Date.now();
      if (now - this.lastActivity < this.activityMs) return;
      if (this._send({type: "activity"})) this.lastActivity = now;
    }

    _onVisibility() {
      if (global.document.visibilityState !== "visible") return;
      this._onWake();
      this._onActivity();
    }

    // -- plumbing ----------------------------------------------------------------------------
    _roomMap(room) {
      if (!this.roomMembers.has(room)) this.roomMembers.set(room, new Map());
      return this.roomMembers.get(room);
    }

    _emit(event, data) {
      const set = this.handlers.get(event);
      if (!set) return;
      for (const fn of Array.from(set)) {
        try {
          fn(data, this);
        } catch (err) {
          setTimeout(() => { throw err; }); // report it without breaking the client
        }
      }
    }
  }

  // The SSE transport behind the WebSocket's interface (readyState, send, close, onmessage,
  // onclose), so the client above does not care which it has. Frames go out as POSTs to the
  // stream the hello named; a refusal comes back as the same error frame a socket gets.
  class SseSocket {
    constructor(client) {
      this.sse = true;
      this.client = client;
      this.readyState = 0;
      this.bufferedAmount = 0; // POSTs are not buffered here
      this.stream = null;
      this.csrf = null;
      this.onmessage = null;
      this.onclose = null;
      let url = client.sseUrl;
      if (client.lastEventId) {
        url += (url.includes("?") ? "&" : "?") + "lastEventId=" + encodeURIComponent(client.lastEventId);
      }
      this.es = new EventSource(url, {withCredentials: true});
      this.es.onmessage = (event) => {
        if (event.lastEventId) client.lastEventId = event.lastEventId;
        let msg = null;
        try {
          msg = JSON.parse(event.data);
        } catch (e) {
          return;
        }
        if (msg.type === "hello") {
          this.stream = msg.stream;
          this.csrf = msg.csrf;
          this.readyState = 1;
        }
        if (this.onmessage) this.onmessage({data: event.data});
      };
      // Any error ends this stream; the client's own backoff opens the next one, which
      // resumes (lastEventId) within the grace without a leave/join.
      this.es.onerror = () => {
        const opened = this.readyState === 1;
        this._end(opened ? 1006 : null);
      };
    }

    send(text) {
      if (this.readyState !== 1) return;
      const frame = JSON.parse(text);
      const type = frame.type;
      delete frame.type;
      fetch(this.client.restUrl + encodeURIComponent(type) + "/", {
        method: "POST",
        credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": this.csrf || "",
                  "X-Presence-Stream": this.stream || ""},
        body: JSON.stringify(frame),
      }).then((reply) => {
        if (reply.ok) return;
        reply.json().then((error) => {
          if (error && error.code === "gone") this._end(1006); // its process went: reconnect
          else if (this.onmessage && error && error.type === "error") {
            this.onmessage({data: JSON.stringify(error)});
          }
        }, () => {});
      }, () => {});
    }

    close(code) {
      this._end(code || 1000);
    }

    _end(code) {
      if (this.readyState === 3) return;
      this.readyState = 3;
      this.es.close();
      if (!this.onclose) return;
      if (code !== null) {
        this.onclose({code});
        return;
      }
      // Refused before the hello: a 401 means signed out (reconnecting will not help).
      fetch(this.client.sseUrl, {method: "GET", credentials: "same-origin",
                                 headers: {"Accept": "application/json"}}).then((reply) => {
        if (reply.body) reply.body.cancel().catch(() => {});
        this.onclose({code: reply.status === 401 ? CLOSE_UNAUTHENTICATED : 1006});
      }, () => this.onclose({code: 1006}));
    }
  }

  // -- one connection per browser, shared by its tabs ------------------------------------------
  //
  // A browser's tabs of one origin share one connection (share: true, the default): a hub holds
  // it, in a SharedWorker (this same file, run as the worker) or, where SharedWorker is
  // missing, in a leader tab elected over Web Locks that relays over a BroadcastChannel. Each
  // tab's client talks to the hub through a TabLink, which looks like a socket to it. The hub
  // keeps what each tab wants and tells the server what they want together:
  //   - a room is joined while any tab is in it and left when the last one leaves (or closes);
  //     a tab that joins a room the connection is in gets the room's snapshot again;
  //   - the room's events go to the tabs in it; presence of users, your own status, direct
  //     messages and the project's frames without a room go to every tab;
  //   - the watch list is the union of the tabs' lists;
  //   - typing and activity are throttled per connection; a room state is the connection's
  //     one: the latest a tab set there (a tab that clears it, leaves or closes hands the room
  //     back to the state another tab set before it, if any). Tabs see each other's states as
  //     any member's (conn "tab:<id>").
  // A tab that closes leaves its rooms no other tab is in after the server's grace (a reload
  // comes back to them unseen); the connection lives on. The last tab's close closes it.
  // The leader tab that closes takes the connection with it: the next tab in the lock's queue
  // opens the next one within the server's grace, and the tabs' frames not yet sent are sent
  // again through it (acks), so another user sees no leave, no flicker, no lost frame.

  // The script's own URL: the SharedWorker runs this file (presence.mjs tells a module's).
  const SCRIPT_URL = global.document && global.document.currentScript
    ? global.document.currentScript.src : null;
  // Frames that stand for what a tab wants (sent again by its client on every hello): not
  // repeated through a new hub. Any other frame a tab sent and the hub did not ack is.
  const WANTS = new Set(["hello", "heartbeat", "join", "leave", "watch", "roomstate"]);

  function randomId() {
    if (global.crypto && global.crypto.randomUUID) return global.crypto.randomUUID();
    return Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function cookie(name) {
    const doc = global.document;
    const match = doc && new RegExp("(?:^|;\\s*)" + name + "=([^;]*)").exec(doc.cookie);
    return match ? match[1] : "";
  }

  // A watch list as frames within the size limit: the first replaces, the next add.
  function watchFrames(ids, frameBytes) {
    const budget = frameBytes - 64;
    const frames = [];
    let chunk = [];
    let size = 0;
    const flush = () => {
      frames.push(frames.length ? {type: "watch", add: chunk} : {type: "watch", users: chunk});
      chunk = [];
      size = 0;
    };
    for (const id of ids) {
      const cost = byteLength(JSON.stringify(id)) + 1;
      if (chunk.length && size + cost > budget) flush();
      chunk.push(id);
      size += cost;
    }
    if (chunk.length || !frames.length) flush();
    return frames;
  }

  // How this page's client shares its connection: null (its own: share false, or a browser
  // without SharedWorker nor Web Locks + BroadcastChannel), else {mode: "worker" | "leader"}.
  // Tabs share only with tabs of the same endpoints and sign-in: the key holds the URLs, the
  // transport option and shareKey (default: the CSRF cookie, which Django rotates at sign-in
  // and presence_app's user_logged_out receiver at sign-out, so a tab signed in as somebody
  // else, or signed out, does not use the last user's connection; that sign-out also ends the
  // connection: 4402).
  function shareMode(opts, client) {
    if (opts.share === false || !global.document) return null;
    // No key, no sharing: a CSRF cookie this page cannot read (CSRF_COOKIE_HTTPONLY,
    // CSRF_USE_SESSIONS, not set yet) would make every sign-in of this browser one.
    const who = opts.shareKey !== undefined ? opts.shareKey : cookie("csrftoken");
    if (who === null || who === undefined || String(who) === "") return null;
    const key = JSON.stringify([client.url, client.sseUrl, client.restUrl, opts.transport || "auto",
      String(who)]);
    const workerUrl = opts.workerUrl || Presence.workerUrl || SCRIPT_URL;
    const canLead = !!(global.navigator && global.navigator.locks) &&
      typeof global.BroadcastChannel === "function";
    const mode = typeof global.SharedWorker === "function" && workerUrl ? "worker"
      : canLead ? "leader" : null;
    if (!mode) return null;
    const share = {mode, key, workerUrl, canLead, hub: null, current: null, leading: false};
    share.options = {url: client.url, sseUrl: client.sseUrl, restUrl: client.restUrl,
                     transport: opts.transport, minDelay: opts.minDelay, maxDelay: opts.maxDelay,
                     timerWorker: opts.timerWorker};
    share.link = () => (share.current = new TabLink(client, share));
    // The leader: the page whose request gets the lock holds it (and the hub) for its life.
    share.lead = () => {
      if (share.leading) return;
      share.leading = true;
      global.navigator.locks.request("presence-leader:" + key, () => new Promise(() => {
        share.hub = new Hub(share.options, "presence:" + key);
        if (share.current && !share.current.ended) share.current.becomeLocal(share.hub);
      }));
    };
    return share;
  }

  // A tab's end of the shared connection, with a socket's face for its client (readyState,
  // send, close, onmessage, onclose; shared: true). Down and up again are the hub's doing: the
  // link stays, its client hears a close (_onDown) and then a hello.
  class TabLink {
    constructor(client, share) {
      this.shared = true;
      this.client = client;
      this.share = share;
      this.mode = share.mode;
      this.readyState = 0;
      this.bufferedAmount = 0;
      this.transport = client.transport;
      this.onmessage = null;
      this.onclose = null;
      this.tab = randomId();
      this.hub = null; // the hub this tab heard from last
      this.local = false; // this page holds the hub (the leader)
      this.seq = 0;
      this.unacked = []; // frames sent over the channel that no hub has acked yet
      this.ended = false;
      this.heard = false;
      this.release = null;
      this._onPageHide = () => this._post({t: "bye", tab: this.tab});
      this._onPageShow = (event) => {
        if (event.persisted) this._attach(); // back from the back-forward cache
      };
      global.addEventListener("pagehide", this._onPageHide);
      global.addEventListener("pageshow", this._onPageShow);
      const locks = global.navigator && global.navigator.locks;
      if (!locks) {
        this._start();
        return;
      }
      // Held for this tab's life: the hub asks for it too, and gets it when the tab is gone
      // (closed, crashed, navigated away), whatever the tab managed to say.
      locks.request("presence-tab:" + this.tab, () => new Promise((release) => {
        this.release = release;
        if (this.ended) release();
        else this._start();
      }));
    }

    _start() {
      if (this.mode === "worker") {
        try {
          const worker = new global.SharedWorker(this.share.workerUrl,
            {name: "presence:" + this.share.key});
          this.port = worker.port;
          worker.onerror = () => this._fail();
          this.port.onmessage = (event) => this._fromHub(event.data);
          this.port.start();
          // A worker that never answers its attach (refused by a Content-Security-Policy, not
          // served): the leader tab, or this tab's own connection.
          this.failTimer = setTimeout(() => this._fail(), 10000);
        } catch (e) {
          this._fail();
          return;
        }
      } else {
        this.channel = new global.BroadcastChannel("presence:" + this.share.key);
        this.channel.onmessage = (event) => this._fromChannel(event.data);
        if (this.share.hub) {
          this.becomeLocal(this.share.hub); // this page leads already
          return;
        }
        this.share.lead();
      }
      this._attach();
    }

    _attach() {
      if (this.ended) return;
      this._post({t: "attach", tab: this.tab, options: this.share.options,
                  acks: this.mode === "leader" && !this.local});
    }

    // This page won the election: its hub serves this tab directly.
    becomeLocal(hub) {
      if (this.ended) return;
      this.local = true;
      this.hubRef = hub;
      this._attach();
    }

    _fail() {
      if (this.heard || this.ended) return;
      clearTimeout(this.failTimer);
      this.ended = true;
      global.removeEventListener("pagehide", this._onPageHide);
      global.removeEventListener("pageshow", this._onPageShow);
      if (this.port) this.port.close();
      if (this.release) this.release();
      const share = this.share;
      share.mode = share.canLead ? "leader" : null;
      this.client.shared = share.mode;
      if (!share.mode) this.client.share = null;
      this.readyState = 3;
      this.client._onClose(this, {code: 1006}, true); // at once, the other way
    }

    _post(msg) {
      if (this.local) {
        const hub = this.hubRef;
        Promise.resolve().then(() => hub.fromTab(msg, {kind: "local", link: this}));
      } else if (this.port) {
        this.port.postMessage(msg);
      } else if (this.channel) {
        this.channel.postMessage(Object.assign({to: "hub"}, msg));
      }
    }

    _fromChannel(msg) {
      if (!msg || msg.to === "hub" || this.local || this.ended) return;
      if (msg.t === "leader") {
        this._attach(); // a new leader: tell it this tab is here
      } else if (Array.isArray(msg.to) && msg.to.includes(this.tab)) {
        this._fromHub(msg);
      }
    }

    _fromHub(msg) {
      if (this.ended) return;
      if (!this.heard) {
        this.heard = true;
        clearTimeout(this.failTimer);
      }
      if (msg.t === "frame") {
        if (this.readyState === 1 && this.onmessage) this.onmessage({data: msg.data});
      } else if (msg.t === "up") {
        // A hub other than the last one (a new leader): what the last did not ack goes again,
        // after the hello, whose handling sends the tab's rooms, states and watch list.
        const again = this.hub !== null && msg.hub !== this.hub
          ? this.unacked.filter((f) => !WANTS.has(f.frame.type)) : [];
        this.hub = msg.hub;
        this.unacked = [];
        this.transport = msg.transport;
        this.readyState = 1;
        if (this.onmessage) this.onmessage({data: msg.hello});
        for (const f of again) this.send(JSON.stringify(f.frame));
      } else if (msg.t === "down") {
        this.readyState = 0;
        this.unacked = []; // as a socket's queue: gone with the connection
        this.transport = msg.transport;
        this.client._onDown(this, msg);
      } else if (msg.t === "ack") {
        this.unacked = this.unacked.filter((f) => f.seq > msg.seq);
      }
    }

    send(text) {
      if (this.readyState !== 1) return;
      const frame = JSON.parse(text);
      const seq = ++this.seq;
      if (this.channel && !this.local) this.unacked.push({seq, frame});
      // Addressed to the hub whose hello this tab heard: one that came since (a new leader)
      // drops it, and the tab sends it again once that one's hello comes (never twice).
      this._post({t: "frame", tab: this.tab, seq, hub: this.hub, frame});
    }

    wake() {
      this._post({t: "wake"});
    }

    close(code) {
      if (this.ended) return;
      this._post({t: "bye", tab: this.tab});
      this.ended = true;
      this.readyState = 3;
      clearTimeout(this.failTimer);
      global.removeEventListener("pagehide", this._onPageHide);
      global.removeEventListener("pageshow", this._onPageShow);
      if (this.release) this.release();
      if (this.port) this.port.close();
      if (this.channel) this.channel.close();
      setTimeout(() => this.onclose && this.onclose({code: code || 1000}), 0);
    }
  }

  // The connection a browser's tabs share, and what each tab wants of it (above).
  class Hub extends Connection {
    constructor(options, channelName) {
      super(Object.assign({}, options, {
        // a SharedWorker's timers are not throttled; a leader tab's are, hidden
        timerWorker: channelName ? options.timerWorker !== false : false,
      }));
      this.id = randomId();
      this.tabs = new Map(); // tab id -> {sink, rooms, watch, seq, acked, acks}
      this.rooms = new Map(); // room -> {tabs, waiting, asked, target, states, sent}
      this.hello = null; // the server's hello, as text, for each tab
      this.userId = null;
      this.sentWatch = null;
      this.lastTyping = new Map();
      this.lastActivity = 0;
      this.graceMs = 20000; // the server's DISCONNECT_GRACE (its hello says)
      this.dirtyStates = new Set();
      this.stateSentAt = 0;
      Object.assign(this.timers, {state: null, ack: null, watch: null});
      this.closed = true; // until a tab comes
      if (channelName) {
        this.channel = new global.BroadcastChannel(channelName);
        this.channel.onmessage = (event) => {
          const msg = event.data;
          if (msg && msg.to === "hub") {
            this.fromTab(msg, {kind: "channel"});
          }
        };
        this.channel.postMessage({t: "leader", hub: this.id});
        global.addEventListener("pagehide", () => {
          this.retiring = true;
        });
        global.addEventListener("pageshow", (event) => {
          if (event.persisted) this.retiring = false; // back from the back-forward cache
        });
      }
    }

    // -- the tabs ---------------------------------------------------------------------------
    fromTab(msg, sink) {
      if (msg.t === "attach") {
        this._attach(msg.tab, sink, msg.acks);
      } else if (msg.t === "bye") {
        this._detach(msg.tab);
      } else if (msg.t === "wake") {
        this._onWake();
      } else if (msg.t === "frame") {
        const tab = this.tabs.get(msg.tab);
        // Not acked: sent again through the next hub. A leader tab that is going (pagehide)
        // takes no more: what it sent it may not ack, and the tab would send it twice.
        if (!tab || !this.helloSeen || this.retiring || msg.hub !== this.id) return;
        tab.seq = msg.seq;
        this._fromTab(msg.tab, tab, msg.frame);
        this._ackSoon();
      }
    }

    _attach(id, sink, acks) {
      if (this.tabs.has(id)) return;
      const post = sink.kind === "port" ? sink.post
        : sink.kind === "local" ? (m) => Promise.resolve().then(() => sink.link._fromHub(m))
        : (m) => this.channel.postMessage(Object.assign({to: [id]}, m));
      this.tabs.set(id, {post, channel: sink.kind === "channel", rooms: new Set(),
                         watch: new Set(), seq: 0, acked: 0, acks: !!acks});
      const locks = global.navigator && global.navigator.locks;
      if (locks) locks.request("presence-tab:" + id, () => this._detach(id));
      post({t: "attached"}); // the hub is there, whether the server is or not
      if (this.helloSeen) {
        post(this._up());
      } else if (this.closed) {
        this.closed = false;
        this.attempt = 0;
        this._open();
      }
    }

    // A tab went (closed, crashed, navigated away: not a leave). No tab left: the connection
    // closes, and the server's grace keeps its rooms, as a lone tab's close. Else the rooms
    // only it was in are left after the same grace, so that a reload of that tab comes back to
    // them unseen, as a lone tab's reload does.
    _detach(id) {
      const tab = this.tabs.get(id);
      if (!tab) return;
      this.tabs.delete(id);
      if (!this.tabs.size) {
        this.closed = true;
        for (const key of Object.keys(this.timers)) this._clearTimer(key);
        for (const room of this.rooms.values()) clearTimeout(room.release);
        this.rooms.clear();
        const ws = this.socket;
        if (ws) {
          this._onClose(ws, {code: 1000});
          ws.close(1000);
        }
        return;
      }
      for (const room of Array.from(tab.rooms)) this._leave(id, tab, room, this.graceMs);
      this._syncWatch();
    }

    _up() {
      return {t: "up", hub: this.id, transport: this.transport, hello: this.hello};
    }

    // Sends msg to the tabs (ids): one message on the channel for all of its tabs.
    _deliver(ids, msg) {
      const viaChannel = [];
      for (const id of ids) {
        const tab = this.tabs.get(id);
        if (!tab) continue;
        if (tab.channel) viaChannel.push(id);
        else tab.post(msg);
      }
      if (viaChannel.length) this.channel.postMessage(Object.assign({to: viaChannel}, msg));
    }

    _frame(ids, text) {
      this._deliver(ids, {t: "frame", data: text});
    }

    // A frame is acked once it left on the socket: a tab sends again, through the next
    // leader, what its leader took with it.
    _ackSoon() {
      if (this.timers.ack || this._ack()) return;
      this.timers.ack = setTimeout(() => {
        this.timers.ack = null;
        if (!this._ack() && this.socket) this._ackSoon();
      }, 20);
    }

    _ack() {
      const ws = this.socket;
      if (!ws || this.queue.length || (ws.bufferedAmount || 0) > 0) return false;
      for (const tab of this.tabs.values()) {
        if (tab.acks && tab.seq > tab.acked) {
          tab.acked = tab.seq;
          tab.post({t: "ack", seq: tab.seq});
        }
      }
      return true;
    }

    _room(name) {
      let room = this.rooms.get(name);
      if (!room) {
        room = {tabs: new Set(), waiting: new Set(), asked: false, target: null,
                states: new Map(), sent: undefined, release: null};
        this.rooms.set(name, room);
      }
      return room;
    }

    // A tab's frame: what it wants, merged with the others'.
    _fromTab(id, tab, frame) {
      const name = typeof frame.room === "string" ? frame.room : null;
      switch (frame.type) {
        case "hello":
        case "heartbeat": // the hub's own
          return;
        case "join": {
          if (name === null) break;
          const room = this._room(name);
          if (frame.permanent === true) {
            room.asked = true;
            this._send(frame); // a membership too: the server's to make
          } else if (tab.rooms.has(name)) {
            return; // in it (a hello's joins): the hub joined it again itself
          }
          clearTimeout(room.release); // a closed tab's room, kept for the grace: taken back
          tab.rooms.add(name);
          room.tabs.add(id);
          room.waiting.add(id);
          if (!room.asked) {
            room.asked = true;
            this._send({type: "join", room: name});
          }
          return;
        }
        case "leave":
          if (name === null) break;
          if (frame.permanent === true) {
            this._revoked(name, id);
            break; // the server leaves it and ends the membership
          }
          if (tab.rooms.has(name)) this._leave(id, tab, name, 0);
          return;
        case "typing": {
          if (!tab.rooms.has(name)) return;
          const now = Date.now();
          if (now - (this.lastTyping.get(name) || 0) < this.typingMs) return;
          this.lastTyping.set(name, now);
          break;
        }
        case "roomstate": {
          if (!tab.rooms.has(name)) return;
          const room = this.rooms.get(name);
          const data = frame.data == null ? null : frame.data;
          room.states.delete(id); // the latest set last
          if (data !== null) room.states.set(id, data);
          this._relayState(name, room, id, data);
          this.dirtyStates.add(name);
          this._flushStates();
          return;
        }
        case "watch":
          if (Array.isArray(frame.users)) tab.watch = new Set(frame.users.map(String));
          else if (Array.isArray(frame.add)) for (const u of frame.add) tab.watch.add(String(u));
          else if (Array.isArray(frame.remove)) for (const u of frame.remove) tab.watch.delete(String(u));
          else break;
          if (!this.timers.watch) {
            // a long list comes in several frames: the union is sent once they are in
            this.timers.watch = setTimeout(() => {
              this.timers.watch = null;
              this._syncWatch();
            }, 20);
          }
          return;
        case "activity": {
          const now = Date.now();
          if (now - this.lastActivity < this.activityMs) return;
          this.lastActivity = now;
          break;
        }
        default:
          break;
      }
      this._send(frame);
    }

    // A tab out of a room: the connection leaves it if no other tab is in it (after ``linger``
    // ms: a closed tab's rooms).
    _leave(id, tab, name, linger) {
      tab.rooms.delete(name);
      const room = this.rooms.get(name);
      if (!room) return;
      room.tabs.delete(id);
      room.waiting.delete(id);
      if (room.target) room.target.delete(id);
      if (room.states.delete(id)) {
        this._relayState(name, room, id, null);
        this.dirtyStates.add(name);
      }
      if (room.tabs.size) {
        this._flushStates();
        return;
      }
      if (linger > 0) {
        this._flushStates(); // its state goes now, as a closed socket's
        clearTimeout(room.release);
        room.release = setTimeout(() => {
          if (!room.tabs.size && this.rooms.get(name) === room) this._leave(id, tab, name, 0);
        }, linger);
        return;
      }
      this.rooms.delete(name);
      this.dirtyStates.delete(name);
      this.lastTyping.delete(name);
      if (this.helloSeen) this._send({type: "leave", room: name}); // its state goes with it
    }

    // The connection is out of a room (a permanent leave, access taken away): every tab in it
    // is told, as the server tells a connection.
    _revoked(name, except) {
      const room = this.rooms.get(name);
      if (!room) return;
      clearTimeout(room.release);
      this.rooms.delete(name);
      this.dirtyStates.delete(name);
      const others = [];
      for (const id of room.tabs) {
        const tab = this.tabs.get(id);
        if (tab) tab.rooms.delete(name);
        if (id !== except) others.push(id);
      }
      const error = {type: "error", code: "forbidden", room: name,
                     detail: "This room was left for good in another tab."};
      if (except !== null && others.length) this._frame(others, JSON.stringify(error));
    }

    // A tab's room state, shown to the other tabs in the room as any member's.
    _relayState(name, room, id, data) {
      const others = Array.from(room.tabs).filter((t) => t !== id);
      if (!others.length || this.userId === null) return;
      const states = [{user: this.userId, conn: "tab:" + id, data}];
      this._frame(others, JSON.stringify({type: "presence.roomstate", room: name, states}));
    }

    _stateTickMs() {
      const limits = this.limits || {};
      return 1000 / Math.min(limits.room_state_rate || 20, Math.max(1, (this.rate || 2) / 2));
    }

    // The connection's state in each changed room: the latest a tab there set (null: none).
    _flushStates() {
      if (this.timers.state || !this.dirtyStates.size || !this.helloSeen) return;
      const wait = this.stateSentAt + this._stateTickMs() - Date.now();
      if (wait > 0) {
        this.timers.state = setTimeout(() => {
          this.timers.state = null;
          this._flushStates();
        }, wait);
        return;
      }
      this.stateSentAt = Date.now();
      for (const name of this.dirtyStates) {
        const room = this.rooms.get(name);
        if (!room) continue;
        let data = null;
        for (const value of room.states.values()) data = value;
        const text = JSON.stringify(data);
        if (text === (room.sent === undefined ? "null" : room.sent)) continue;
        room.sent = text;
        this._send({type: "roomstate", room: name, data});
      }
      this.dirtyStates.clear();
    }

    _syncWatch() {
      if (!this.limits) return;
      const wanted = new Set();
      for (const tab of this.tabs.values()) for (const id of tab.watch) wanted.add(id);
      const ids = Array.from(wanted).sort().slice(0, this.limits.watch);
      const key = ids.join("\n");
      if (key === this.sentWatch) return;
      if (!(this.sentWatch === null && ids.length === 0)) {
        for (const frame of watchFrames(ids, this.limits.frame_bytes)) this._send(frame);
      }
      this.sentWatch = key;
    }

    // -- the connection -----------------------------------------------------------------------
    _receive(text) {
      let msg;
      try {
        msg = JSON.parse(text);
      } catch (e) {
        return;
      }
      const all = this.tabs.keys();
      const room = typeof msg.room === "string" ? this.rooms.get(msg.room) : null;
      switch (msg.type) {
        case "hello":
          this._hello(msg, text);
          return;
        case "heartbeat.ack":
          return;
        case "presence.state":
          if (msg.watch || msg.room == null) this._frame(all, text);
          else if (room) this._snapshot(msg, room, text);
          return;
        case "presence.count":
          // A count-only room's answer to a join (its snapshot): a tab that comes later asks
          // again, and gets the count now, not at the room's next change.
          if (room) {
            room.asked = false;
            room.waiting.clear();
            this._frame(room.tabs, text);
          }
          return;
        case "presence.join":
        case "presence.leave":
        case "presence.typing":
        case "presence.roomstate":
          if (room) this._frame(room.tabs, text);
          return;
        case "presence.diff":
          if (msg.room == null) this._frame(all, text);
          else if (room) this._frame(room.tabs, text);
          return;
        case "error":
          this._error(msg, room, text);
          return;
        default:
          // a project's frame about a room goes to the tabs in it; any other to every tab
          this._frame(room ? room.tabs : all, text);
      }
    }

    _hello(msg, text) {
      this._connected(msg);
      this.hello = text;
      this.userId = msg.user;
      this.activityMs = msg.activity * 1000;
      this.typingMs = msg.typing * 1000;
      this.graceMs = (msg.grace == null ? 20 : msg.grace) * 1000;
      this._send({type: "hello", accept: ["presence.diff"]});
      // A new connection is in no room: the tabs' rooms again, each tab waiting for its
      // snapshot, and the rooms' states.
      for (const [name, room] of Array.from(this.rooms)) {
        if (!room.tabs.size) {
          clearTimeout(room.release); // a closed tab's, kept for the grace: no more
          this.rooms.delete(name);
          continue;
        }
        room.asked = true;
        room.waiting = new Set(room.tabs);
        room.target = null;
        room.sent = undefined;
        this._send({type: "join", room: name});
        if (room.states.size) this.dirtyStates.add(name);
      }
      this._flushStates();
      this._syncWatch();
      this._deliver(this.tabs.keys(), this._up());
    }

    // A room's snapshot: to the tabs waiting for one (all in the room, if none is: the server
    // sent it unasked), with the other tabs' states; a snapshot of several pages goes whole
    // to the tabs its first page went to.
    _snapshot(msg, room, text) {
      const first = !(msg.page > 0);
      if (first) {
        room.target = new Set(room.waiting.size ? room.waiting : room.tabs);
        room.waiting.clear();
        room.asked = false;
      }
      const to = Array.from(room.target || room.tabs);
      this._frame(to, text);
      if (first && this.userId !== null) {
        for (const id of to) {
          const states = [];
          for (const [other, data] of room.states) {
            if (other !== id) states.push({user: this.userId, conn: "tab:" + other, data});
          }
          if (states.length) {
            this._frame([id], JSON.stringify({type: "presence.roomstate", room: msg.room, states}));
          }
        }
      }
      if (!msg.more) room.target = null;
    }

    _error(msg, room, text) {
      if (room) {
        this._frame(new Set([...room.tabs, ...room.waiting]), text);
        // Not joined (refused, Redis away: the tabs ask again), or taken away: out of it.
        if (msg.frame === "join" || (msg.code === "forbidden" && !msg.frame)) {
          this._revoked(msg.room, null);
        }
      } else if (typeof msg.room !== "string") {
        this._frame(this.tabs.keys(), text);
      } // else about a room no tab is in any more
    }

    _lost() {
      this.sentWatch = null;
      this.lastTyping.clear();
      this.dirtyStates.clear();
      this._clearTimer("state");
      for (const room of this.rooms.values()) {
        room.asked = false;
        room.target = null;
        room.sent = undefined;
      }
    }

    _emit(event, data) {
      if (event === "close") {
        this.helloSeen = false; // a tab that comes now waits for the next hello
        const down = {t: "down", code: data.code, reconnectIn: data.reconnectIn,
                      transport: this.transport};
        this._deliver(this.tabs.keys(), down);
      }
    }
  }

  // In a SharedWorker (this file, run as the hub of a browser's tabs): one hub, made with the
  // options of the first tab that attaches (the worker's name holds them: they are the same).
  function serveTabs(scope) {
    let hub = null;
    scope.onconnect = (event) => {
      const port = event.ports[0];
      const sink = {kind: "port", post: (m) => port.postMessage(m)};
      port.onmessage = (e) => {
        const msg = e.data;
        if (!msg) return;
        if (!hub && msg.t === "attach") hub = new Hub(msg.options || {}, null);
        if (hub) hub.fromTab(msg, sink);
      };
      port.start();
    };
  }

  const Presence = {
    version: "0.1.0",
    Client: PresenceClient,
    labels: LABELS,
    connect(options) {
      return new PresenceClient(options);
    },
  };
  global.Presence = Presence;

  // A classic <script> only: in a module (presence.mjs, a bundler) there is no currentScript.
  const script = global.document ? global.document.currentScript : null;
  if (script && script.hasAttribute("data-presence-connect")) {
    const start = () => {
      global.presence = Presence.connect({
        url: script.dataset.presenceUrl || undefined,
        rooms: (script.dataset.presenceRooms || "").split(/[\s,]+/).filter(Boolean),
        share: script.dataset.presenceShare !== "false",
      });
    };
    if (global.document.readyState === "loading") {
      global.document.addEventListener("DOMContentLoaded", start);
    } else {
      start();
    }
  }
  if (typeof global.SharedWorkerGlobalScope === "function" &&
      global instanceof global.SharedWorkerGlobalScope) {
    serveTabs(global); // this file runs as the hub of a browser's tabs
  }
})(typeof window !== "undefined" ? window : globalThis);
