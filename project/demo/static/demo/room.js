/* A room page: who is here (live), everybody else with "last seen …", the chat with its typing
 * indicator and your status picker, all on presence.js events. The page's one socket is the
 * demo's chat consumer (ws/chat/), which carries presence through PresenceConsumerMixin. The server renders the first view with the
 * presence template tags; from then on this script moves people between "In this room" and
 * "Not in this room" as the join / leave / update events come. */
(function () {
  "use strict";

  const page = document.getElementById("room");
  const ROOM = page.dataset.room;
  const ME = page.dataset.me;
  const hereList = document.getElementById("here");
  const awayList = document.getElementById("away");
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const client = Demo.connect({rooms: [ROOM], url: scheme + "//" + location.host + "/ws/chat/"});

  const seenAt = new Map(); // user id -> when this page saw them go offline (browser clock)
  const typers = new Map(); // user id -> timer that ends their "typing…"
  let joined = false; // this page has had the room's snapshot

  // -- rows ---------------------------------------------------------------------------------
  function rowOf(uid) {
    return document.querySelector('.member[data-user="' + CSS.escape(uid) + '"]');
  }

  function nameOf(uid) {
    const row = rowOf(uid);
    return row ? row.dataset.name : "#" + uid;
  }

  function addRow(uid, name) {
    const row = document.getElementById("member-template").content.firstElementChild.cloneNode(true);
    row.dataset.user = uid;
    row.dataset.name = name;
    row.querySelector(".initial").textContent = name.charAt(0).toUpperCase();
    row.querySelector(".avatar").style.setProperty("--hue", Demo.hue(uid));
    row.querySelector(".name").textContent = name;
    row.querySelector("[data-presence-user]").dataset.presenceUser = uid;
    insertSorted(awayList, row);
    return row;
  }

  function insertSorted(list, row) {
    const name = row.dataset.name;
    const next = Array.from(list.children).find(
      (other) => other !== row && other.dataset.name.localeCompare(name) > 0);
    list.insertBefore(row, next || null);
  }

  function place(uid, inRoom) {
    const row = rowOf(uid);
    if (!row) {
      if (inRoom) learnNames();
      return;
    }
    const list = inRoom ? hereList : awayList;
    if (row.parentElement !== list) insertSorted(list, row);
    refreshEmpty();
  }

  function refreshEmpty() {
    document.getElementById("here-empty").hidden = hereList.children.length > 0;
    document.getElementById("away-empty").hidden = awayList.children.length > 0;
  }

  // Somebody we have no row for (signed up after this page loaded): the room API has their name.
  let learning = null;
  function learnNames() {
    if (learning) return;
    learning = fetch(page.dataset.api, {credentials: "same-origin"})
      .then((r) => (r.ok ? r.json() : {members: []}))
      .then((data) => {
        for (const m of data.members) {
          if (!rowOf(m.user) && m.username) addRow(m.user, m.username);
          paintStatus(m);
        }
        placeAll();
      })
      .catch(() => {})
      .then(() => { learning = null; });
  }

  function placeAll() {
    const here = new Set(client.members(ROOM).map((m) => m.user));
    if (joined) here.add(ME); // from your own point of view you are here, invisible or not
    for (const row of document.querySelectorAll(".member")) place(row.dataset.user, here.has(row.dataset.user));
    for (const uid of here) if (!rowOf(uid)) learnNames();
  }

  // -- what a row says ------------------------------------------------------------------------
  function paintStatus(p) {
    const row = rowOf(p.user);
    if (!row) return;
    // presence.js paints the dot; the status line is ours. Your own row shows your own truth.
    const own = p.user === ME && client.me ? client.me : p;
    row.querySelector("[data-status]").textContent = Demo.statusText(own);
  }

  function paintSeen(uid, state, at) {
    const row = rowOf(uid);
    if (!row) return;
    const el = row.querySelector("[data-seen]");
    if (state === "offline" && at === null) {
      seenAt.delete(uid); // they keep their last seen to themselves (their privacy choice)
      el.textContent = "offline";
    } else if (state === "offline") {
      if (!seenAt.has(uid)) seenAt.set(uid, Date.now());
      el.textContent = "last seen " + Demo.ago(seenAt.get(uid));
    } else {
      seenAt.delete(uid);
      el.textContent = "online now";
    }
  }

  setInterval(() => {
    for (const uid of seenAt.keys()) paintSeen(uid, "offline");
  }, 15000);

  // -- typing ---------------------------------------------------------------------------------
  function renderTyping() {
    const names = Array.from(typers.keys()).map(nameOf);
    const box = document.getElementById("typing");
    for (const row of document.querySelectorAll(".member")) {
      row.querySelector(".typing-badge").hidden = !typers.has(row.dataset.user);
    }
    if (!names.length) {
      box.textContent = "";
      return;
    }
    const who = names.length === 1 ? names[0]
      : names.length === 2 ? names.join(" and ") : names.length + " people";
    box.innerHTML = "";
    const strong = document.createElement("strong");
    strong.textContent = who;
    const dots = document.createElement("span");
    dots.className = "dots";
    dots.innerHTML = "<span>.</span><span>.</span><span>.</span>";
    box.append(strong, (names.length === 1 ? " is" : " are") + " typing", dots);
  }

  function stopTyping(uid) {
    if (!typers.has(uid)) return;
    clearTimeout(typers.get(uid));
    typers.delete(uid);
    renderTyping();
  }

  // -- presence events --------------------------------------------------------------------------
  client.on("open", (hello) => {
    if (hello.me) {
      paintStatus(hello.me);
      syncPicker(hello.me);
    }
  });

  client.on("state", (e) => {
    for (const m of e.members) {
      paintStatus(m);
      if (m.state !== "offline" || seenAt.has(m.user)) paintSeen(m.user, m.state);
    }
    if (e.room === ROOM) {
      joined = true;
      placeAll();
    }
  });

  client.on("join", (e) => {
    paintStatus(e);
    paintSeen(e.user, e.state);
    if (e.room === ROOM) place(e.user, true);
  });

  client.on("leave", (e) => {
    if (e.room !== ROOM) return;
    stopTyping(e.user);
    if (e.user === ME) return; // invisible: the others saw you leave; you are still here
    place(e.user, false);
    paintSeen(e.user, e.state, e.at);
  });

  client.on("update", (e) => {
    paintStatus(e);
    paintSeen(e.user, e.state, e.at);
    if (e.state === "offline") stopTyping(e.user);
  });

  client.on("typing", (e) => {
    if (e.room !== ROOM || e.user === ME) return;
    clearTimeout(typers.get(e.user));
    // The server passes at most one typing event per TYPING_THROTTLE (2 s) per socket.
    typers.set(e.user, setTimeout(() => stopTyping(e.user), 3500));
    renderTyping();
  });

  client.on("self", (me) => {
    paintStatus(me);
    syncPicker(me);
  });

  // -- the chat: messages go to whoever is in the room now (nothing is stored) -------------------
  const composer = document.getElementById("composer");
  const input = document.getElementById("composer-input");
  const messages = document.getElementById("messages");
  input.addEventListener("input", () => {
    if (input.value) client.typing(ROOM);
  });
  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (text && client.send({type: "chat.message", room: ROOM, text})) input.value = "";
  });
  client.on("message", (e) => {
    if (e.type !== "chat.message" || e.room !== ROOM) return;
    const item = document.createElement("li");
    item.className = "message" + (e.user === ME ? " mine" : "");
    const who = document.createElement("strong");
    who.textContent = e.name;
    item.append(who, " ", e.text);
    messages.append(item);
    messages.hidden = false;
    item.scrollIntoView({block: "nearest"});
  });

  // -- the status picker ------------------------------------------------------------------------
  const form = document.getElementById("status-form");
  const message = document.getElementById("status-message");
  const note = document.getElementById("status-note");
  let suggested = ""; // the message an emoji filled in, replaced by the next emoji

  function syncPicker(me) {
    const state = me.state === "dnd" || me.state === "invisible" ? me.state : "online";
    form.querySelector('input[name="state"][value="' + state + '"]').checked = true;
    if (document.activeElement !== message) message.value = me.message || "";
    const emoji = form.querySelector('input[name="emoji"][value="' + CSS.escape(me.emoji || "") + '"]');
    if (emoji) emoji.checked = true;
    note.textContent = {
      dnd: "Everybody sees you as do not disturb.",
      invisible: "You are invisible: everybody else sees you offline.",
      idle: "You are away: any input brings you back.",
    }[me.state] || "";
  }

  client.on("privacy", ({lastSeen, approximate}) => {
    const box = document.getElementById("privacy");
    box.dataset.saved = lastSeen + (approximate ? " approximate" : "");
  });

  form.addEventListener("change", (event) => {
    const field = event.target;
    if (field.name === "last_seen" || field.name === "approximate") {
      client.setPrivacy({
        lastSeen: form.elements.last_seen.value,
        approximate: form.elements.approximate.checked,
      });
    } else if (field.name === "state") {
      client.setStatus({state: field.value});
    } else if (field.name === "emoji") {
      const label = field.closest("label").title;
      if (field.value && (!message.value || message.value === suggested)) {
        message.value = suggested = label;
      }
    }
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const emoji = form.querySelector('input[name="emoji"]:checked');
    client.setStatus({message: message.value.trim(), emoji: emoji ? emoji.value : ""});
  });

  document.getElementById("status-clear").addEventListener("click", () => {
    message.value = suggested = "";
    form.querySelector('input[name="emoji"][value=""]').checked = true;
    client.setStatus({message: "", emoji: ""});
  });

  refreshEmpty();
})();
