// The types of presence.mjs: presence.d.ts's (TypeScript looks for a .d.mts beside a .mjs).
export * from "./presence.js";
export {default} from "./presence.js";
