/*! presence_app — presence.mjs: presence.js as an ES module, for bundlers (Vite, webpack,
 * esbuild, Rollup) and <script type="module">. The code is presence.js's own (imported for its
 * effect, it defines window.Presence); this file only exports it. Types: presence.d.ts.
 *
 *   import Presence, {connect} from "presence_app/static/presence_app/presence.mjs";
 *   const client = connect({rooms: ["doc-42"]});
 *   client.on("join", (e) => console.log(e.user, "joined", e.room));
 */
import "./presence.js";

const Presence = globalThis.Presence;
// A module has no currentScript: the SharedWorker that holds the tabs' one connection runs
// presence.js from beside this file (a bundler that moves it: Presence.connect({workerUrl})).
if (!Presence.workerUrl) Presence.workerUrl = new URL("./presence.js", import.meta.url).href;

/** Opens a connection (the WebSocket, else SSE + REST): `Presence.connect(options)`. */
export const connect = (options) => Presence.connect(options);
/** The client class behind connect(). */
export const PresenceClient = Presence.Client;
/** The default tooltip texts of the states. */
export const labels = Presence.labels;
export const version = Presence.version;
export {Presence};
export default Presence;
