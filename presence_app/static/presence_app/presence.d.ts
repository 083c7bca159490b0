/**
 * presence_app — the types of presence.js / presence.mjs (the browser client).
 *
 * From a bundler: `import Presence, {connect} from ".../presence_app/presence.mjs"` (typed by
 * presence.d.mts, which re-exports this file). With a classic <script src=".../presence.js">,
 * include this file in the TypeScript program (tsconfig "files", or a
 * `/// <reference path=".../presence.d.ts" />`): it declares `window.Presence` too.
 */

/** A presence state as shown: "invisible" only ever to the user themself. */
export type PresenceState = "online" | "idle" | "dnd" | "offline" | "invisible";

/** One user's presence (a presence.state member, the client's memory of a user). */
export interface PresenceInfo {
  user: string;
  state: PresenceState;
  last_seen?: number | null;
  last_active?: number | null;
  message?: string;
  emoji?: string;
  device?: string;
  at?: number;
}

export interface HelloFrame {
  type: "hello";
  user: string;
  me: PresenceInfo | null;
  heartbeat: number;
  /** Seconds a closed connection stays in its rooms (DISCONNECT_GRACE). */
  grace?: number;
  activity: number;
  typing: number;
  limits: {
    rooms: number;
    watch: number;
    frames_per_second: number;
    frame_bytes: number;
    message_length: number;
    room_length: number;
    /** The largest room state (bytes of JSON). */
    room_state_bytes: number;
    /** Room state ticks a second. */
    room_state_rate: number;
  };
  /** SSE only: the stream's signed name and the CSRF token for its POSTs. */
  stream?: string;
  csrf?: string;
}

/** presence.join / presence.leave: a user's first connection in, last one out of a room. */
export interface RoomEvent extends PresenceInfo {
  type: "presence.join" | "presence.leave";
  room: string;
}

/** presence.update: somebody's state or status changed (`self`: your own, on all your tabs). */
export interface UpdateEvent extends PresenceInfo {
  type: "presence.update";
  self?: boolean;
}

/** One member of a presence.diff: a join's, leave's or update's fields without type and room. */
export interface DiffMember {
  user: string;
  state: PresenceState;
  at: number | null;
  message: string;
  emoji: string;
}

/**
 * presence.diff: one tick's membership changes in one frame (presence.js accepts them in its
 * hello and fires join, leave and update for each member, then diff). With `room`: who came
 * into (`joined`) and left (`left`) that room; without: `updated`, users whose state or
 * status changed, wherever they are shown.
 */
export interface DiffFrame {
  type: "presence.diff";
  room?: string;
  joined?: DiffMember[];
  left?: DiffMember[];
  updated?: DiffMember[];
}

/**
 * presence.count: a count-only room's live count (COUNT_ONLY_ROOMS), at most once a tick; its
 * members never learn who is in it, but for `sample` (COUNT_SAMPLE members' presences).
 */
export interface CountFrame {
  type: "presence.count";
  room: string;
  count: number;
  sample?: PresenceInfo[];
  /** In the count sent after a join: do you count in it while you show online (not where
   * AUDIENCE hides you from a signed-out visitor, as whom the room is counted)? */
  counted?: boolean;
}

export interface TypingEvent {
  type: "presence.typing";
  user: string;
  room: string;
  state?: PresenceState;
}

/** A snapshot: a room's members (in pages) or the watch list's. */
export interface StateFrame {
  type: "presence.state";
  members: PresenceInfo[];
  room?: string;
  page?: number;
  more?: boolean;
  watch?: boolean;
  /** A room's snapshot: the live states of the members this page shows (not your socket's). */
  states?: RoomStateEntry[];
}

/** One member's live state in a room, per connection (two tabs: two states). */
export interface RoomStateEntry {
  user: string;
  /** An opaque public id of the connection; "server" for presence.set_room_state(). */
  conn: string;
  /** The state; null: it is gone (a leave, a closed tab, cleared). */
  data: Record<string, unknown> | null;
}

/** presence.roomstate: members' states changed in a room (at most one frame per tick). */
export interface RoomStateEvent {
  type: "presence.roomstate";
  room: string;
  states: RoomStateEntry[];
  /** Set when the states come from the room's snapshot (after a join or a reconnect). */
  snapshot?: boolean;
}

export type ErrorCode =
  | "bad_frame"
  | "too_large"
  | "unknown_type"
  | "invalid"
  | "limit"
  | "forbidden"
  | "not_joined"
  | "rate_limited"
  | "unavailable"
  | (string & {});

export interface ErrorFrame {
  type: "error";
  code: ErrorCode;
  detail: string;
  frame?: string;
  room?: string;
}

/** A frame of the project's own (its consumer's), e.g. {type: "chat.message", ...}. */
export interface ProjectFrame {
  type: string;
  [field: string]: unknown;
}

export interface CloseInfo {
  code: number;
  /** Milliseconds until the next attempt; null: no reconnect (closed, or signed out). */
  reconnectIn: number | null;
}

/** What each event's handlers get. */
export interface PrivacyChoice {
  lastSeen: "everyone" | "audience" | "nobody";
  approximate: boolean;
}

