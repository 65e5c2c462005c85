// Moving between pages: the router `app.js` registers, drawing the current
// page again (now or on a timer, one timer at a time), going to a page, and
// a message for the next page drawn ("Saved"), shown once.

import { banner } from "./dom.js";

let router = () => {};
let refreshTimer = null;
let flash = null;

// `app.js` gives its router; every redraw goes through it.
export function onRoute(draw) {
  router = draw;
}

// Draws the current page again.
export function redraw() {
  return router();
}

// Shows `hash`: a new hash renders through "hashchange", the same one is
// rendered again here (never both: a page renders once per action).
export function go(hash) {
  if (location.hash === hash) redraw();
  else location.hash = hash;
}

// Runs `then` (by default, a redraw) in `ms` unless a page is drawn first.
export function refreshIn(ms, then = redraw) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(then, ms);
}

export function stopRefresh() {
  clearTimeout(refreshTimer);
}

export function setFlash(text) {
  flash = text;
}

export function takeFlash() {
  const f = flash;
  flash = null;
  return f ? banner("ok", f) : null;
}
