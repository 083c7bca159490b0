/* The room list: each room's count and faces, and who is online, kept live from the presence
 * JSON API (a page only hears a room's events once it joins the room, and looking at the list
 * must not put you in every room). The dots themselves are live through presence.js. */
(function () {
  "use strict";

  const client = Demo.connect();
  const EVERY_MS = 3000;
  let busy = false;

  function get(url) {
    return fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)));
  }

  function dot(p) {
    const el = document.createElement("span");
    el.className = "presence-dot presence-" + p.state;
    el.dataset.presenceUser = p.user; // presence.js keeps it live from here on
    return el;
  }

  function paintRoom(card, data) {
    const count = card.querySelector("[data-room-count]");
    count.textContent = String(data.count);
    card.querySelector("[data-room-count-label]").textContent =
      (data.count === 1 ? "person" : "people") + " here";
    const faces = card.querySelector("[data-faces]");
    faces.replaceChildren(...data.members.slice(0, 8).map((m) => {
      const face = document.createElement("li");
      face.className = "face";
      face.style.setProperty("--hue", Demo.hue(m.user));
      face.title = m.username || "#" + m.user;
      face.append((m.username || "?").charAt(0).toUpperCase(), dot(m));
      return face;
    }));
  }

  function paintOnline(data) {
    document.getElementById("online-count").textContent = String(data.count);
    const list = document.getElementById("online-list");
    if (!data.results.length) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = "Nobody yet.";
      list.replaceChildren(li);
      return;
    }
    list.replaceChildren(...data.results.map((p) => {
      const li = document.createElement("li");
      li.className = "person";
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = p.username || "#" + p.user;
      const status = document.createElement("span");
      status.className = "status";
      status.textContent = Demo.statusText(p);
      li.append(dot(p), " ", name, " ", status);
      return li;
    }));
  }

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    const cards = Array.from(document.querySelectorAll("[data-room-card]"));
    const online = document.getElementById("online-card");
    Promise.allSettled([
      ...cards.map((card) => get(card.dataset.api).then((data) => paintRoom(card, data))),
      get(online.dataset.api).then(paintOnline),
    ]).then(() => { busy = false; });
  }

  setInterval(refresh, EVERY_MS);
  document.addEventListener("visibilitychange", refresh);
  // Somebody came online or went offline: the lists probably changed, do not wait.
  let soon = null;
  client.on("update", () => {
    clearTimeout(soon);
    soon = setTimeout(refresh, 300);
  });
})();