export interface PresenceEvents {
  open: HelloFrame;
  join: RoomEvent;
  leave: RoomEvent;
  update: UpdateEvent;
  diff: DiffFrame;
  count: CountFrame;
  self: UpdateEvent;
  state: StateFrame;
  typing: TypingEvent;
  roomstate: RoomStateEvent;
  /** A payload presence.send_to_user() sent to all your tabs and devices. */
  direct: unknown;
  /** Your last-seen privacy choice, after setPrivacy(). */
  privacy: PrivacyChoice;
  error: ErrorFrame;
  close: CloseInfo;
  unauthorized: {code: number};
  /** The project's own frames only: never hello, heartbeat.ack, error or presence.*. */
  message: ProjectFrame;
}

export interface PresenceOptions {
  /** Default: ws(s)://<this host>/ws/presence/. */
  url?: string;
  transport?: "auto" | "websocket" | "sse";
  sseUrl?: string;
  restUrl?: string;
  rooms?: Array<string | number>;
  watch?: Array<string | number>;
  device?: string;
  /** Default true: watch every [data-presence-user] element on the page. */
  autoWatch?: boolean;
  root?: Document | Element;
  labels?: Partial<Record<PresenceState, string>>;
  /** Reconnect backoff, milliseconds. */
  minDelay?: number;
  maxDelay?: number;
  /** Default true: heartbeats keep time in a dedicated worker, which a hidden tab's timer
   * throttling does not slow (false: a page timer). */
  timerWorker?: boolean;
  /** Default true: the browser's tabs of this origin share one connection (a SharedWorker's,
   * else a leader tab's); false: this tab's own. */
  share?: boolean;
  /** Tabs share only with tabs of the same key (default: the csrftoken cookie, which Django
   * rotates at sign-in and presence_app at sign-out). No key (that cookie not readable:
   * CSRF_COOKIE_HTTPONLY, CSRF_USE_SESSIONS), "" or null: this tab's own connection. Pass the
   * signed-in user's id where the cookie is not readable. */
  shareKey?: string | number | null;
  /** The URL of presence.js for the SharedWorker (default: the page's script, or the
   * presence.js beside presence.mjs). */
  workerUrl?: string;
}

export interface StatusChange {
  state?: "online" | "dnd" | "invisible";
  message?: string;
  emoji?: string;
  /** Seconds. */
  expiresIn?: number;
}

export declare class PresenceClient {
  constructor(options?: PresenceOptions);
  /** "websocket" or "sse" (after a fallback): the shared connection's, when shared. */
  readonly transport: "websocket" | "sse";
  /** How this tab's connection is shared: "worker" (a SharedWorker holds it), "leader" (a
   * leader tab does, this one or another), null (this tab's own). */
  readonly shared: "worker" | "leader" | null;
  /** Your user id, once connected. */
  readonly userId: string | null;
  /** Your own presence, as only you see it. */
  readonly me: PresenceInfo | null;
  readonly limits: HelloFrame["limits"] | null;
  /** Subscribes; returns the function that unsubscribes. */
  on<E extends keyof PresenceEvents>(
    event: E,
    handler: (data: PresenceEvents[E], client: PresenceClient) => void,
  ): () => void;
  off<E extends keyof PresenceEvents>(
    event: E,
    handler: (data: PresenceEvents[E], client: PresenceClient) => void,
  ): void;
  join(room: string | number): void;
  leave(room: string | number): void;
  setStatus(status: StatusChange): void;
  /** Who sees your last seen (with LAST_SEEN_PRIVACY on); false while disconnected. */
  setPrivacy(choice: Partial<PrivacyChoice>): boolean;
  watch(ids: Array<string | number>): void;
  /** Throttled for you; only in a room this client joined. */
  typing(room: string | number): void;
  /**
   * Your live state in a room this client joined (null clears it): a JSON object of at most
   * limits.room_state_bytes. Latest wins: sent at most limits.room_state_rate times a second,
   * and again after a reconnect. False when the room is not joined.
   */
  setRoomState(room: string | number, data: Record<string, unknown> | null): boolean;
  /** The other connections' live states in a room. */
  roomState(room: string | number): RoomStateEntry[];
  /** A frame of the project's own on the same socket; false while disconnected. */
  send(frame: ProjectFrame): boolean;
  members(room: string | number): PresenceInfo[];
  /** How many are in the room: a count-only room's live count, else its members' number. */
  count(room: string | number): number;
  get(userId: string | number): PresenceInfo | null;
  close(): void;
}

export interface PresenceStatic {
  readonly version: string;
  readonly Client: typeof PresenceClient;
  readonly labels: Record<PresenceState, string>;
  connect(options?: PresenceOptions): PresenceClient;
  /** The default workerUrl (presence.mjs sets it). */
  workerUrl?: string;
}

export declare const Presence: PresenceStatic;
export declare const connect: PresenceStatic["connect"];
export declare const labels: PresenceStatic["labels"];
export declare const version: string;
export default Presence;

declare global {
  interface Window {
    /** Set by presence.js (and by presence.mjs, which runs it). */
    Presence: PresenceStatic;
    /** Set by <script src="presence.js" data-presence-connect>. */
    presence?: PresenceClient;
  }
}
