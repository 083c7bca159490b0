// A project's TypeScript using presence.mjs the way a bundler would (checked by `tsc --noEmit`,
// nox -s js): the declarations must describe what presence.js does, and type-check this.
import Presence, {
  connect,
  type PresenceEvents,
  type PresenceInfo,
  type RoomStateEntry,
} from "../../presence_app/static/presence_app/presence.mjs";

const client = connect({rooms: ["doc-42"], device: "desktop", minDelay: 500});
const unsubscribe: () => void = client.on("join", (event) => {
  const room: string = event.room;
  const state: PresenceInfo["state"] = event.state;
  console.log(event.user, "joined", room, state);
});
unsubscribe();
client.on("direct", (payload: PresenceEvents["direct"]) => console.log(payload));
client.on("message", (frame) => {
  if (frame.type === "chat.message") console.log(frame["text"]);
});
client.on("close", ({code, reconnectIn}) => console.log(code, reconnectIn ?? "no reconnect"));
client.setStatus({state: "dnd", message: "In a meeting", emoji: "📅", expiresIn: 3600});
const sent: boolean = client.send({type: "chat.message", room: "doc-42", text: "hi"});
client.watch([7, "9"]);
client.on("privacy", ({lastSeen, approximate}) => console.log(lastSeen, approximate));
const asked: boolean = client.setPrivacy({lastSeen: "audience", approximate: true});
console.log(asked);
const members: PresenceInfo[] = client.members("doc-42");
console.log(sent, members.length, client.get(7)?.state, client.transport);

// Live room state: a cursor, and the others' as they move.
const set: boolean = client.setRoomState("doc-42", {line: 3, column: 7});
client.on("roomstate", ({room, states}) => {
  for (const st of states) console.log(room, st.user, st.conn, st.data ?? "gone");
});
const others: RoomStateEntry[] = client.roomState("doc-42");
console.log(set, others.length, client.limits?.room_state_rate);
client.setRoomState("doc-42", null);

// One connection per browser: how this tab's is held; a tab of its own, opting out.
const how: "worker" | "leader" | null = client.shared;
const own = connect({rooms: ["doc-42"], share: false, shareKey: 42, workerUrl: "/static/p.js"});
console.log(how, own.shared);
client.on("open", (hello) => console.log(hello.grace ?? "no grace said"));

// The same object as the classic script's global.
const same: boolean = Presence === window.Presence && Presence.Client === client.constructor;
console.log(same, Presence.version, Presence.labels.dnd);

// @ts-expect-error: "away" is not a state one sets (idle comes by itself)
client.setStatus({state: "away"});
// @ts-expect-error: "friends" is not a privacy choice
client.setPrivacy({lastSeen: "friends"});
// @ts-expect-error: join events carry a room
client.on("join", (event: {room: number}) => event);
