/* The shared note: your pointer's line and position (and the line you clicked) go out with
 * presence.js' setRoomState (presence_app coalesces them); every other tab's come back as
 * roomstate events and are drawn as a named cursor on their line. Two tabs of one user are two
 * cursors (each state is per connection). */
(function () {
  "use strict";

  const page = document.getElementById("note");
  const ROOM = page.dataset.room;
  const NAMES = JSON.parse(document.getElementById("note-names").textContent);
  const lines = document.getElementById("note-lines");
  const viewers = document.getElementById("viewers");
  const client = Demo.connect({rooms: [ROOM]});

  let mine = {line: 0, x: 0, selected: 0};

  function nameOf(uid) {
    return NAMES[uid] || "#" + uid;
  }

  function publish(change) {
    mine = Object.assign({}, mine, change);
    client.setRoomState(ROOM, mine);
    paintSelection();
  }

  function lineAt(target) {
    const li = target && target.closest ? target.closest(".note-line") : null;
    return li ? Number(li.dataset.line) : 0;
  }

  lines.addEventListener("pointermove", (e) => {
    const line = lineAt(e.target);
    if (!line) return;
    const box = lines.getBoundingClientRect();
    const x = Math.round(Math.min(1, Math.max(0, (e.clientX - box.left) / box.width)) * 1000) / 1000;
    publish({line, x});
  });
  lines.addEventListener("click", (e) => {
    const line = lineAt(e.target);
    if (line) publish({line, selected: line === mine.selected ? 0 : line});
  });
  lines.addEventListener("keydown", (e) => {
    const count = lines.children.length;
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    e.preventDefault();
    const from = mine.selected || (e.key === "ArrowDown" ? 0 : count + 1);
    const line = Math.min(count, Math.max(1, from + (e.key === "ArrowDown" ? 1 : -1)));
    publish({line, x: mine.x || 0.05, selected: line});
  });

  function paintSelection() {
    for (const li of lines.children) {
      li.classList.toggle("mine", Number(li.dataset.line) === mine.selected);
    }
  }

  // Everyone else's cursors and selections, from presence.js' memory of the room's states.
  function draw() {
    const states = client.roomState(ROOM).filter((st) => st.data && st.conn !== "server");
    for (const li of lines.children) {
      li.querySelector(".marks").replaceChildren();
      li.classList.remove("selected");
      li.style.removeProperty("--sel-hue");
    }
    viewers.replaceChildren();
    for (const st of states) {
      const hue = Demo.hue(st.user);
      const name = nameOf(st.user);
      const line = lines.querySelector('.note-line[data-line="' + Number(st.data.line) + '"]');
      if (line) {
        const cursor = document.createElement("span");
        cursor.className = "remote-cursor";
        cursor.dataset.user = st.user;
        cursor.dataset.conn = st.conn;
        cursor.style.setProperty("--hue", hue);
        cursor.style.left = (Math.min(1, Math.max(0, Number(st.data.x) || 0)) * 100).toFixed(1) + "%";
        const label = document.createElement("span");
        label.className = "cursor-label";
        label.textContent = name;
        cursor.append(label);
        line.querySelector(".marks").append(cursor);
      }
      const selected = lines.querySelector('.note-line[data-line="' + Number(st.data.selected) + '"]');
      if (selected) {
        selected.classList.add("selected");
        selected.style.setProperty("--sel-hue", hue);
      }
      const item = document.createElement("li");
      item.dataset.user = st.user;
      const face = document.createElement("span");
      face.className = "face";
      face.style.setProperty("--hue", hue);
      face.textContent = name.charAt(0).toUpperCase();
      const text = document.createElement("span");
      text.textContent = name;
      const where = document.createElement("span");
      where.className = "status";
      where.textContent = st.data.selected ? "line " + st.data.line + " · selected " + st.data.selected
        : "line " + st.data.line;
      item.append(face, text, where);
      viewers.append(item);
    }
    document.getElementById("viewers-empty").hidden = states.length > 0;
  }

  client.on("roomstate", (e) => {
    if (e.room === ROOM) draw();
  });
  client.on("leave", (e) => {
    if (e.room === ROOM) draw();
  });
})();
